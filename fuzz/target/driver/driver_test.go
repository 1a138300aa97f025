package driver

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stalefuzz/stalefuzz/fuzz"
	"github.com/stalefuzz/stalefuzz/fuzz/longrun"
	"github.com/stalefuzz/stalefuzz/fuzz/target"
)

func FuzzTarget(f *testing.F) {
	path := os.Getenv("STALEFUZZ_TARGET")
	if path == "" {
		f.Skip("STALEFUZZ_TARGET is not set: this fuzz target is run by stalefuzz fuzz and stalefuzz replay")
	}
	target.Fuzz(f, path)
}

// TestLongCampaign runs a campaign of the target file named by
// STALEFUZZ_TARGET with package longrun's driver, for a target whose
// executions outlast go test -fuzz's 10 s (its budget), for
// STALEFUZZ_LONG_TIME: what stalefuzz fuzz runs instead of FuzzTarget for
// such a target. It fails at a finding (without fuzz.SearchOnEnv) with the
// message a FuzzTarget finding has.
func TestLongCampaign(t *testing.T) {
	path, d := os.Getenv("STALEFUZZ_TARGET"), os.Getenv("STALEFUZZ_LONG_TIME")
	if path == "" || d == "" {
		t.Skip("STALEFUZZ_TARGET and STALEFUZZ_LONG_TIME are not set: this campaign is run by stalefuzz fuzz")
	}
	dur, err := time.ParseDuration(d)
	if err != nil {
		t.Fatalf("STALEFUZZ_LONG_TIME=%q: %v", d, err)
	}
	share, err := fuzz.ParseShard(os.Getenv("STALEFUZZ_LONG_SHARE"))
	if err != nil {
		t.Fatalf("STALEFUZZ_LONG_SHARE: %v", err)
	}
	target.LongCampaign(t, path, longrun.Campaign{
		Target:   "FuzzTarget",
		Share:    share,
		Corpus:   os.Getenv("STALEFUZZ_LONG_CORPUS"),
		Seeds:    []string{filepath.Join("testdata", "fuzz", "FuzzTarget")},
		Time:     dur,
		Progress: os.Stdout,
	})
}
