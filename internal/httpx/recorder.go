package httpx

import (
	"bytes"
	"errors"
	"net/http"
)

// Recorder is the http.ResponseWriter of a handler run inside the
// process, whose answer the caller reads or merges before anything
// reaches a client (a PROPFIND's sub-requests, a merged listing, a
// third-party copy's local write). It is the one such recorder of every
// role; httptest.ResponseRecorder is for tests.
//
// Not safe for concurrent use.
type Recorder struct {
	h http.Header
	// Code is the status written (200 once a body is written without
	// one), 0 while nothing has been.
	Code int
	// Body is the body written, up to Limit bytes.
	Body bytes.Buffer
	// Limit bounds Body; 0: no bound. A write past it fails with
	// ErrTooBig, unless Truncate is set, in which case the bytes past it
	// are dropped and the write reports success (a caller that keeps
	// only the start of an error's reason).
	Limit    int
	Truncate bool
}

// ErrTooBig is the error of a write past a Recorder's Limit.
var ErrTooBig = errors.New("httpx: recorded answer too large")

// NewRecorder returns an empty Recorder bounded by limit (0: no bound).
func NewRecorder(limit int, truncate bool) *Recorder {
	return &Recorder{h: http.Header{}, Limit: limit, Truncate: truncate}
}

// Header is the recorded header.
func (r *Recorder) Header() http.Header { return r.h }

// WriteHeader records the first status written.
func (r *Recorder) WriteHeader(code int) {
	if r.Code == 0 {
		r.Code = code
	}
}

// Write records p, as Limit and Truncate say.
func (r *Recorder) Write(p []byte) (int, error) {
	if r.Code == 0 {
		r.Code = http.StatusOK
	}
	if r.Limit > 0 && r.Body.Len()+len(p) > r.Limit {
		if !r.Truncate {
			return 0, ErrTooBig
		}
		r.Body.Write(p[:r.Limit-r.Body.Len()])
		return len(p), nil
	}
	return r.Body.Write(p)
}

// Reset empties the recorder for another answer.
func (r *Recorder) Reset() {
	clear(r.h)
	r.Code = 0
	r.Body.Reset()
}

// Flush sends the recorded answer to w as it was recorded.
func (r *Recorder) Flush(w http.ResponseWriter) {
	for k, v := range r.h {
		w.Header()[k] = v
	}
	if r.Code == 0 {
		r.Code = http.StatusOK
	}
	w.WriteHeader(r.Code)
	_, _ = w.Write(r.Body.Bytes())
}
