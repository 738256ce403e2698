package storage

import (
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/lakefed/lakefed/internal/durable"
	"github.com/lakefed/lakefed/internal/httpx"
	"github.com/lakefed/lakefed/internal/storage/davlock"
)

// errTooLarge is the upload passing Config.MaxUpload.
var errTooLarge = errors.New("storage: upload larger than max_upload")

// servePut stores the request body at p atomically: it streams into a
// hidden temp file beside the target (computing adler32, and md5/crc32c
// when the client sent one to check), verifies any Digest or Content-MD5,
// fsyncs, then commits (see commit): re-checks the preconditions against
// the file it replaces, copies that file's dead properties, renames over
// it, keeps the checksums, and fsyncs the directory. Missing parents are
// created. Until the rename nothing is visible; on any failure the temp
// file is removed and the old content stays. It returns the body bytes
// taken.
//
// Status: 201 new, 204 replaced, 400 "digest mismatch" (RFC 3230 gives no
// code; 400 says the request itself was wrong), 400 with Content-Range,
// 409 onto a directory or under a file, 412 a precondition failed, 413
// over MaxUpload, 423 locked, 507 disk full.
func (s *Server) servePut(w *respWriter, r *http.Request, p string) int64 {
	if p == "/" {
		httpError(w, http.StatusMethodNotAllowed, "cannot PUT the root collection")
		return 0
	}
	if _, ok := r.Header["Content-Range"]; ok {
		// RFC 9110 §14.5: partial PUT is not supported, and a server that
		// does not support it must refuse a PUT with Content-Range rather
		// than store the part as the whole.
		httpError(w, http.StatusBadRequest, "Content-Range on PUT: partial PUT is not supported")
		return 0
	}
	release, ok := s.locks.Guard(w, r, davlock.Target{Path: p})
	if !ok {
		return 0
	}
	defer release()
	if s.cfg.MaxUpload > 0 && r.ContentLength > s.cfg.MaxUpload {
		httpError(w, http.StatusRequestEntityTooLarge, "upload larger than max_upload")
		return 0
	}
	want, err := httpx.WantedDigests(r.Header)
	if err != nil {
		code, reason, _ := httpx.StatusOf(err)
		httpError(w, code, reason)
		return 0
	}

	name := rel(p)
	dir := path.Dir(name)
	// A first look, before taking the body: a directory, or a failed
	// precondition, is refused without reading it. commit looks again.
	var cur current
	if err := s.statRel(name, &cur.st); err == nil {
		if isDir(&cur.st) {
			httpError(w, http.StatusConflict, "target is a directory")
			return 0
		}
		cur.exists = true
	} else if !errors.Is(err, fs.ErrNotExist) {
		code, reason := s.putStatus(r, err)
		httpError(w, code, reason)
		return 0
	}
	if cur.check(r) != 0 {
		httpError(w, http.StatusPreconditionFailed, "precondition failed")
		return 0
	}
	// Directories MkdirAll creates must be made durable too, up to the
	// root, or an acknowledged file may vanish with them in a crash.
	created := false
	if dir != "." {
		if _, err := s.root.Stat(dir); err != nil {
			created = true
		}
		if err := s.root.MkdirAll(dir, 0o755); err != nil {
			code, reason := s.putStatus(r, err)
			httpError(w, code, reason)
			return 0
		}
	}

	tmp := path.Join(dir, tempName())
	f, err := s.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		code, reason := s.putStatus(r, err)
		httpError(w, code, reason)
		return 0
	}
	committed := false
	defer func() {
		f.Close()
		if !committed {
			s.root.Remove(tmp)
		}
	}()

	digests := httpx.NewBodyDigests(want, httpx.Adler32)
	body := io.Reader(r.Body)
	if s.cfg.MaxUpload > 0 {
		body = &io.LimitedReader{R: r.Body, N: s.cfg.MaxUpload + 1}
	}
	n, err := s.receive(f, body, digests)
	if err == nil && s.cfg.MaxUpload > 0 && n > s.cfg.MaxUpload {
		err = errTooLarge
	}
	if err == nil && r.ContentLength >= 0 && n != r.ContentLength {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		code, reason := s.putStatus(r, err)
		httpError(w, code, reason)
		return n
	}
	if err := digests.Check(); err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return n
	}
	sums := digests.Sums()
	if err := f.Sync(); err != nil {
		code, reason := s.putStatus(r, err)
		httpError(w, code, reason)
		return n
	}
	st, existed, code, reason := s.commit(r, p, f, tmp)
	if code != 0 {
		httpError(w, code, reason)
		return n
	}
	committed = true
	// The fingerprint after the rename (which moved the ctime) is the one
	// later requests see; nothing touches the file after it.
	_ = s.storeSums(&st, sums)
	if err := s.syncDirs(dir, created); err != nil {
		// The file is in place but may not survive a crash: no 2xx.
		code, reason := s.putStatus(r, err)
		httpError(w, code, "stored, but not made durable: "+reason)
		return n
	}
	h := w.Header()
	h["Etag"] = []string{etag(&st)}
	h["Content-Length"] = hdrZero
	if existed {
		w.WriteHeader(http.StatusNoContent)
	} else {
		w.WriteHeader(http.StatusCreated)
	}
	return n
}

// commit installs the received temp file tmp (open as f) at the clean
// path p under p's path lock: it evaluates the preconditions again
// against the file actually there now (RFC 9110 §13.2: two PUTs with
// If-Match of one ETag cannot both win), copies that file's dead
// properties onto f (RFC 4918 §9.7.1: a PUT does not change them), and
// renames. It returns f's stat after the rename and whether a file was
// replaced, or a status and reason.
//
// Unconditional PUTs take the lock too (it is held only for this), so
// each learns under it whether it created the file (201) or replaced one
// (204): of two concurrent unconditional PUTs creating one file, one gets
// 201 and the other 204, and the last rename wins. That is accepted: the
// survivor is one whole upload, and neither client asked for more.
func (s *Server) commit(r *http.Request, p string, f *os.File, tmp string) (st unix.Stat_t, existed bool, code int, reason string) {
	unlock := s.paths.lock(p)
	defer unlock()
	name := rel(p)
	var cur current
	err := s.statRel(name, &cur.st)
	switch {
	case err == nil && isDir(&cur.st):
		return st, false, http.StatusConflict, "target is a directory"
	case err == nil:
		cur.exists = true
	case !errors.Is(err, fs.ErrNotExist):
		code, reason = s.putStatus(r, err)
		return st, false, code, reason
	}
	if cur.exists && isReg(&cur.st) {
		// O_NONBLOCK: a FIFO swapped in since the stat must not hang us.
		old, err := s.openRel(name, unix.O_RDONLY|unix.O_NONBLOCK)
		if err == nil {
			err = unix.Fstat(int(old.Fd()), &cur.st)
			if err == nil && isReg(&cur.st) {
				err = copyDeadProps(int(old.Fd()), int(f.Fd()))
			}
			old.Close()
		}
		if err != nil {
			code, reason = s.putStatus(r, err)
			return st, false, code, reason
		}
	}
	if cur.check(r) != 0 {
		return st, false, http.StatusPreconditionFailed, "precondition failed"
	}
	if err := s.commitRename(tmp, name); err != nil {
		code, reason = s.putStatus(r, err)
		return st, false, code, reason
	}
	if cur.exists {
		s.dropSums(&cur.st)
	}
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		// Renamed, so the PUT happened; only the ETag cannot be given.
		s.log.WarnContext(r.Context(), "fstat after rename failed", "path", p, "err", err)
	}
	return st, cur.exists, 0, ""
}

// receive copies body into f (durable.Receive) through a pooled buffer
// and the writeChunk hook.
func (s *Server) receive(f *os.File, body io.Reader, sum io.Writer) (int64, error) {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	return durable.Receive(f, body, sum, durable.Options{Buf: *bp, Write: s.writeChunk})
}

// putStatus maps a PUT failure to a status: fsStatus plus upload errors.
func (s *Server) putStatus(r *http.Request, err error) (int, string) {
	var mbe *http.MaxBytesError
	switch {
	case errors.Is(err, errTooLarge), errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge, "upload larger than max_upload"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return http.StatusBadRequest, "upload incomplete: body shorter than Content-Length"
	case errors.Is(err, syscall.EEXIST), errors.Is(err, syscall.ENOTDIR):
		return http.StatusConflict, "a parent is not a directory"
	}
	var pe *os.PathError
	if !errors.As(err, &pe) && !errors.As(err, new(*os.LinkError)) && !errors.As(err, new(syscall.Errno)) {
		// Not a file-system error: the client's body failed (gone, reset).
		return http.StatusBadRequest, "upload failed: " + trimErr(err)
	}
	return s.fsStatus(r, err)
}

// trimErr keeps a client-visible reason to one short line.
func trimErr(err error) string {
	msg := err.Error()
	if len(msg) > 120 {
		msg = msg[:120]
	}
	for i := 0; i < len(msg); i++ {
		if msg[i] < 0x20 {
			return msg[:i]
		}
	}
	return msg
}

// syncDirs fsyncs the directory dir (relative to Root) and, with up, every
// directory above it up to Root: the entries of directories a PUT created.
func (s *Server) syncDirs(dir string, up bool) error {
	for {
		d, err := s.root.Open(dir)
		if err != nil {
			return err
		}
		err = syncDir(d, dir)
		d.Close()
		if err != nil || !up || dir == "." {
			return err
		}
		dir = path.Dir(dir)
	}
}
