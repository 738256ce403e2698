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

// deleteEmptyDir answers a DELETE of the directory p that asked for an
// empty one only (httpx.EmptyDeleteHeader), and reports whether it did;
// false leaves the request to serveDAVWrite (p is not a directory). The
// emptiness is the kernel's, checked by rmdir(2) with the removal: a
// file being uploaded into p (its temp file is beside its target) or
// committed since the caller listed p makes it 409, never lost.
func (s *Server) deleteEmptyDir(w http.ResponseWriter, r *http.Request, p string) bool {
	var st unix.Stat_t
	if s.statRel(rel(p), &st) != nil || !isDir(&st) {
		return false
	}
	release, ok := s.locks.Guard(w, r, davlock.Target{Path: p, Deep: true})
	if !ok {
		return true
	}
	defer release()
	switch err := s.root.Remove(rel(p)); {
	case err == nil:
		w.WriteHeader(http.StatusNoContent)
	case errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST):
		httpError(w, http.StatusConflict, "directory not empty")
	default:
		code, reason := s.fsStatus(r, err)
		httpError(w, code, reason)
	}
	return true
}
