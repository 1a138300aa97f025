package fuzz

import (
	"reflect"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// quietGlobalLog gives controller-runtime's global logger (pkg/log.Log, what
// envtest, its CRD installation and parts of a manager log through whatever
// a manager's Options.Logger says) a sink that discards, unless someone set
// it already: otherwise its first use 30 s or more after the process began
// prints controller-runtime's "log.SetLogger(...) was never called" and a
// 20-line stack. It runs before the Env's control plane starts: a test that
// wants that log must call ctrllog.SetLogger before NewEnv (controller-runtime
// honours only the first call). What the controllers log is in Result.Logs
// either way.
func quietGlobalLog() {
	if !globalLogSet() {
		ctrllog.SetLogger(logr.Discard())
	}
}

// globalLogSet reports whether controller-runtime's global logger was set.
// pkg/log has no such query, and any call through its logger (even Enabled)
// is what prints the stack, so it looks at the root sink itself: its promise
// is nil once SetLogger fulfilled it (controller-runtime v0.25's
// delegatingLogSink, deleg.go). A sink of another shape (a later version)
// counts as set: stalefuzz then leaves the global logger alone.
func globalLogSet() bool {
	v := reflect.ValueOf(ctrllog.Log.GetSink())
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return true
	}
	p := v.Elem().FieldByName("promise")
	if !p.IsValid() || p.Kind() != reflect.Pointer {
		return true
	}
	return p.IsNil()
}
