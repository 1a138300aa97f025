package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/stalefuzz/stalefuzz/proxy/audit"
)

func newAuditCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "audit TRACE",
		Short: "List a trace's writes by client and call site, and the blind writes among them",
		Long: `audit classifies every write in TRACE (the JSONL a 'stalefuzz proxy' wrote)
by client, call site, verb and object kind, says whether it carried an
optimistic lock (a resourceVersion precondition), and flags the blind writes
that replaced a value their writer had not seen. It prints a table, or with
--json the audit as JSON.`,
		Args: exactArgs("TRACE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			tr, err := readTrace(args[0])
			if err != nil {
				return err
			}
			rep := audit.Of(tr)
			out := cmd.OutOrStdout()
			if asJSON {
				b, err := json.Marshal(rep)
				if err != nil {
					return fmt.Errorf("unable to encode the audit of %s: %w", args[0], err)
				}
				_, err = fmt.Fprintf(out, "%s\n", b)
				return err
			}
			if err := rep.WriteTable(out); err != nil {
				return fmt.Errorf("unable to write the audit of %s: %w", args[0], err)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the audit as JSON (audit.Report) instead of a table")
	return cmd
}
