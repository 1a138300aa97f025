package target

import (
	"fmt"
	"testing"
)

// TestAwaitCurrent: the kinds a run waits for are those of the workload
// controllers kube-controller-manager runs, by either of their names, "*"
// for all of them, less those "-name" turns off.
func TestAwaitCurrent(t *testing.T) {
	for _, c := range []struct {
		controllers []string
		want        string
	}{
		{[]string{"statefulset", "garbagecollector"}, "[apps/v1, Kind=StatefulSet]"},
		{[]string{"job-controller"}, "[batch/v1, Kind=Job]"},
		{[]string{"replicaset-controller", "deployment"}, "[apps/v1, Kind=Deployment apps/v1, Kind=ReplicaSet]"},
		{[]string{"*", "-job-controller", "-daemonset"}, "[apps/v1, Kind=Deployment apps/v1, Kind=ReplicaSet apps/v1, Kind=StatefulSet]"},
		{[]string{"-statefulset", "*"}, "[apps/v1, Kind=DaemonSet apps/v1, Kind=Deployment batch/v1, Kind=Job apps/v1, Kind=ReplicaSet]"},
		{[]string{"garbagecollector"}, "[]"},
	} {
		if got := fmt.Sprint((&Builtins{Controllers: c.controllers}).awaitCurrent()); got != c.want {
			t.Errorf("controllers %v: AwaitCurrent %s, want %s", c.controllers, got, c.want)
		}
	}
}
