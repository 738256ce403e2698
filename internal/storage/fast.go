package storage

// The storage role's answers on the fast path (package fastpath): a plain
// GET or HEAD of a regular file below Root, or of nothing at all.
//
// Why: a federator's Stat fan-out is many small HEADs on keep-alive
// connections, and net/http's own request path cost more CPU than the
// handler; fastpath's package comment has the figures and the rules of
// what reaches a Responder.
//
// The answer is the handler's, byte for byte but for Date: 200 with the
// file's validators (GET bodies go out with sendfile), or 404 as
// httpError writes it. Anything else — a directory, a reserved name, the
// metrics path, any error but "no such file" — is declined, and the
// handler answers it. Metrics and the access log are recorded as record
// does. Serve uses the fast path only for a plain listener without Guard:
// rules in front of the handler must see every request.

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lakefed/lakefed/internal/httpx"
	"github.com/lakefed/lakefed/internal/httpx/fastpath"
)

// fastResponder is the storage role's fastpath.Responder.
type fastResponder struct{ s *Server }

// notFoundBody is httpError's body for 404.
var notFoundBody = []byte("not found\n")

// Respond answers a plain request when its path names a regular file
// below Root, or nothing at all (404: a federator's Stat fan-out asks many
// servers that lack the file).
func (fr fastResponder) Respond(a *fastpath.Answer, req *fastpath.Request) bool {
	s := fr.s
	start := time.Now()
	target := string(req.Target)
	p, err := httpx.CleanPath(target)
	if err != nil || reserved(p) || (s.metricsPath != "" && p == s.metricsPath) {
		return false
	}
	name := rel(p)
	var st unix.Stat_t
	var f *os.File
	if req.Head {
		if err = s.statRel(name, &st); err != nil {
			return s.fastNotFound(a, req, target, start, err)
		}
		if !isReg(&st) {
			return false
		}
	} else {
		f, err = s.openRel(name, unix.O_RDONLY)
		if err != nil {
			return s.fastNotFound(a, req, target, start, err)
		}
		defer f.Close()
		if unix.Fstat(int(f.Fd()), &st) != nil || !isReg(&st) {
			return false
		}
	}
	a.Status(http.StatusOK)
	a.Header("Accept-Ranges", "bytes")
	a.Header("Content-Type", contentType(name)[0])
	var etag [64]byte
	a.HeaderBytes("Etag", appendETag(etag[:0], &st)) // same fstat: ctime and inode cost nothing more
	a.HeaderTime("Last-Modified", time.Unix(st.Mtim.Sec, 0))
	a.Header("Server", httpx.StorageServer)
	a.File(f, st.Size)
	s.recordFast(a, req, target, start)
	return true
}

// fastNotFound answers 404 exactly as httpError does (same headers and
// body) when err says the path does not exist; any other error is left
// to the handler (false).
func (s *Server) fastNotFound(a *fastpath.Answer, req *fastpath.Request, target string, start time.Time, err error) bool {
	if !errors.Is(err, fs.ErrNotExist) {
		return false
	}
	a.Status(http.StatusNotFound)
	a.Header("Content-Type", "text/plain; charset=utf-8")
	a.Header("X-Content-Type-Options", "nosniff")
	a.Header("Server", httpx.StorageServer)
	a.Body(notFoundBody)
	s.recordFast(a, req, target, start)
	return true
}

// recordFast updates the metrics (and the access log) as record does;
// target is the path as the handler logs it (r.URL.Path), not cleaned.
func (s *Server) recordFast(a *fastpath.Answer, req *fastpath.Request, target string, start time.Time) {
	d := time.Since(start)
	mi := 0 // GET
	if req.Head {
		mi = 1
	}
	status, sent := a.StatusCode(), a.Sent()
	s.m.requests[mi][status/100].Inc()
	s.m.fast.Inc()
	s.m.latency[mi].Observe(d.Seconds())
	if sent > 0 {
		s.m.sent.Add(float64(sent))
	}
	if s.cfg.AccessLog {
		// The request's context, as the handler's log lines have it.
		ctx := httpx.WithRequestID(context.Background(), req.ID())
		s.log.LogAttrs(ctx, slog.LevelInfo, "request",
			slog.String("method", methods[mi]), slog.String("path", target),
			slog.Int("status", status), slog.Int64("bytes", sent),
			slog.Duration("duration", d), slog.String("remote", req.RemoteAddr()))
	}
}
