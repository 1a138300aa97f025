package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stalefuzz/stalefuzz/proxy/audit"
	"github.com/stalefuzz/stalefuzz/proxy/report"
	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

func newReportCmd() *cobra.Command {
	var out, title string
	cmd := &cobra.Command{
		Use:   "report TRACE",
		Short: "Draw a trace as a self-contained HTML page, with its blind-write audit",
		Long: `report draws TRACE (the JSONL a 'stalefuzz proxy' wrote) as a self-contained
HTML page: one lane per client, every held event as a bar from its arrival
at the proxy to its release, every write as a mark with its precondition and
answer; the blind-write audit is below the picture. It prints the path of
the page.`,
		Args: exactArgs("TRACE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := args[0]
			if out == "" {
				out = htmlPath(path)
			}
			tr, err := readTrace(path)
			if err != nil {
				return err
			}
			if title == "" {
				title = filepath.Base(path)
			}
			page := report.Page{
				Title:    title,
				Trace:    tr,
				Sections: []report.Section{{Title: "Blind-write audit", HTML: audit.Of(tr).HTML()}},
			}
			if err := writeAtomic(out, 0o600, func(f *os.File) error { return report.Write(f, page) }); err != nil {
				return fmt.Errorf("unable to write report of %s: %w", path, err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), out)
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "the HTML file to write (default: TRACE with .html in place of .jsonl)")
	cmd.Flags().StringVar(&title, "title", "", "the page's title (default: TRACE's file name)")
	return cmd
}

// htmlPath is trace with .html in place of .jsonl (or added, if it has no
// .jsonl).
func htmlPath(trace string) string {
	return strings.TrimSuffix(trace, ".jsonl") + ".html"
}

func readTrace(path string) (trace.Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return trace.Trace{}, fmt.Errorf("unable to read trace: %w", err)
	}
	defer f.Close()
	tr, err := trace.ReadJSONL(f)
	if err != nil {
		return trace.Trace{}, fmt.Errorf("unable to read trace %s: %w", path, err)
	}
	return tr, nil
}

// writeAtomic writes path through write, with mode perm, so that path appears complete or
// not at all: into a temporary file beside it, renamed into place. On error
// the temporary file is removed and path left as it was.
func writeAtomic(path string, perm os.FileMode, write func(*os.File) error) (retErr error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if retErr != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	if err := write(f); err != nil {
		return err
	}
	if err := f.Chmod(perm); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
