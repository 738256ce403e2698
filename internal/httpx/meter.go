package httpx

import (
	"io"
	"net/http"
)

// Meter wraps a ResponseWriter and notes what an answer was: its final
// status and the body bytes written, for metrics and access logs. It
// forwards ReadFrom, so a file body still goes out with sendfile
// (net/http's response is an io.ReaderFrom), and Unwrap, so
// http.ResponseController (flushes, deadlines of long transfers) reaches
// the connection. The one recorder of this kind: the storage role, the
// federator's and the cache's access logs use it.
type Meter struct {
	http.ResponseWriter
	// Status is the final status written (1xx answers such as 103 Early
	// Hints come before it), 200 once a body is written without one, and
	// 0 while nothing is.
	Status int
	// Bytes counts the body bytes written.
	Bytes int64
}

// Reset points m at w with nothing written, for reuse from a pool.
func (m *Meter) Reset(w http.ResponseWriter) { *m = Meter{ResponseWriter: w} }

func (m *Meter) WriteHeader(code int) {
	if m.Status == 0 && code >= 200 {
		m.Status = code
	}
	m.ResponseWriter.WriteHeader(code)
}

func (m *Meter) Write(p []byte) (int, error) {
	if m.Status == 0 {
		m.Status = http.StatusOK
	}
	n, err := m.ResponseWriter.Write(p)
	m.Bytes += int64(n)
	return n, err
}

func (m *Meter) ReadFrom(r io.Reader) (int64, error) {
	if m.Status == 0 {
		m.Status = http.StatusOK
	}
	var n int64
	var err error
	if rf, ok := m.ResponseWriter.(io.ReaderFrom); ok {
		n, err = rf.ReadFrom(r)
	} else {
		n, err = io.Copy(m.ResponseWriter, r)
	}
	m.Bytes += n
	return n, err
}

func (m *Meter) Unwrap() http.ResponseWriter { return m.ResponseWriter }
