package watchframe

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"mime"
	"strings"
)

// ErrMalformed is wrapped by the error Next returns for a frame that cannot be
// split or parsed. The stream is still intact: forward the returned Raw, then
// Rest.
var ErrMalformed = errors.New("malformed watch frame")

const (
	defaultMaxFrame = 16 << 20 // the limit client-go's streaming decoder applies
	minMaxFrame     = 4        // one protobuf length prefix
	bufSize         = 32 << 10
)

// Meta is what the proxy needs to know about one watch event.
type Meta struct {
	Type             string // ADDED, MODIFIED, DELETED, BOOKMARK, ERROR (as sent, not validated)
	APIVersion, Kind string // of the object ("" if the frame does not say)
	Namespace, Name  string
	ResourceVersion  string
	InitialEventsEnd bool // BOOKMARK carrying annotation k8s.io/initial-events-end: "true"
}

// Frame is one event as read: Raw is exactly the bytes consumed from the stream
// for it. Meta is the zero value when Next returns an error.
type Frame struct {
	Raw  []byte
	Meta Meta
}

// Reader splits one watch response body into frames. It is not safe for
// concurrent use.
type Reader struct {
	src  io.Reader
	br   *bufio.Reader // nil when the media type is unsupported
	next func() (Frame, error)
	max  int
	off  int64             // bytes returned in frames so far, for error messages
	err  error             // sticky
	strs map[string]string // interned strings of protobuf frames (protobufMeta)
}

// NewReader returns a Reader for a watch response body r served with the given
// Content-Type. maxFrame bounds the length of every Frame.Raw: zero or negative
// means 16 MiB, the limit client-go's streaming decoder applies; values below 4
// are raised to 4. For a media type the Reader cannot split, the first Next
// returns an error wrapping errors.ErrUnsupported and nothing is read from r.
func NewReader(r io.Reader, contentType string, maxFrame int) *Reader {
	switch {
	case maxFrame <= 0:
		maxFrame = defaultMaxFrame
	case maxFrame < minMaxFrame:
		maxFrame = minMaxFrame
	}
	rd := &Reader{src: r, max: maxFrame}
	mt, params, err := mime.ParseMediaType(contentType)
	switch {
	case err != nil:
		rd.err = fmt.Errorf("watchframe: unable to split watch stream of content type %q: %w: %v", contentType, errors.ErrUnsupported, err)
	case mt == "application/vnd.kubernetes.protobuf" && params["stream"] == "watch":
		rd.next = rd.nextProtobuf
	case mt == "application/json" || strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"):
		rd.next = rd.nextJSON
	default:
		rd.err = fmt.Errorf("watchframe: unable to split watch stream of content type %q: %w", contentType, errors.ErrUnsupported)
	}
	if rd.err == nil {
		rd.br = bufio.NewReaderSize(r, bufSize)
	}
	return rd
}

// Next reads the next frame. Forward f.Raw before looking at err: it may be
// non-empty even when err is non-nil, including io.EOF (trailing whitespace of
// a JSON stream). io.EOF means the stream ended cleanly between frames. Any
// other error means the rest of the stream, available from Rest, cannot be
// split; see the package documentation.
func (r *Reader) Next() (Frame, error) {
	if r.err != nil {
		return Frame{}, r.err
	}
	f, err := r.next()
	r.off += int64(len(f.Raw))
	if err != nil {
		r.err = err
		f.Meta = Meta{}
	}
	return f, err
}

// Rest returns the bytes of the stream not yet returned in a Frame: those
// already buffered, followed by the rest of the underlying stream. After Next
// has returned an error other than io.EOF, copying Rest forwards the remainder
// of the stream byte-exactly. Do not call Next after reading from Rest.
func (r *Reader) Rest() io.Reader {
	if r.br == nil {
		return r.src
	}
	return r.br
}

// readFailed reports a frame cut short by the end of the stream or by a failed read.
func (r *Reader) readFailed(framing string, raw []byte, err error) (Frame, error) {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return Frame{Raw: raw}, fmt.Errorf("watchframe: unable to read %s watch event at offset %d: %w: stream ends after %d bytes of it: %w",
			framing, r.off, ErrMalformed, len(raw), io.ErrUnexpectedEOF)
	}
	return Frame{Raw: raw}, fmt.Errorf("watchframe: unable to read %s watch event at offset %d: %w", framing, r.off, err)
}

// malformed reports a frame that was read but cannot be split or parsed. The
// reason is formatted, not wrapped, so that the error of a parser that met the
// end of a frame early does not read as io.ErrUnexpectedEOF of the stream.
func (r *Reader) malformed(framing string, raw []byte, format string, args ...any) (Frame, error) {
	return Frame{Raw: raw}, fmt.Errorf("watchframe: unable to parse %s watch event at offset %d: %w: %s",
		framing, r.off, ErrMalformed, fmt.Sprintf(format, args...))
}

// appendCapped appends src to dst, growing dst's capacity to at most limit
// (which must be at least len(dst)+len(src)) so that a frame close to maxFrame
// does not allocate twice that.
func appendCapped(dst, src []byte, limit int) []byte {
	if n := len(dst) + len(src); n > cap(dst) {
		c := min(max(2*cap(dst), n), limit)
		grown := make([]byte, len(dst), max(c, n))
		copy(grown, dst)
		dst = grown
	}
	return append(dst, src...)
}
