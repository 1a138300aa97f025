package proxy

import (
	"net/http"
	"path"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
)

// callerTransport tells the proxy, in CallerHeader, where each write of an
// in-process client was made: the first stack frame outside the machinery a
// controller writes through. RoundTrip runs on the goroutine that called the
// client (client-go's Request.Do and controller-runtime's client call it
// synchronously), so that frame is the controller's call site.
type callerTransport struct{ next http.RoundTripper }

func (t callerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet || r.Method == http.MethodHead || r.Method == http.MethodOptions {
		return t.next.RoundTrip(r)
	}
	if site := callSite(); site != "" {
		r = r.Clone(r.Context())
		r.Header.Set(CallerHeader, site)
	}
	return t.next.RoundTrip(r)
}

// machinery lists the packages whose frames are never a call site: the
// runtime, net/http, the Kubernetes client libraries and this package.
var machinery = []string{
	"runtime.", "net/http.", "net/http/", "golang.org/x/net/", "reflect.",
	"k8s.io/client-go/", "k8s.io/apimachinery/", "k8s.io/utils/", "k8s.io/api/",
	"sigs.k8s.io/controller-runtime/", "sigs.k8s.io/structured-merge-diff/",
	"github.com/stalefuzz/stalefuzz/proxy.",
}

// callSite is "path/file.go:line Func" of the first frame outside machinery,
// the path relative to the main module when it is in it; "" if none.
func callSite() string {
	pcs := make([]uintptr, 64)
	n := runtime.Callers(3, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		if f.Function != "" && !isMachinery(f.Function) {
			pkg, fn := splitFunc(f.Function)
			// An external test package lives in its package's directory.
			dir := strings.TrimSuffix(pkg, "_test")
			file := path.Join(strings.TrimPrefix(strings.TrimPrefix(dir, mainModule()), "/"), path.Base(f.File))
			return file + ":" + strconv.Itoa(f.Line) + " " + fn
		}
		if !more {
			return ""
		}
	}
}

func isMachinery(fn string) bool {
	for _, m := range machinery {
		if strings.HasPrefix(fn, m) {
			return true
		}
	}
	return false
}

// splitFunc splits "example.com/a/b.(*T).M" into "example.com/a/b" and
// "(*T).M".
func splitFunc(fn string) (pkg, name string) {
	slash := strings.LastIndex(fn, "/")
	dot := strings.Index(fn[slash+1:], ".")
	if dot < 0 {
		return fn, ""
	}
	return fn[:slash+1+dot], fn[slash+2+dot:]
}

var mainModule = sync.OnceValue(func() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return bi.Main.Path
	}
	return ""
})
