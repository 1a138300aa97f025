package driver

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/stalefuzz/stalefuzz/fuzz/target"
	"github.com/stalefuzz/stalefuzz/fuzz/truthtable"
)

// TestTruthTable measures the truth table of the target file named by
// STALEFUZZ_TARGET (target.MeasureTruthTable) with the options in
// STALEFUZZ_TRUTH_TABLE (a truthtable.Options as JSON; "{}" for the
// defaults). Either unset, it is skipped.
func TestTruthTable(t *testing.T) {
	path, opts := os.Getenv("STALEFUZZ_TARGET"), os.Getenv("STALEFUZZ_TRUTH_TABLE")
	if path == "" || opts == "" {
		t.Skip("STALEFUZZ_TARGET and STALEFUZZ_TRUTH_TABLE are not set: this test is run by stalefuzz truth-table")
	}
	var o truthtable.Options
	if err := json.Unmarshal([]byte(opts), &o); err != nil {
		t.Fatalf("STALEFUZZ_TRUTH_TABLE=%q: %v", opts, err)
	}
	tg, err := target.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	tt, err := target.MeasureTruthTable(context.Background(), path, o, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(TruthTableLine{Table: tt, Markdown: tt.Markdown(tg.Setting)})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println(TruthTablePrefix + string(b))
}
