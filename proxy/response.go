package proxy

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"strings"
)

// readObject records in ex what the trace keeps of a held response body: its
// resourceVersion and, for a success, Proxy.Fields. A gzip-encoded body (the
// apiserver compresses responses over 128 KiB for clients that accept gzip,
// as Go clients do by default) is read from a decompressed copy of at most
// maxCapture bytes; the client gets the original bytes either way.
func (c *Client) readObject(ex *exchange, resp *http.Response, body []byte) {
	switch strings.ToLower(strings.TrimSpace(resp.Header.Get("Content-Encoding"))) {
	case "", "identity":
	case "gzip":
		plain, ok := gunzip(body, maxCapture)
		if !ok {
			return
		}
		body = plain
	default:
		return // no apiserver sends another encoding
	}
	ct := resp.Header.Get("Content-Type")
	ex.rec.ReturnedRV = bodyResourceVersion(body, ct)
	if len(c.p.Fields) > 0 && resp.StatusCode/100 == 2 {
		ex.rec.Fields = jsonFields(body, ct, c.p.Fields)
	}
}

// gunzip decompresses b; false if it is not valid gzip or decompresses to more
// than limit bytes.
func gunzip(b []byte, limit int) ([]byte, bool) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, false
	}
	plain, err := io.ReadAll(io.LimitReader(zr, int64(limit)+1))
	if err != nil || len(plain) > limit {
		return nil, false
	}
	return plain, true
}
