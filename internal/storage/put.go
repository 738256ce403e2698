package storage

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"hash"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/lakefed/lakefed/internal/httpx"
)

// errTooLarge is the upload passing Config.MaxUpload.
var errTooLarge = errors.New("storage: upload larger than max_upload")

// servePut stores the request body at p atomically: it streams into a
// hidden temp file beside the target (computing adler32, and md5/crc32c
// when the client sent one to check), verifies any Digest or Content-MD5,
// fsyncs, stores the checksums, renames over the target and fsyncs the
// directory. Missing parents are created. Until the rename nothing is
// visible; on any failure the temp file is removed and the old content
// stays. It returns the body bytes taken.
//
// Status: 201 new, 204 replaced, 400 "digest mismatch" (RFC 3230 gives no
// code; 400 says the request itself was wrong), 409 onto a directory or
// under a file, 413 over MaxUpload, 423 locked, 507 disk full.
func (s *Server) servePut(w *respWriter, r *http.Request, p string) int64 {
	if p == "/" {
		httpError(w, http.StatusMethodNotAllowed, "cannot PUT the root collection")
		return 0
	}
	release, code, reason := s.confirmLocks(r, p)
	if code != 0 {
		httpError(w, code, reason)
		return 0
	}
	defer release()
	if s.cfg.MaxUpload > 0 && r.ContentLength > s.cfg.MaxUpload {
		httpError(w, http.StatusRequestEntityTooLarge, "upload larger than max_upload")
		return 0
	}
	want := httpx.ParseDigest(r.Header.Get("Digest"))
	if cm := r.Header.Get("Content-MD5"); cm != "" {
		v := httpx.ParseContentMD5(cm)
		if v == "" {
			httpError(w, http.StatusBadRequest, "bad Content-MD5 header")
			return 0
		}
		if old, ok := want[httpx.MD5]; ok && old != v {
			httpError(w, http.StatusBadRequest, "digest mismatch: Digest md5 and Content-MD5 differ")
			return 0
		}
		want[httpx.MD5] = v
	}

	name := rel(p)
	dir := path.Dir(name)
	existed := false
	var cur unix.Stat_t
	if err := s.statRel(name, &cur); err == nil {
		if isDir(&cur) {
			httpError(w, http.StatusConflict, "target is a directory")
			return 0
		}
		existed = true
	} else if !errors.Is(err, fs.ErrNotExist) {
		code, reason := s.putStatus(r, err)
		httpError(w, code, reason)
		return 0
	}
	if dir != "." {
		if err := s.root.MkdirAll(dir, 0o755); err != nil {
			code, reason := s.putStatus(r, err)
			httpError(w, code, reason)
			return 0
		}
	}

	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := path.Join(dir, uploadPrefix+hex.EncodeToString(rnd[:]))
	f, err := s.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		code, reason := s.putStatus(r, err)
		httpError(w, code, reason)
		return 0
	}
	committed := false
	defer func() {
		if !committed {
			f.Close()
			s.root.Remove(tmp)
		}
	}()

	hashes := map[string]hash.Hash{httpx.Adler32: httpx.NewHash(httpx.Adler32)}
	for a := range want {
		if hashes[a] == nil {
			hashes[a] = httpx.NewHash(a)
		}
	}
	body := io.Reader(r.Body)
	if s.cfg.MaxUpload > 0 {
		body = &io.LimitedReader{R: r.Body, N: s.cfg.MaxUpload + 1}
	}
	n, err := s.receive(f, body, hashes)
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
	sums := make(map[string]string, len(hashes))
	for a, h := range hashes {
		sums[a] = httpx.SumString(h)
	}
	for a, v := range want {
		if sums[a] != v {
			httpError(w, http.StatusBadRequest, "digest mismatch: "+a)
			return n
		}
	}
	if err := f.Sync(); err != nil {
		code, reason := s.putStatus(r, err)
		httpError(w, code, reason)
		return n
	}
	fd := int(f.Fd())
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err == nil {
		for a, v := range sums {
			if storeSum(fd, a, v, &st) != nil {
				break // no xattrs here; GET will compute
			}
		}
	}
	if err := f.Close(); err != nil {
		code, reason := s.putStatus(r, err)
		httpError(w, code, reason)
		return n
	}
	if err := s.root.Rename(tmp, name); err != nil {
		code, reason := s.putStatus(r, err)
		httpError(w, code, reason)
		return n
	}
	committed = true
	if d, err := s.root.Open(dir); err == nil {
		if err := d.Sync(); err != nil {
			s.log.WarnContext(r.Context(), "fsync directory failed", "path", p, "err", err)
		}
		d.Close()
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

// writebackChunk is how much written data receive lets pile up in the page
// cache before it asks the kernel to start writing it out.
const writebackChunk = 8 << 20

// receive copies body into f through 1 MiB chunks, feeding every hash,
// and returns the bytes taken. A body that ends early returns the body's
// error (io.ErrUnexpectedEOF from net/http).
//
// Every writebackChunk bytes it starts the write-back of what was just
// written (sync_file_range SYNC_FILE_RANGE_WRITE: asynchronous, a hint,
// errors ignored; the fsync after the body reports real ones). The disk
// then works while the network delivers the rest, and the fsync that
// durability needs before the answer finds little left to write, instead
// of the whole upload.
func (s *Server) receive(f *os.File, body io.Reader, hashes map[string]hash.Hash) (int64, error) {
	hs := make([]hash.Hash, 0, len(hashes))
	for _, h := range hashes {
		hs = append(hs, h)
	}
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	var total, synced int64
	fd := int(f.Fd())
	for {
		// Fill the buffer before writing: fewer, larger writes.
		n := 0
		var rerr error
		for n < len(buf) && rerr == nil {
			var m int
			m, rerr = body.Read(buf[n:])
			n += m
		}
		if n > 0 {
			for _, h := range hs {
				h.Write(buf[:n])
			}
			if _, err := s.writeChunk(f, buf[:n]); err != nil {
				return total, err
			}
			total += int64(n)
			if total-synced >= writebackChunk {
				unix.SyncFileRange(fd, synced, total-synced, unix.SYNC_FILE_RANGE_WRITE)
				synced = total
			}
		}
		if rerr == io.EOF {
			return total, nil
		}
		if rerr != nil {
			return total, rerr
		}
	}
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
