package server

import (
	"context"
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
			s.logRequest(r.Context(), r.Method, r.URL.Path, status, n, start, r.RemoteAddr)
		}()
		h.ServeHTTP(lw, r)
	})
}

// logRequest writes the access log line of one answered request: the
// handler's (tagged) and the fast path's (frontResponder) alike. ctx
// carries the request's ID.
func (s *Server) logRequest(ctx context.Context, method, path string, status int, bytes int64, start time.Time, remote string) {
	s.log.LogAttrs(ctx, slog.LevelInfo, "request",
		slog.String("method", method), slog.String("path", path),
		slog.Int("status", status), slog.Int64("bytes", bytes),
		slog.Duration("duration", time.Since(start)), slog.String("remote", remote))
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
