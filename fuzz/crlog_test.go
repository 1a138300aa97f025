package fuzz

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// crlogChild selects what TestGlobalLogNoStackNoSteal's child process does.
const crlogChild = "STALEFUZZ_TEST_CRLOG_CHILD"

// TestGlobalLogNoStackNoSteal runs this test binary twice as a child (the
// global logger is per process): one that never sets controller-runtime's
// global logger logs through it 31 s after it began, after quietGlobalLog,
// and prints no "log.SetLogger(...) was never called" stack; in one that
// sets its own, globalLogSet sees it (false before, true after) and
// quietGlobalLog keeps it. It takes about 31 s.
func TestGlobalLogNoStackNoSteal(t *testing.T) {
	if os.Getenv(crlogChild) != "" {
		crlogChildMain()
		return
	}
	if testing.Short() {
		t.Skip("waits 31 s for controller-runtime's deadline")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	type out struct {
		b   []byte
		err error
	}
	run := func(mode string) chan out {
		ch := make(chan out, 1)
		go func() {
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestGlobalLogNoStackNoSteal$", "-test.count=1")
			cmd.Env = append(os.Environ(), crlogChild+"="+mode)
			b, err := cmd.CombinedOutput()
			ch <- out{b, err}
		}()
		return ch
	}
	late, user := run("late"), run("user")
	if o := <-user; o.err != nil || !strings.Contains(string(o.b), "set before: false\nset after: true\n") || !strings.Contains(string(o.b), `USER "level"=0 "msg"="hello"`) {
		t.Errorf("a child that sets its own logger: err %v, want globalLogSet false before and true after, and its logger kept by quietGlobalLog; output:\n%s", o.err, o.b)
	}
	o := <-late
	if o.err != nil || !strings.Contains(string(o.b), "logged late") {
		t.Fatalf("child logging 31 s after its start: err %v; output:\n%s", o.err, o.b)
	}
	if strings.Contains(string(o.b), "was never called") {
		t.Errorf("child logging 31 s after its start, after quietGlobalLog: controller-runtime printed its stack:\n%s", o.b)
	}
}

// crlogChildMain is the child's part.
func crlogChildMain() {
	switch os.Getenv(crlogChild) {
	case "user":
		fmt.Printf("set before: %v\n", globalLogSet())
		ctrllog.SetLogger(funcr.New(func(prefix, args string) { fmt.Println("USER " + args) }, funcr.Options{}))
		fmt.Printf("set after: %v\n", globalLogSet())
		quietGlobalLog()
		ctrllog.Log.Info("hello")
	case "late":
		quietGlobalLog()
		// controller-runtime prints its stack on the first use of its
		// logger 30 s after the package was initialised.
		<-time.After(31 * time.Second)
		ctrllog.Log.Info("x")
		fmt.Println("logged late")
	}
}
