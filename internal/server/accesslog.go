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
		lw := &httpx.Meter{ResponseWriter: w}
		var in *countReader
		if r.Body != nil && r.Body != http.NoBody {
			in = &countReader{ReadCloser: r.Body}
			r.Body = in
		}
		// Deferred: a handler that aborts its answer (a proxied read
		// whose source broke panics with http.ErrAbortHandler) is logged
		// too.
		defer func() {
			status := lw.Status
			if status == 0 {
				status = http.StatusOK
			}
			n := lw.Bytes
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
