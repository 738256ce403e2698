package buffer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/lakefed/lakefed/internal/durable"
	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/httpx"
)

// growChunk is how much more space an upload of unknown length asks for
// each time it outgrows what it was promised.
const growChunk = 8 << 20

// recvBuf is the size of one read of an upload.
const recvBuf = 1 << 20

// servePut takes a PUT of the clean path p under pre into the buffer:
// it reserves the space (refusing before it reads a byte when the length
// is known and there is none), streams the body into tmp/ computing
// adler32 (and md5, crc32c when the client sent or asked for one),
// checks any Digest or Content-MD5, fsyncs, renames into data/, fsyncs
// data/, commits the journal row, and only then answers: 201, or 204 when
// it replaced a version the buffer held, with "Digest: adler32=…" (and
// md5 when Want-Digest asks). On any failure before the commit nothing is
// kept and nothing is journaled.
//
// With a lake (Options.Lake), the buffer claims p first: a path another
// process of the lake holds goes to next (the federator sends it there),
// and the others are told of the version taken (its hold, then the
// write hook) before the answer.
//
// Status: 400 Content-Range (no partial PUT, RFC 9110 §14.5, as the
// storage role), a bad or mismatching digest, a body shorter than its
// Content-Length; 405 the root; 409 a buffered file in the way (a parent
// that is a file, or a path that is a buffered directory); 507 full (or
// 307 to the first target with when_full: direct, while no byte is read);
// 500 the local disk or the journal failed; 503 the other processes of
// the lake could not be told.
func (b *Buffer) servePut(w http.ResponseWriter, r *http.Request, p string, pre *Prefix, next http.Handler) {
	if p == "/" {
		httpx.WriteError(w, http.StatusMethodNotAllowed, "cannot PUT the root collection")
		return
	}
	if _, ok := r.Header["Content-Range"]; ok {
		httpx.WriteError(w, http.StatusBadRequest, "Content-Range on PUT: partial PUT is not supported")
		return
	}
	want, err := httpx.WantedDigests(r.Header)
	if err != nil {
		code, reason, _ := httpx.StatusOf(err)
		httpx.WriteError(w, code, reason)
		return
	}
	if httpx.Reserved(p) {
		httpx.WriteError(w, http.StatusForbidden, "buffer: "+p+": reserved name (lakefed's servers keep "+httpx.ReservedPrefix+"* for themselves)")
		return
	}
	if msg := b.conflict(p); msg != "" {
		httpx.WriteError(w, http.StatusConflict, msg)
		return
	}
	ctx := r.Context()
	// The conditions and the commit are one step: two PUTs of one path
	// do not both pass If-None-Match: * or one If-Match (RFC 9110 §13.1),
	// as on the storage role (TestPutIfMatchRace there, TestConditionalPutRace here).
	unlock := b.paths.lock(p)
	defer unlock()
	switch mine, err := b.claim(ctx, p); {
	case err != nil:
		w.Header().Set("Retry-After", retryAfter)
		httpx.WriteError(w, http.StatusServiceUnavailable, "buffer: "+p+": not taken: the other processes of the lake cannot be told of it: "+err.Error())
		return
	case !mine:
		next.ServeHTTP(w, r)
		return
	}
	taken := false
	defer func() {
		if !taken {
			b.unclaim(ctx, p)
		}
	}()
	if code := b.preconditions(r, p, pre); code != 0 {
		msg := http.StatusText(code)
		if code == http.StatusServiceUnavailable {
			// A target could not say whether the file exists: an
			// outage, worth retrying (RFC 9110 §10.2.3).
			w.Header().Set("Retry-After", retryAfter)
			msg = "buffer: " + p + ": the target cannot say whether the file exists, so the conditions cannot be evaluated"
		}
		httpx.WriteError(w, code, msg)
		return
	}
	wantMD5 := false
	for _, a := range httpx.ParseWantDigest(r.Header.Get("Want-Digest")) {
		if a == httpx.MD5 {
			wantMD5 = true
		}
	}
	e, replaced, err := b.accept(ctx, p, pre, r.Body, r.ContentLength, want, wantMD5)
	if err == errFull {
		b.full(w, r, p, pre)
		return
	}
	if err != nil {
		code, msg, ok := httpx.StatusOf(err)
		if !ok || code >= 500 {
			b.log.ErrorContext(ctx, "buffer a PUT", "path", p, "err", err)
		}
		httpx.WriteError(w, code, msg)
		return
	}
	taken = true
	if err := b.publish(ctx, e, false); err != nil {
		b.log.WarnContext(ctx, "a buffered write could not be shown to the other processes of the lake", "path", p, "err", err)
		w.Header().Set("Retry-After", retryAfter)
		httpx.WriteError(w, http.StatusServiceUnavailable, notTold(p, err).Error())
		return
	}
	sums := e.info().Checksums
	h := w.Header()
	algos := []string{httpx.Adler32}
	if wantMD5 {
		algos = append(algos, httpx.MD5)
	}
	h.Set("Digest", httpx.FormatDigest(sums, algos...))
	h.Set("Etag", `"`+e.etag()+`"`)
	h.Set("Content-Length", "0")
	if replaced {
		w.WriteHeader(http.StatusNoContent)
	} else {
		w.WriteHeader(http.StatusCreated)
	}
}

// errFullLate is running out of room after part of the body was read:
// the upload fails (507) and nothing is kept.
// It does not wrap errFull, which means "nothing read yet".
var errFullLate = httpx.NewError(http.StatusInsufficientStorage, "buffer full", nil)

// accept stores body (size bytes, or -1 unknown) as the newest version
// of the clean path p under pre, and journals it: the body streams into
// tmp/ with adler32 (and md5 with wantMD5, and whatever want names)
// computed on the way, is checked against want, fsynced, renamed into
// data/, data/ fsynced, and the row committed. Only then does it return
// the entry, and whether it replaced a buffered version. It returns
// errFull, before a byte is read, when the space cannot be promised
// (the whole size when known, a first byte otherwise); other errors are
// *httpx.Error with the status to answer. On any error nothing is kept
// and nothing is journaled.
func (b *Buffer) accept(ctx context.Context, p string, pre *Prefix, body io.Reader, size int64, want map[string]string, wantMD5 bool) (*entry, bool, error) {
	// A known length is promised whole before a byte is read; an unknown
	// one needs room for its first byte, and grows as it arrives.
	first := size
	if first < 0 {
		first = 1
	}
	res, err := b.reserve(ctx, first)
	if err != nil {
		return nil, false, errFull
	}
	defer res.done()
	fsErr := func(what string, err error) error {
		return httpx.NewError(statusOfFS(err), "cannot store the upload", fmt.Errorf("%s: %w", what, err))
	}

	f, err := os.CreateTemp(b.tmpDir, "put-*")
	if err != nil {
		return nil, false, fsErr("create upload file", err)
	}
	tmp := f.Name()
	kept := false
	defer func() {
		f.Close()
		if !kept {
			os.Remove(tmp)
		}
	}()

	also := []string{httpx.Adler32}
	if wantMD5 {
		also = append(also, httpx.MD5)
	}
	digests := httpx.NewBodyDigests(want, also...)
	n, err := b.receive(ctx, f, body, size, res, digests)
	switch {
	case errors.Is(err, errFull):
		return nil, false, errFullLate
	case err != nil && isFSError(err):
		return nil, false, fsErr("write upload file", err)
	case err != nil:
		return nil, false, httpx.NewError(http.StatusBadRequest, "upload failed: "+short(err.Error()), err)
	case size >= 0 && n != size:
		return nil, false, httpx.NewError(http.StatusBadRequest, "upload incomplete: body shorter than Content-Length", nil)
	}
	if err := digests.Check(); err != nil {
		return nil, false, httpx.NewError(http.StatusBadRequest, err.Error(), nil)
	}
	sums := digests.Sums()
	if err := f.Sync(); err != nil {
		return nil, false, fsErr("fsync upload file", err)
	}

	e := &entry{
		path:    p,
		spool:   newSpoolName(),
		size:    n,
		adler:   sums[httpx.Adler32],
		md5:     sums[httpx.MD5],
		mtime:   time.Now(),
		state:   statePending,
		done:    map[string]bool{},
		targets: make([]string, 0, len(pre.Targets)),
	}
	for _, t := range pre.Targets {
		e.targets = append(e.targets, t.Name())
	}
	dst := filepath.Join(b.dataDir, e.spool)
	if err := os.Rename(tmp, dst); err != nil {
		return nil, false, fsErr("rename upload file", err)
	}
	kept = true
	if err := durable.SyncDir(b.dataDir); err != nil {
		os.Remove(dst)
		return nil, false, httpx.NewError(http.StatusInternalServerError, "stored, but not made durable", err)
	}
	// The commit must not be cut by the client going away: once the file
	// is durable, the row is what decides, and a half-done transaction
	// would only roll back.
	replaced, err := b.j.insert(context.WithoutCancel(ctx), e)
	if err != nil {
		os.Remove(dst)
		code := http.StatusInternalServerError
		if journalFull(err) {
			code = http.StatusInsufficientStorage
		}
		return nil, false, httpx.NewError(code, "cannot journal the upload", err)
	}
	b.install(e)
	b.m.accepted.Inc()
	return e, replaced, nil
}

// receive copies body into f, feeding sum, and returns the bytes
// taken. An upload of unknown length (size < 0) grows its reservation as
// it goes and fails with errFull when it cannot; one of known length
// never takes more than it announced plus one byte (which fails it).
func (b *Buffer) receive(ctx context.Context, f *os.File, body io.Reader, size int64, res *reservation, sum io.Writer) (int64, error) {
	if size >= 0 {
		body = io.LimitReader(body, size+1)
	}
	grow := func(total int64) error {
		need := total - res.n
		if size >= 0 || need <= 0 {
			return nil
		}
		// A chunk ahead when there is room for it, else just what this
		// write needs.
		if res.grow(ctx, max(growChunk, need)) != nil {
			return res.grow(ctx, need)
		}
		return nil
	}
	return durable.Receive(f, body, sum, durable.Options{Buf: make([]byte, recvBuf), Grow: grow})
}

// preconditions evaluates a conditional PUT (If-Match, If-None-Match,
// If-Unmodified-Since; RFC 9110 §13.2.2) against the current version:
// the buffered one, nothing when a delete is pending, else what the first
// target holds. It returns 0 to go on, 412, or 503 when the target cannot
// say. servePut holds p's lock from here to the commit.
func (b *Buffer) preconditions(r *http.Request, p string, pre *Prefix) int {
	h := r.Header
	if h.Get("If-Match") == "" && h.Get("If-None-Match") == "" && h.Get("If-Unmodified-Since") == "" {
		return 0
	}
	in, exists := b.stat(p)
	if !exists && !b.deleted(p) {
		var err error
		in, err = pre.Targets[0].Stat(r.Context(), p)
		switch {
		case err == nil:
			exists = !in.IsDir
		case errors.Is(err, endpoint.ErrNotFound):
		default:
			return http.StatusServiceUnavailable
		}
	}
	etag := ""
	if in.ETag != "" {
		etag = `"` + in.ETag + `"`
	}
	return httpx.CheckPreconditions(h, http.MethodPut, etag, in.ModTime, exists)
}

// full answers a PUT the buffer has no room for: 307 to the first
// target (when_full: direct, and it can take clients), else 507.
func (b *Buffer) full(w http.ResponseWriter, r *http.Request, p string, pre *Prefix) {
	b.m.rejected.Inc()
	if b.cfg.WhenFull == WhenFullDirect {
		u, err := endpoint.RedirectURL(r.Context(), pre.Targets[0], p, endpoint.OpWrite)
		if err == nil {
			w.Header().Set("Location", u.String())
			w.Header().Set("Content-Length", "0")
			w.WriteHeader(http.StatusTemporaryRedirect)
			return
		}
		b.log.WarnContext(r.Context(), "buffer full and the first target cannot take clients", "path", p,
			"endpoint", pre.Targets[0].Name(), "err", err)
	}
	httpx.WriteError(w, http.StatusInsufficientStorage, "buffer full")
}

// conflict returns why p cannot be written beside what the buffer holds
// (its targets would refuse it), or "".
func (b *Buffer) conflict(p string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	for q := parentOf(p); q != "/"; q = parentOf(q) {
		if e := b.cur[q]; e != nil && !e.deleting() {
			return "a parent is a file"
		}
	}
	for q, e := range b.cur {
		if under(q, p) && q != p && !e.deleting() {
			return "target is a directory"
		}
	}
	return ""
}

// retryAfter is the Retry-After of the buffer's 503s, in seconds: a
// target's outage is usually a restart, and clients back off anyway.
const retryAfter = "5"

// wrote calls the process's write hook (Options.OnWrite) for p.
func (b *Buffer) wrote(ctx context.Context, p string) error {
	if b.opts.OnWrite == nil {
		return nil
	}
	return b.opts.OnWrite(ctx, p)
}

// isFSError reports whether err came from the local file system rather
// than from the client's body.
func isFSError(err error) bool {
	var pe *os.PathError
	var errno syscall.Errno
	return errors.As(err, &pe) || errors.As(err, &errno)
}

// statusOfFS maps a local file-system failure: no space → 507, anything
// else → 500.
func statusOfFS(err error) int {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return http.StatusInsufficientStorage
	}
	return http.StatusInternalServerError
}

// pathLocks serializes the PUTs of one path, from their conditions to
// their commit. The zero value is ready.
type pathLocks struct {
	mu sync.Mutex // guards m
	m  map[string]*pathLock
}

type pathLock struct {
	mu sync.Mutex
	n  int // holders and waiters, guarded by pathLocks.mu
}

// lock takes p's lock and returns its release.
func (l *pathLocks) lock(p string) func() {
	l.mu.Lock()
	if l.m == nil {
		l.m = map[string]*pathLock{}
	}
	pl := l.m[p]
	if pl == nil {
		pl = &pathLock{}
		l.m[p] = pl
	}
	pl.n++
	l.mu.Unlock()
	pl.mu.Lock()
	return func() {
		pl.mu.Unlock()
		l.mu.Lock()
		if pl.n--; pl.n == 0 {
			delete(l.m, p)
		}
		l.mu.Unlock()
	}
}
