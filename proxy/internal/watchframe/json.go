package watchframe

import (
	"cmp"
	"encoding/json"
	"io"
	"strings"

	kjson "sigs.k8s.io/json"
)

// jsonEvent is the part of a JSON watch event that Meta needs. Every other
// field is skipped.
type jsonEvent struct {
	Type   string `json:"type"`
	Object struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Metadata   jsonMeta `json:"metadata"`
		// Rows is read only when the object is a meta.k8s.io Table (see
		// tableRows): another object's "rows" may have any shape.
		Rows json.RawMessage `json:"rows"`
	} `json:"object"`
}

// jsonMeta is the part of an object's metadata that Meta needs.
type jsonMeta struct {
	Namespace       string `json:"namespace"`
	Name            string `json:"name"`
	ResourceVersion string `json:"resourceVersion"`
	Annotations     struct {
		InitialEventsEnd string `json:"k8s.io/initial-events-end"`
	} `json:"annotations"`
}

// tableRows is the part of a meta.k8s.io Table's rows that Meta needs: the
// metadata of each row's object (a PartialObjectMetadata by default, the
// whole object with includeObject=Object, absent with includeObject=None).
// The cells are skipped.
type tableRows []struct {
	Object struct {
		Metadata jsonMeta `json:"metadata"`
	} `json:"object"`
}

// jsonSplitter finds the end of one JSON object. It tracks only nesting depth
// and strings; whether the object is valid JSON is left to the unmarshaller.
type jsonSplitter struct {
	depth   int
	started bool // '{' seen
	inStr   bool
	escaped bool // previous byte was a backslash inside a string
}

// scan consumes bytes of p. It returns how many belong to the frame and
// whether the object ended at p[n-1]. bad reports that p[n] cannot start an
// object.
func (s *jsonSplitter) scan(p []byte) (n int, done, bad bool) {
	for i, c := range p {
		switch {
		case s.inStr:
			switch {
			case s.escaped:
				s.escaped = false
			case c == '\\':
				s.escaped = true
			case c == '"':
				s.inStr = false
			}
		case !s.started:
			if isSpace(c) {
				continue
			}
			if c != '{' {
				return i, false, true
			}
			s.started, s.depth = true, 1
		case c == '"':
			s.inStr = true
		case c == '{' || c == '[':
			s.depth++
		case c == '}' || c == ']':
			s.depth--
			if s.depth == 0 {
				return i + 1, true, false
			}
		}
	}
	return len(p), false, false
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

func (r *Reader) nextJSON() (Frame, error) {
	var raw []byte
	var s jsonSplitter
	for {
		if r.br.Buffered() == 0 {
			if _, err := r.br.Peek(1); err != nil {
				if err == io.EOF && !s.started {
					return Frame{Raw: raw}, io.EOF // raw is whitespace at most
				}
				return r.readFailed("JSON", raw, err)
			}
		}
		chunk, _ := r.br.Peek(min(r.br.Buffered(), r.max-len(raw))) // all buffered: cannot fail
		n, done, bad := s.scan(chunk)
		if done { // take the whitespace already received after the object
			for n < len(chunk) && isSpace(chunk[n]) {
				n++
			}
		}
		raw = appendCapped(raw, chunk[:n], r.max)
		_, _ = r.br.Discard(n) // n <= Buffered: cannot fail
		switch {
		case bad:
			return r.malformed("JSON", raw, "want '{', got %q", chunk[n])
		case done:
			return r.parseJSON(raw)
		case len(raw) >= r.max:
			return r.malformed("JSON", raw, "event is longer than %d bytes", r.max)
		}
	}
}

func (r *Reader) parseJSON(raw []byte) (Frame, error) {
	var ev jsonEvent
	if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, &ev); err != nil {
		return r.malformed("JSON", raw, "%v", err)
	}
	o, m := &ev.Object, &ev.Object.Metadata
	if o.Kind == "Table" && strings.HasPrefix(o.APIVersion, "meta.k8s.io/") && len(o.Rows) > 0 {
		// A watch with Accept ...;as=Table;g=meta.k8s.io (kubectl get -w)
		// sends each event's object as a Table of one row; the object the
		// event is about is that row's.
		var rows tableRows
		if err := kjson.UnmarshalCaseSensitivePreserveInts(o.Rows, &rows); err != nil {
			return r.malformed("JSON", raw, "rows of %s Table: %v", o.APIVersion, err)
		}
		if len(rows) > 0 {
			row := rows[0].Object.Metadata
			row.ResourceVersion = cmp.Or(row.ResourceVersion, m.ResourceVersion)
			m = &row
		}
	}
	return Frame{Raw: raw, Meta: Meta{
		Type:             ev.Type,
		APIVersion:       o.APIVersion,
		Kind:             o.Kind,
		Namespace:        m.Namespace,
		Name:             m.Name,
		ResourceVersion:  m.ResourceVersion,
		InitialEventsEnd: ev.Type == "BOOKMARK" && m.Annotations.InitialEventsEnd == "true",
	}}, nil
}
