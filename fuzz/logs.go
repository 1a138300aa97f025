package fuzz

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/go-logr/logr"

	"github.com/stalefuzz/stalefuzz/proxy/redact"
)

// Bounds of an execution's log (Result.Logs).
const (
	// MaxLogLines is how many lines the log keeps per client: the latest.
	MaxLogLines = 500
	// maxLogLine is where a longer line is cut.
	maxLogLine = 4 << 10
)

// Logs is what the controllers of one execution logged: an in-process
// manager's log (StartManager: controller-runtime's own lines, reconciler
// errors, what a reconciler logs through its context's logger) and an
// out-of-process controller's standard output and error (Command, where the
// caller left them nil), each line named by its client, in time order. It
// keeps the last MaxLogLines lines of each client; Dropped counts the
// earlier ones. Every credential-shaped part of a line (a PEM private key,
// a JSON Web Token, a kubeconfig: package proxy/redact) is replaced before
// the line is kept, so that no Secret reaches a result or a file.
type Logs struct {
	Lines   []LogLine
	Dropped map[string]int // by client; nil when none was
}

// LogLine is one line of an execution's log.
type LogLine struct {
	At     time.Time
	Client string
	Text   string
}

// WriteTo writes the log as text, a line per LogLine: its time after mark
// in seconds, its client and its text; and first, for each client that lost
// some, how many of its earlier lines were dropped.
func (l Logs) WriteTo(w io.Writer, mark time.Time) error {
	var b strings.Builder
	for _, c := range slices.Sorted(maps.Keys(l.Dropped)) {
		fmt.Fprintf(&b, "# %s: %d earlier lines dropped (the log keeps the last %d of each client)\n", c, l.Dropped[c], MaxLogLines)
	}
	for _, ln := range l.Lines {
		fmt.Fprintf(&b, "%+8.3f %s: %s\n", ln.At.Sub(mark).Seconds(), ln.Client, ln.Text)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Last returns the last n lines of the named client.
func (l Logs) Last(client string, n int) []LogLine {
	var out []LogLine
	for i := len(l.Lines) - 1; i >= 0 && len(out) < n; i-- {
		if l.Lines[i].Client == client {
			out = append(out, l.Lines[i])
		}
	}
	slices.Reverse(out)
	return out
}

// lastLines is the client's last n log lines, indented under a heading, for
// an error that must say why a controller stopped; "" when it logged none.
func lastLines(l Logs, client string, n int) string {
	lines := l.Last(client, n)
	if len(lines) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "; its last %d log lines:", len(lines))
	for _, ln := range lines {
		b.WriteString("\n\t" + ln.Text)
	}
	return b.String()
}

// execLog collects an execution's log; its zero value is ready to use.
type execLog struct {
	mu      sync.Mutex
	lines   map[string][]LogLine // by client, oldest first
	dropped map[string]int
}

// add keeps one line of client, redacted and cut to maxLogLine.
func (l *execLog) add(client, text string) {
	text = redactText(strings.TrimRight(text, "\r\n"))
	if len(text) > maxLogLine {
		text = text[:maxLogLine] + " [cut]"
	}
	ln := LogLine{At: time.Now(), Client: client, Text: text}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lines == nil {
		l.lines = map[string][]LogLine{}
	}
	ls := append(l.lines[client], ln)
	if len(ls) > MaxLogLines {
		if l.dropped == nil {
			l.dropped = map[string]int{}
		}
		l.dropped[client] += len(ls) - MaxLogLines
		ls = slices.Delete(ls, 0, len(ls)-MaxLogLines)
	}
	l.lines[client] = ls
}

// logs returns what was kept, in time order.
func (l *execLog) logs() Logs {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out Logs
	for _, ls := range l.lines {
		out.Lines = append(out.Lines, ls...)
	}
	slices.SortStableFunc(out.Lines, func(a, b LogLine) int { return a.At.Compare(b.At) })
	if len(l.dropped) > 0 {
		out.Dropped = maps.Clone(l.dropped)
	}
	return out
}

// redactText returns s with each word (split at spaces, quotes, = and
// commas, so that key=value and key="value" yield the value) that holds a credential (package
// proxy/redact's judgement of a string) replaced; or s whole replaced when
// the credential spans words (a PEM block, a kubeconfig).
func redactText(s string) string {
	whole, _ := redact.Value(redact.Resource{}, "", s).(string)
	if whole == s {
		return s
	}
	out := s
	words := strings.FieldsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || strings.ContainsRune(`="',`, r) })
	for _, f := range words {
		if r, _ := redact.Value(redact.Resource{}, "", f).(string); r != f {
			out = strings.ReplaceAll(out, f, r)
		}
	}
	if again, _ := redact.Value(redact.Resource{}, "", out).(string); again == out {
		return out
	}
	return whole
}

// lineWriter is an io.Writer that keeps each line written to it in the
// execution's log as client's: a child's standard output or error.
type lineWriter struct {
	log    *execLog
	client string
	mu     sync.Mutex
	buf    []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 && len(w.buf) <= maxLogLine {
			return len(p), nil
		}
		if i < 0 {
			i = len(w.buf) - 1
		}
		w.log.add(w.client, string(w.buf[:i+1]))
		w.buf = w.buf[i+1:]
	}
}

// flush keeps what is left of a line, if anything.
func (w *lineWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.log.add(w.client, string(w.buf))
		w.buf = nil
	}
}

// managerLog is the log sink of a StartManager manager: it counts
// controller-runtime's "Starting workers" messages (StartManager waits for
// one), and keeps every line at V(0) and every error in the execution's
// log as the manager's client's.
type managerLog struct {
	starts *workerStarts
	log    *execLog
	client string
	name   string
	values []any
}

func (m *managerLog) Init(logr.RuntimeInfo)  {}
func (m *managerLog) Enabled(level int) bool { return level == 0 }
func (m *managerLog) Info(level int, msg string, kv ...any) {
	m.starts.Info(level, msg, kv...)
	m.log.add(m.client, m.line("", msg, nil, kv))
}
func (m *managerLog) Error(err error, msg string, kv ...any) {
	m.log.add(m.client, m.line("ERROR ", msg, err, kv))
}
func (m *managerLog) WithValues(kv ...any) logr.LogSink {
	c := *m
	c.values = append(slices.Clip(m.values), kv...)
	return &c
}
func (m *managerLog) WithName(name string) logr.LogSink {
	c := *m
	if c.name != "" {
		name = c.name + "." + name
	}
	c.name = name
	return &c
}

// line formats one log call as "[ERROR ]name: msg key=value ... error=err".
func (m *managerLog) line(level, msg string, err error, kv []any) string {
	var b strings.Builder
	b.WriteString(level)
	if m.name != "" {
		b.WriteString(m.name + ": ")
	}
	b.WriteString(msg)
	all := append(slices.Clip(m.values), kv...)
	for i := 0; i < len(all); i += 2 {
		var v any = "(missing)"
		if i+1 < len(all) {
			v = all[i+1]
		}
		fmt.Fprintf(&b, " %v=%v", all[i], v)
	}
	if err != nil {
		fmt.Fprintf(&b, " error=%q", err.Error())
	}
	return b.String()
}

// Logf adds a line to the execution's log (Result.Logs) as source's: what
// the scenario's own workload did, beside what the controllers logged.
func (x *Exec) Logf(source, format string, args ...any) {
	x.logs.add(source, fmt.Sprintf(format, args...))
}
