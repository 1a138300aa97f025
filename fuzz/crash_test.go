package fuzz

import (
	"strings"
	"testing"
)

// TestStackAt: a crash's message gives the panic and the stack after it,
// up to the next line a logger wrote, not the controller's later logs.
func TestStackAt(t *testing.T) {
	ls := []string{
		`{"level":"info","msg":"Starting workers"}`,
		`E1127 12:00:01.000000       1 runtime.go:142] "Observed a panic" panic="boom"`,
		`goroutine 91 [running]:`,
		`k8s.io/apimachinery/pkg/util/runtime.logPanic(...)`,
		"\t/go/pkg/mod/k8s.io/apimachinery/pkg/util/runtime/runtime.go:132 +0x85",
		``,
		`I1127 12:00:01.100000       1 controller.go:90] "Reconciled"`,
		`panic: nil map`,
		`goroutine 1 [running]:`,
		`main.main()`,
		"\t/src/main.go:5 +0x1d",
	}
	got := strings.Join(stackAt(ls, 1), " | ")
	if !strings.Contains(got, "runtime.go:132") || strings.Contains(got, "Reconciled") {
		t.Errorf("recovered panic: got %q", got)
	}
	if i := lastPanic(ls); i != 7 {
		t.Errorf("lastPanic = %d, want 7", i)
	}
	if got := stackAt(ls, 7); len(got) != 4 || got[3] != "\t/src/main.go:5 +0x1d" {
		t.Errorf("printed panic: got %q", got)
	}
	long := []string{"panic: x"}
	for range 100 {
		long = append(long, "\tframe.go:1")
	}
	if got := stackAt(long, 0); len(got) != maxStack+1 || got[maxStack] != "..." {
		t.Errorf("a long stack is cut at %d lines: got %d", maxStack, len(got))
	}
}
