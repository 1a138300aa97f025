package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stalefuzz/stalefuzz/fuzz"
	"github.com/stalefuzz/stalefuzz/fuzz/target"
	"github.com/stalefuzz/stalefuzz/fuzz/target/driver"
	"github.com/stalefuzz/stalefuzz/fuzz/truthtable"
)

func newTruthTableCmd() *cobra.Command {
	var o truthtable.Options
	var out, findings string
	cmd := &cobra.Command{
		Use:   "truth-table TARGET.yaml",
		Short: "Run each realistic one-fault pattern at each knob setting and print what the oracles said, as a Markdown table",
		Long: `truth-table runs, for each knob setting of the target file, a no-fault run,
derives from its trace the one-fault patterns of the target's space (in the
realistic space: a relist after 410 Gone at a client's first MODIFIED event
of each resource it watches, a restart right after or before the answer to
its first write, each also onto an apiserver behind by the target's
maxDelay, a broken watch, a held event), and runs the no-fault schedule and
each pattern --runs times. Each cell says which oracles fired in how many of
the judged runs ("—" none; known findings apart), and the harness errors,
which are never findings. The input of each cell with a violation is kept
in --findings, and the table ends with the command that replays each. The
table (Markdown, with the command and its figures) goes to --out, or to the
standard output. The exit status is 0 when
the table was made, whatever it shows; 2 for a usage or harness error.`,
		Args: exactArgs("TARGET.yaml"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.Runs < 1 || o.Positions < 1 || o.Settings < 0 {
				return usagef(cmd, "--runs %d, --positions %d, --settings %d: want at least 1, 1 and 0", o.Runs, o.Positions, o.Settings)
			}
			return truthTable(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], o, out, findings)
		},
	}
	cmd.Flags().IntVar(&o.Runs, "runs", 2, "runs a cell")
	cmd.Flags().IntVar(&o.Positions, "positions", 1, "anchors per client, resource and kind of fault (its 1st, 2nd, ... event or write)")
	cmd.Flags().IntVar(&o.Settings, "settings", 0, "knob settings, those with the fewest knobs away from their first value first (0: all)")
	cmd.Flags().StringVar(&out, "out", "", "write the table to this file instead of the standard output")
	cmd.Flags().StringVar(&findings, "findings", "stalefuzz-findings", "directory for the inputs of the cells with a violation")
	return cmd
}

// truthTable runs the driver's TestTruthTable on file and writes its table.
func truthTable(ctx context.Context, stdout, stderr io.Writer, file string, o truthtable.Options, out, findings string) error {
	opts, err := json.Marshal(o)
	if err != nil {
		return exitError{exitHarness, err}
	}
	got, runErr, err := runDriverTest(ctx, stderr, file, "TestTruthTable", "STALEFUZZ_TRUTH_TABLE="+string(opts))
	if err != nil {
		return err
	}
	line, ok := parseLine[driver.TruthTableLine](got, driver.TruthTablePrefix)
	if !ok {
		return exitError{exitHarness, fmt.Errorf("the truth table of %s was not made (%v); its output is above", file, runErr)}
	}
	md := truthTableMarkdown(file, o, line)
	inputs, err := keepCellInputs(file, line, findings)
	if err != nil {
		return exitError{exitHarness, err}
	}
	md += inputs
	if out == "" {
		_, err = io.WriteString(stdout, md)
		return err
	}
	if err := os.WriteFile(out, []byte(md), 0o644); err != nil {
		return exitError{exitHarness, fmt.Errorf("writing the truth table of %s: %w", file, err)}
	}
	fmt.Fprintf(stdout, "result: the truth table of %s (%d patterns × %d knob settings, %d runs a cell, %v) is in %s\n",
		file, len(line.Table.Patterns), len(line.Table.Settings), line.Table.Runs, line.Table.Took.Round(time.Second), out)
	return nil
}

// truthTableMarkdown is the table with what made it.
func truthTableMarkdown(file string, o truthtable.Options, line driver.TruthTableLine) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Truth table of %s\n\n", file)
	fmt.Fprintf(&b, "Written by `stalefuzz truth-table %s --runs %d --positions %d --settings %d` in %v. ",
		file, o.Runs, o.Positions, o.Settings, line.Table.Took.Round(time.Second))
	b.WriteString("Each pattern is one fault anchored to an event or a write of that knob setting's no-fault run; " +
		"\"on 1.37's defaults\" says whether a cluster on Kubernetes 1.37's defaults (WatchList, consistent lists) can do it. " +
		"Each cell: the oracles that fired, in how many of the judged runs (**bold**), the runs with only known findings, " +
		"`—` when none fired; harness errors are counted apart and are never findings; `n/a`: that setting's no-fault run gave no such anchor.\n\n")
	b.WriteString(line.Markdown)
	return b.String()
}

// keepCellInputs writes the input of each cell with a violation into dir
// (TARGET-truth-table-STAMP-N.input, its origin beside it) and returns the
// Markdown that lists them with the command that replays each; "" when no
// cell has one.
func keepCellInputs(file string, line driver.TruthTableLine, dir string) (string, error) {
	t, err := target.Load(file)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	stamp := time.Now().Format("20060102-150405")
	n := 0
	for _, p := range line.Table.Patterns {
		for si, setting := range line.Table.Settings {
			c := line.Table.Cells[p.Schedule][si]
			if c == nil || c.Input == nil {
				continue
			}
			n++
			if n == 1 {
				b.WriteString("\nThe cells with a violation, each as an input that replays it:\n\n")
			}
			where := fmt.Sprintf("%s | %s", p.Schedule, t.Setting(setting))
			path, err := fuzz.WriteInput(dir, fmt.Sprintf("%s-truth-table-%s-%d", t.Name, stamp, n), c.Input, "stalefuzz truth-table: "+where)
			if err != nil {
				return "", err
			}
			fmt.Fprintf(&b, "- %s: %s\n  `stalefuzz replay %s %s --count 20`\n", where, c, file, path)
		}
	}
	return b.String(), nil
}
