package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stalefuzz/stalefuzz/fuzz/target"
)

// withPatchFlag gives cmd --patch NAME=FILE (repeatable): the controller
// NAME of the target file is built with the patch FILE applied to its
// module (target.Controller.Patches), by this command and by every process
// it starts (through target.PatchesEnv). A fix is tried this way:
// `stalefuzz replay T INPUT --count 20 --patch NAME=fix.patch`.
func withPatchFlag(cmd *cobra.Command) {
	var patches []string
	cmd.Flags().StringArrayVar(&patches, "patch", nil, "NAME=FILE: build the target's Go controller NAME with the unified diff FILE applied to its module (patch -p1 at the module's root; repeatable), as a target file's patches do: a fix tried against the release")
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
	for _, p := range patches {
		name, file, ok := strings.Cut(p, "=")
		if !ok || name == "" || file == "" {
			return usagef(cmd, "--patch %q: want NAME=FILE (a controller of the target file, a patch file)", p)
		}
		abs, err := filepath.Abs(file)
		if err != nil {
			return usagef(cmd, "--patch %s: %v", p, err)
		}
		if _, err := os.Stat(abs); err != nil {
			return usagef(cmd, "--patch %s: no patch file: %v", p, err)
		}
		if strings.ContainsAny(name+abs, ":") {
			return usagef(cmd, "--patch %s: a name or path with \":\" cannot be passed on (%s separates entries with it)", p, target.PatchesEnv)
		}
		entries = append(entries, name+"="+abs)
	}
	return os.Setenv(target.PatchesEnv, strings.Join(entries, ":"))
}

// patchNote says which controllers are built with patches ("" for none),
// for a command's result.
func patchNote() string {
	v := os.Getenv(target.PatchesEnv)
	if v == "" {
		return ""
	}
	return fmt.Sprintf("built with patches: %s\n", strings.ReplaceAll(strings.ReplaceAll(v, ":", ", "), "=", " + "))
}

// patchArgs are the --patch flags that give a command the patches this one
// runs with (" --patch NAME=FILE" each; "" for none), for the replay
// commands it prints.
func patchArgs() string {
	v := os.Getenv(target.PatchesEnv)
	if v == "" {
		return ""
	}
	var b strings.Builder
	for _, e := range strings.Split(v, ":") {
		b.WriteString(" --patch " + e)
	}
	return b.String()
}
