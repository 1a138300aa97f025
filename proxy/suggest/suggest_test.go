package suggest

import "testing"

func TestClosest(t *testing.T) {
	fields := []string{"command", "watches", "kubeconfig", "env"}
	for _, c := range []struct {
		name string
		max  int
		want string
	}{
		{"comand", 2, "command"},
		{"Watches", 0, "watches"}, // case only: always
		{"watchs", 2, "watches"},
		{"kubecfg", 2, ""}, // 3 edits away
		{"kubecfg", 3, "kubeconfig"},
		{"xyz", 2, ""},
	} {
		if got := Closest(c.name, fields, c.max); got != c.want {
			t.Errorf("Closest(%q, max %d) = %q, want %q", c.name, c.max, got, c.want)
		}
	}
}
