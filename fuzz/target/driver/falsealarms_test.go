package driver

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stalefuzz/stalefuzz/fuzz/target"
)

// TestFalseAlarms measures the false alarms of the target file named by
// STALEFUZZ_TARGET in STALEFUZZ_FALSE_ALARMS executions
// (target.MeasureFalseAlarms), saving the executions with a violation in
// STALEFUZZ_FALSE_ALARMS_DIR when it is set, at the knob settings
// STALEFUZZ_FALSE_ALARMS_KNOBS keeps ("write=blind,edit=100ms"; unset:
// every one). Either of the first two unset, it is skipped.
func TestFalseAlarms(t *testing.T) {
	path, n := os.Getenv("STALEFUZZ_TARGET"), os.Getenv("STALEFUZZ_FALSE_ALARMS")
	if path == "" || n == "" {
		t.Skip("STALEFUZZ_TARGET and STALEFUZZ_FALSE_ALARMS are not set: this test is run by stalefuzz false-alarms")
	}
	count, err := strconv.Atoi(n)
	if err != nil {
		t.Fatalf("STALEFUZZ_FALSE_ALARMS=%q: %v", n, err)
	}
	knobs := map[string]string{}
	for _, kv := range strings.Split(os.Getenv("STALEFUZZ_FALSE_ALARMS_KNOBS"), ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			knobs[k] = v
		}
	}
	f, err := target.MeasureFalseAlarms(context.Background(), path, target.FalseAlarmsOptions{
		Executions: count, Knobs: knobs, Progress: os.Stderr, Dir: os.Getenv("STALEFUZZ_FALSE_ALARMS_DIR"),
		Answer: os.Getenv("STALEFUZZ_FALSE_ALARMS_ANSWER"),
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println(FalseAlarmsPrefix + string(b))
}
