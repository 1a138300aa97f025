package proxy

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/endpoints/request"

	"github.com/stalefuzz/stalefuzz/proxy/internal/watchframe"
	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// stream replaces a watch response body. A pump goroutine reads the upstream
// body eagerly, so the apiserver's watcher is never stalled, splits it into
// events and gives each a release time; Read hands events to the
// ReverseProxy's copy loop (which flushes each write) no earlier than that
// time and strictly in arrival order.
type stream struct {
	c        *Client
	id       uint64
	group    string
	resource string
	upstream io.ReadCloser
	ctx      interface{ Done() <-chan struct{} }

	mu      sync.Mutex
	queue   []pending
	cur     []byte        // the part of the current event not yet read
	last    time.Time     // release time of the newest queued event
	ended   bool          // upstream finished
	endErr  error         // why (io.EOF for a clean end)
	wake    chan struct{} // signalled when the queue grows or the upstream ends
	closed  chan struct{}
	closeMu sync.Once
	pumped  chan struct{}
}

type pending struct {
	raw     []byte
	release time.Time
	id      trace.EventID
	traced  bool
}

// newStream wraps resp.Body; nil if the proxy is stopping.
func (c *Client) newStream(resp *http.Response, info *request.RequestInfo) *stream {
	s := &stream{
		c: c, id: c.p.nextID.Add(1), group: info.APIGroup, resource: info.Resource, upstream: resp.Body,
		ctx:  resp.Request.Context(),
		wake: make(chan struct{}, 1), closed: make(chan struct{}), pumped: make(chan struct{}),
	}
	if !c.p.addStream(s) {
		return nil
	}
	go s.pump(watchframe.NewReader(resp.Body, resp.Header.Get("Content-Type"), c.p.MaxFrame))
	return s
}

func (s *stream) pump(fr *watchframe.Reader) {
	defer close(s.pumped)
	for {
		f, err := fr.Next()
		if len(f.Raw) > 0 {
			if err == nil {
				if broken := s.admit(f); broken {
					// A Break: what is queued is released in order, then
					// the stream ends as a watch timeout ends it.
					_ = s.upstream.Close()
					s.end(io.EOF)
					return
				}
			} else {
				s.enqueueRaw(f.Raw)
			}
		}
		if err == nil {
			continue
		}
		if errors.Is(err, watchframe.ErrMalformed) || errors.Is(err, errors.ErrUnsupported) {
			s.c.p.Log.Info("proxy: cannot parse watch frame — stream passed through without delay",
				"client", s.c.Name, "resource", s.resource, "error", err.Error())
			err = s.passThrough(fr.Rest())
		}
		s.end(err)
		return
	}
}

// admit decides an event's fate by the rules in force and queues it; true if
// a Break rule ends the stream before it.
func (s *stream) admit(f watchframe.Frame) (broken bool) {
	now := time.Now()
	m := f.Meta
	s.c.p.clock.observe(now, m.ResourceVersion)
	v := s.c.p.rules.Load().decide(event{
		client: s.c.Name, resource: s.resource, typ: m.Type, namespace: m.Namespace, name: m.Name,
	}, now)
	ev := trace.Event{
		Client: s.c.Name, Stream: s.id, Group: s.group, Resource: s.resource, Type: m.Type, Kind: m.Kind,
		Namespace: m.Namespace, Name: m.Name, ResourceVersion: m.ResourceVersion,
		InitialEnd: m.InitialEventsEnd, Arrived: now, Fate: trace.Pending, Rule: v.rule,
	}
	if v.rule >= 0 && (v.action == Drop || v.action == Break) {
		ev.Fate = trace.Dropped
		if v.action == Break {
			ev.Fate = trace.Broken
		}
		s.c.p.trace.AddEvent(ev)
		return v.action == Break
	}
	id := s.c.p.trace.AddEvent(ev)
	s.enqueue(pending{raw: f.Raw, release: v.release, id: id, traced: true})
	return false
}

func (s *stream) enqueueRaw(b []byte) {
	s.enqueue(pending{raw: b, release: time.Now()})
}

// enqueue appends p, never releasing it before an earlier event: release times
// within a stream are non-decreasing, so nothing overtakes a held event.
func (s *stream) enqueue(p pending) {
	s.mu.Lock()
	if p.release.Before(s.last) {
		p.release = s.last
	}
	s.last = p.release
	s.queue = append(s.queue, p)
	s.mu.Unlock()
	s.signal()
}

// passThrough forwards the rest of an unparseable stream, undelayed but still
// behind whatever is queued.
func (s *stream) passThrough(r io.Reader) error {
	for {
		buf := make([]byte, 32<<10)
		n, err := r.Read(buf)
		if n > 0 {
			s.enqueueRaw(buf[:n])
		}
		if err != nil {
			return err
		}
	}
}

func (s *stream) end(err error) {
	s.mu.Lock()
	s.ended, s.endErr = true, err
	s.mu.Unlock()
	s.signal()
}

func (s *stream) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Read returns released bytes, waiting for the head event's release time;
// after the upstream ended and the queue drained, the upstream's error. One
// Read returns as many released events as fit in b, so that a burst (the
// initial events of a WatchList) costs one flush, not one per event.
func (s *stream) Read(b []byte) (int, error) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		s.mu.Lock()
		n, wait := s.take(b)
		if n > 0 {
			s.mu.Unlock()
			return n, nil
		}
		if wait == 0 && s.ended {
			err := s.endErr
			s.mu.Unlock()
			if err == nil {
				err = io.EOF
			}
			return 0, err
		}
		s.mu.Unlock()
		var due <-chan time.Time
		if wait > 0 {
			if timer == nil {
				timer = time.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			due = timer.C
		}
		select {
		case <-due:
		case <-s.wake:
		case <-s.closed:
			return 0, errStreamClosed
		case <-s.ctx.Done():
			return 0, errStreamClosed
		}
	}
}

// take copies released bytes into b: the rest of the current event, then
// whole released events while they fit. With nothing released it returns how
// long until the head event is due (0 if the queue is empty). Called with
// s.mu held.
func (s *stream) take(b []byte) (n int, wait time.Duration) {
	now := time.Now()
	for {
		if len(s.cur) > 0 {
			c := copy(b[n:], s.cur)
			s.cur = s.cur[c:]
			n += c
			if len(s.cur) > 0 {
				return n, 0
			}
		}
		if len(s.queue) == 0 {
			return n, 0
		}
		head := s.queue[0]
		if d := head.release.Sub(now); d > 0 {
			return n, d
		}
		if n > 0 && n+len(head.raw) > len(b) {
			return n, 0 // the next event starts the next Read
		}
		s.queue[0] = pending{}
		s.queue = s.queue[1:]
		s.cur = head.raw
		if head.traced {
			s.c.p.trace.SetFate(head.id, trace.Released, now)
		}
	}
}

var errStreamClosed = errors.New("proxy: watch stream closed")

// Close ends the stream: the upstream body is closed, the pump finishes, and
// events still queued are recorded as aborted.
func (s *stream) Close() error {
	s.closeMu.Do(func() {
		close(s.closed)
		_ = s.upstream.Close()
		<-s.pumped
		s.mu.Lock()
		for _, p := range s.queue {
			if p.traced {
				s.c.p.trace.SetFate(p.id, trace.Aborted, time.Time{})
			}
		}
		s.queue = nil
		s.mu.Unlock()
		s.c.p.removeStream(s)
	})
	return nil
}

func (s *stream) pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

// protobufResourceVersion reads metadata.resourceVersion from a protobuf
// object or list body ("k8s\x00" + runtime.Unknown): ObjectMeta and ListMeta
// are field 1 of every object and list, and carry resourceVersion as field 6
// and field 2 respectively.
func protobufResourceVersion(body []byte) string {
	const magic = "k8s\x00"
	if !bytes.HasPrefix(body, []byte(magic)) {
		return ""
	}
	var u runtime.Unknown
	if u.Unmarshal(body[len(magic):]) != nil {
		return ""
	}
	field := protowire.Number(6)
	if strings.HasSuffix(u.Kind, "List") {
		field = 2
	}
	meta, ok := protoField(u.Raw, 1)
	if !ok {
		return ""
	}
	rv, _ := protoField(meta, field)
	return string(rv)
}

// protoField returns the bytes of the first length-delimited field num in msg.
func protoField(msg []byte, num protowire.Number) ([]byte, bool) {
	for len(msg) > 0 {
		n, typ, l := protowire.ConsumeTag(msg)
		if l < 0 {
			return nil, false
		}
		msg = msg[l:]
		if n == num && typ == protowire.BytesType {
			v, l := protowire.ConsumeBytes(msg)
			return v, l >= 0
		}
		l = protowire.ConsumeFieldValue(n, typ, msg)
		if l < 0 {
			return nil, false
		}
		msg = msg[l:]
	}
	return nil, false
}
