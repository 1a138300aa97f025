package nodes_test

import (
	"context"
	"time"

	"github.com/stalefuzz/stalefuzz/fuzz"
	"github.com/stalefuzz/stalefuzz/fuzz/nodes"
)

// A scenario's Start joins a zone of three nodes and runs their kubelets
// for the execution; its Drive stops one kubelet at 200 ms and brings it
// back at 2.5 s (scenarios/kcm's NodeZones does this over two zones).
func Example() {
	start := func(ctx context.Context, x *fuzz.Exec) error {
		f := &nodes.Fleet{Client: x.Direct, Renewal: 100 * time.Millisecond, LeaseDuration: time.Second}
		x.Value = f
		for _, name := range []string{"a1", "a2", "a3"} {
			if err := f.Join(ctx, nodes.Node{Name: name, Zone: "zone-a"}); err != nil {
				return err
			}
		}
		x.Go("kubelets", f.Run)
		return nil // then start the controllers under test
	}
	drive := func(_ context.Context, x *fuzz.Exec) error {
		f := x.Value.(*nodes.Fleet)
		x.After(200*time.Millisecond, "a1's kubelet stops", func(context.Context) error { return f.Stop("a1") })
		x.After(2500*time.Millisecond, "a1's kubelet comes back", func(ctx context.Context) error { return f.Resume(ctx, "a1") })
		return nil
	}
	_ = fuzz.Scenario{Name: "zone-a", Start: start, Drive: drive}
}
