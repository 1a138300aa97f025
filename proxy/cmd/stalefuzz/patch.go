package main

import (
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stalefuzz/stalefuzz/fuzz/target"
)

// withPatchFlag gives cmd --patch NAME=FILE and NAME:MODULE=FILE
// (repeatable): the target file's Go controller NAME is built with the
// patch FILE applied to its own module, or to MODULE, one it requires
// (target.SourcePatch), by this command and by every process it starts
// (through target.PatchesEnv). A fix is tried this way:
// `stalefuzz replay T INPUT --count 20 --patch NAME=fix.patch`.
func withPatchFlag(cmd *cobra.Command) {
	var patches []string
	cmd.Flags().StringArrayVar(&patches, "patch", nil, "NAME=FILE: build the target's Go controller NAME with the unified diff FILE (patch -p1 at the module's root) applied to its module; NAME:MODULE=FILE applies it to MODULE, a module the controller requires (repeatable): a fix tried against the release, as a target file's patches are")
	pre := cmd.PreRunE
	cmd.PreRunE = func(cmd *cobra.Command, args []string) error {
		if err := setPatches(cmd, patches); err != nil {
			return err
		}
		if pre != nil {
			return pre(cmd, args)
		}
		return nil
	}
}

// setPatches checks --patch values and adds them to target.PatchesEnv.
func setPatches(cmd *cobra.Command, patches []string) error {
	if len(patches) == 0 {
		return nil
	}
	var entries []string
	if v := os.Getenv(target.PatchesEnv); v != "" {
		entries = append(entries, v)
	}
	for _, v := range patches {
		name, p, err := target.ParsePatchEntry(v)
		if err != nil {
			return usagef(cmd, "--patch: %v", err)
		}
		if _, err := os.Stat(p.File); err != nil {
			return usagef(cmd, "--patch %s: no patch file: %v", v, err)
		}
		if strings.Contains(p.File, "\n") {
			return usagef(cmd, "--patch %q: a path with a newline cannot be passed on", v)
		}
		lhs := name
		if p.Module != "" {
			lhs += ":" + p.Module
		}
		entries = append(entries, lhs+"="+p.File)
	}
	return os.Setenv(target.PatchesEnv, strings.Join(entries, "\n"))
}

// patchEntries are the entries of target.PatchesEnv.
func patchEntries() []string {
	var out []string
	for _, e := range strings.Split(os.Getenv(target.PatchesEnv), "\n") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// patchNote says which controllers are built with patches ("" for none),
// for a command's result.
func patchNote() string {
	e := patchEntries()
	if len(e) == 0 {
		return ""
	}
	return "built with patches: " + strings.Join(e, ", ") + "\n"
}

// patchArgs are the --patch flags that give a command the patches this one
// runs with (" --patch ENTRY" each; "" for none), for the replay commands
// it prints.
func patchArgs() string {
	var b strings.Builder
	for _, e := range patchEntries() {
		b.WriteString(" --patch " + e)
	}
	return b.String()
}
