package audit

import (
	"errors"
	"io"

	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// Report is the audit of one trace.
type Report struct {
	Rows       []Row       `json:"rows"`
	Overwrites []Overwrite `json:"overwrites"`
}

// Row counts one client's writes of one kind from one call site.
type Row struct {
	Client      string `json:"client"`
	Caller      string `json:"caller,omitempty"`
	Verb        string `json:"verb"`
	Resource    string `json:"resource"`
	Subresource string `json:"subresource,omitempty"`
	Kind        string `json:"kind"`
	Locked      bool   `json:"locked"`
	Writes      int    `json:"writes"`
	Conflicts   int    `json:"conflicts"`
	Overwrites  int    `json:"overwrites"`
}

// Overwrite is one blind write that replaced a value its writer had not seen.
type Overwrite struct{}

// Of audits tr.
func Of(tr trace.Trace) Report { return Report{} }

// WriteTable writes r as a table for a terminal.
func (r Report) WriteTable(w io.Writer) error { return errors.New("audit: not implemented yet") }
