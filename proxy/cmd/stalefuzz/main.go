package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

func main() {
	quietLog()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// quietLog gives controller-runtime's global logger a sink that discards.
// The command never logs through it, but envtest does (reading a target's
// CRDs, for one): its first use 30 s or more after the process began (a
// target's first build takes minutes) would print controller-runtime's
// "log.SetLogger(...) was never called" and a 20-line stack.
func quietLog() { ctrllog.SetLogger(logr.Discard()) }

// run executes the command line args and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	// An interrupt or SIGTERM cancels the command's context instead of
	// ending the process at once, so that what it started stops and its
	// work directory in $TMPDIR is removed. proxy handles its signals
	// itself (the first writes the trace, the second exits).
	stop := context.CancelFunc(func() {})
	defer func() { stop() }()
	var interrupted context.Context
	root.PersistentPreRun = func(cmd *cobra.Command, _ []string) {
		if cmd.Name() == "proxy" {
			return
		}
		interrupted, stop = signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
		cmd.SetContext(interrupted)
	}
	err := root.Execute()
	var ue usageError
	var ee exitError
	switch {
	case err == nil:
		return 0
	case interrupted != nil && interrupted.Err() != nil && !(errors.As(err, &ee) && ee.status == exitFinding):
		fmt.Fprintf(stderr, "stalefuzz: interrupted (%v): what it started is stopped and its work directory removed\n", err)
		return exitHarness
	case errors.As(err, &ee):
		if ee.status != exitFinding {
			fmt.Fprintf(stderr, "stalefuzz: %v\n", err)
		}
		return ee.status
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "stalefuzz: %v\nRun '%s --help' for usage.\n", err, ue.cmd)
		return 2
	case strings.HasPrefix(err.Error(), "unknown command "): // cobra's, for the root
		fmt.Fprintf(stderr, "stalefuzz: %v\nRun 'stalefuzz --help' for usage.\n", err)
		return 2
	default:
		fmt.Fprintf(stderr, "stalefuzz: %v\n", err)
		return 1
	}
}

// usageError is a command line that does not make sense; the exit status
// is 2.
type usageError struct {
	cmd string // the command's path ("stalefuzz proxy"), for the help hint
	err error
}

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(cmd *cobra.Command, format string, args ...any) error {
	return usageError{cmd: cmd.CommandPath(), err: fmt.Errorf(format, args...)}
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "stalefuzz",
		Short: "Fuzz a controller declared in a target file; run the informer proxy in front of any apiserver, and read its traces",
		Long: `stalefuzz fuzz searches fault schedules for a controller declared in a
target file (any language; 'stalefuzz fuzz --help'), and stalefuzz replay runs
a finding's saved input again.

stalefuzz proxy runs the informer proxy in front of any apiserver a kubeconfig
reaches (envtest, kind, a real cluster): each named client gets its own
kubeconfig, and rules delay, hold, drop or break the watch events it
receives, expire its re-watches, serve its lists from the past, or stop it
between two writes. Every request and watch event is recorded in a trace,
which 'stalefuzz report' draws and 'stalefuzz audit' audits for blind writes.`,
		SilenceUsage:      true,
		SilenceErrors:     true,
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return usageError{cmd: cmd.CommandPath(), err: err}
	})
	fuzzCmd, replayCmd, falseAlarmsCmd, truthTableCmd, prepareCmd := newFuzzCmd(), newReplayCmd(), newFalseAlarmsCmd(), newTruthTableCmd(), newPrepareCmd()
	for _, c := range []*cobra.Command{fuzzCmd, replayCmd, falseAlarmsCmd, truthTableCmd, prepareCmd} {
		withPatchFlag(c)
	}
	root.AddCommand(newProxyCmd(), newReportCmd(), newAuditCmd(), fuzzCmd, replayCmd, falseAlarmsCmd, truthTableCmd, prepareCmd, newEncodeCmd())
	return root
}

// noArgs is cobra.NoArgs as a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef(cmd, "%s takes no arguments; got %q", cmd.Name(), args)
	}
	return nil
}

// exactArgs is cobra.ExactArgs(1) with a message naming the argument.
func exactArgs(name string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != 1 {
			return usagef(cmd, "%s takes one argument, %s; got %d", cmd.Name(), name, len(args))
		}
		return nil
	}
}
