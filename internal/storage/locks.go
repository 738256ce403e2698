package storage

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"os"

	"golang.org/x/sys/unix"

	"github.com/lakefed/lakefed/internal/storage/davlock"
)

// lockFiles is the root as the WebDAV locks see it (davlock.Resources).
type lockFiles struct{ s *Server }

// ETag returns the current entity tag of the file at clean path p, or ""
// when there is none.
func (lf lockFiles) ETag(p string) string {
	var st unix.Stat_t
	if lf.s.statRel(rel(p), &st) != nil || !isReg(&st) {
		return ""
	}
	return etag(&st)
}

// Gone reports whether nothing is at clean path p any more.
func (lf lockFiles) Gone(p string) bool {
	var st unix.Stat_t
	err := lf.s.statRel(rel(p), &st)
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR)
}

// CreateEmpty makes an empty file at clean path p when nothing is there,
// through the WebDAV file system (so reserved names stay refused).
func (lf lockFiles) CreateEmpty(ctx context.Context, p string) (bool, error) {
	d := davFS(lf)
	if _, err := d.Stat(ctx, p); !errors.Is(err, os.ErrNotExist) {
		return false, err
	}
	f, err := d.OpenFile(ctx, p, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
	if err == nil {
		err = f.Close()
	}
	if errors.Is(err, os.ErrExist) {
		return false, nil
	}
	return err == nil, err
}

// WriteError answers a failed CreateEmpty as any file system error.
func (lf lockFiles) WriteError(w http.ResponseWriter, r *http.Request, err error) {
	code, reason := lf.s.fsStatus(r, err)
	httpError(w, code, reason)
}

// serveDAVWrite hands a request that changes tg (DELETE, MKCOL,
// PROPPATCH) to x/net/webdav once the locks let it through.
func (s *Server) serveDAVWrite(w http.ResponseWriter, r *http.Request, tg davlock.Target) {
	release, ok := s.locks.Guard(w, r, tg)
	if !ok {
		return
	}
	defer release()
	s.dav.ServeHTTP(w, r)
}
