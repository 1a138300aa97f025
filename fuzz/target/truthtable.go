package target

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/stalefuzz/stalefuzz/fuzz/truthtable"
)

// MeasureTruthTable loads and prepares the target file at path, starts its
// Env and runs truthtable.Measure with o: per knob setting, the
// no-fault run and each one-fault pattern anchored to its events and
// writes. Progress (the build, then each cell) goes to progress (nil:
// nowhere).
func MeasureTruthTable(ctx context.Context, path string, o truthtable.Options, progress io.Writer) (truthtable.Table, error) {
	t, env, err := prepareEnv(ctx, path, progress)
	if err != nil {
		return truthtable.Table{}, err
	}
	report := func(pattern string, setting map[string]int, c *truthtable.Cell) {
		if progress != nil {
			fmt.Fprintf(progress, "stalefuzz: %s | %s: %s\n", pattern, t.Setting(setting), c)
		}
	}
	tt, err := truthtable.Measure(ctx, env, o, report)
	return tt, errors.Join(err, env.Stop())
}

// Setting names a knob setting by the target file's values ("strategy=
// accurate, paused=true"), leaving out knobs at their first value;
// "defaults" when every knob is.
func (t *Target) Setting(m map[string]int) string {
	var parts []string
	for _, k := range t.Knobs {
		v, ok := m[k.Name]
		if !ok || v == 0 {
			continue
		}
		name := fmt.Sprint(v)
		if v >= 0 && v < len(k.Values) {
			name = k.Values[v]
		}
		parts = append(parts, k.Name+"="+name)
	}
	// Knobs the file does not declare (none, from Scenario) come last.
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if m[k] != 0 && !slices.ContainsFunc(t.Knobs, func(kn Knob) bool { return kn.Name == k }) {
			parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
		}
	}
	if len(parts) == 0 {
		return "defaults"
	}
	return strings.Join(parts, ", ")
}
