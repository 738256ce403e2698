package server

import (
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/lakefed/lakefed/internal/httpx"
)

// tagged is h as the federator's and the cache's listeners serve it: every
// request gets its ID first (httpx.TagRequest: the X-Request-ID header,
// and the context every later log line about it is written with), and,
// with access_log, one "request" line once it is answered, as the storage
// role writes for its own.
func (s *Server) tagged(h http.Handler) http.Handler {
	if !s.cfg.AccessLog {
		return httpx.RequestIDs(h)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		r, _ = httpx.TagRequest(w, r)
		lw := &logWriter{ResponseWriter: w}
		var in *countReader
		if r.Body != nil && r.Body != http.NoBody {
			in = &countReader{ReadCloser: r.Body}
			r.Body = in
		}
		// Deferred: a handler that aborts its answer (a proxied read
		// whose source broke panics with http.ErrAbortHandler) is logged
		// too.
		defer func() {
			status := lw.status
			if status == 0 {
				status = http.StatusOK
			}
			n := lw.n
			if in != nil {
				n += in.n
			}
			s.log.LogAttrs(r.Context(), slog.LevelInfo, "request",
				slog.String("method", r.Method), slog.String("path", r.URL.Path),
				slog.Int("status", status), slog.Int64("bytes", n),
				slog.Duration("duration", time.Since(start)), slog.String("remote", r.RemoteAddr))
		}()
		h.ServeHTTP(lw, r)
	})
}

// logWriter notes the status and the body bytes of an answer for the
// access log.
type logWriter struct {
	http.ResponseWriter
	status int   // 0 until a status is written
	n      int64 // body bytes written
}

func (w *logWriter) WriteHeader(code int) {
	// 1xx answers (103 Early Hints) come before the final one.
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *logWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(p)
	w.n += int64(n)
	return n, err
}

// ReadFrom keeps sendfile for files served from disk (the cache's
// blocks): net/http's response is an io.ReaderFrom.
func (w *logWriter) ReadFrom(r io.Reader) (int64, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	var n int64
	var err error
	if rf, ok := w.ResponseWriter.(io.ReaderFrom); ok {
		n, err = rf.ReadFrom(r)
	} else {
		n, err = io.Copy(w.ResponseWriter, r)
	}
	w.n += n
	return n, err
}

// Unwrap lets http.ResponseController (the reverse proxy's flushes, the
// deadlines of long transfers) reach the connection.
func (w *logWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// countReader counts the bytes of a request body the handler read.
type countReader struct {
	io.ReadCloser
	n int64
}

func (r *countReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	r.n += int64(n)
	return n, err
}
