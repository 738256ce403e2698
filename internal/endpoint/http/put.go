package http

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"sync"
	"syscall"
	"time"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/httpx"
)

// smallBody is the largest upload kept in memory. A small upload can be
// sent again after a redirect or a 409 (parent missing), and goes out with
// its adler32 in a Digest header so the server can check it.
const smallBody = 1 << 20

// Put stores r as p with PUT.
//
// Bodies up to 1 MiB (and unknown-size ones that turn out that small) are
// read into memory first: they are sent with Content-Length and
// "Digest: adler32=...", and can be re-sent. Larger bodies stream with
// "Expect: 100-continue", so a redirect (a dCache door, a federator's 307)
// or a 409 arrives before the body; the body is re-sent only when it was
// not read yet, or r is an io.Seeker (an *os.File) it can seek back. Unknown
// sizes go chunked.
//
// A 409 means the parent is missing (servers without nginx's
// create_full_put_path): Put makes it with MKCOL and retries once.
//
// The adler32 of what was sent is computed while streaming and compared
// with a Digest the server returns in its PUT answer, if any; Put does not
// ask the server again, so a full check after upload is the caller's
// (the buffer's mover does it). Atomicity (old content stays on failure)
// is the server's: nginx and the storage role have it, XrdHttp writes in
// place.
//
// For XrdHttp, which mishandles chunked uploads now and then, a large body
// of unknown size is first copied to a local temporary file (os.TempDir)
// and sent with its length.
func (e *Endpoint) Put(ctx context.Context, p string, r io.Reader, size int64) error {
	return e.putWith(ctx, p, r, size, http.Header{})
}

// PutIf is Put with If-Match or If-None-Match (RFC 9110 §13.1.1,
// §13.1.2), on a server that says it evaluates them with the commit (a
// lakefed storage role: httpx.ConditionalPutHeader in its OPTIONS
// answer, asked once by Probe). A 412 wraps ErrPrecondition. On any
// other server PutIf reads nothing of r and wraps ErrUnsupported: nginx's
// dav module and XrdHttp ignore the headers on PUT and would replace what
// is there. A PUT redirected elsewhere carries the headers along, and the
// server it lands on decides; the storage role redirects no PUT.
func (e *Endpoint) PutIf(ctx context.Context, p string, r io.Reader, size int64, cond endpoint.Cond) error {
	if e.condPut.Load() == condUnknown {
		if err := e.Probe(ctx); err != nil {
			return fail("put", p, err)
		}
	}
	if e.condPut.Load() != condYes {
		return fail("put", p, fmt.Errorf("%w: the server does not say it evaluates If-Match on PUT", endpoint.ErrUnsupported))
	}
	hdr := http.Header{}
	if cond.IfMatch != "" {
		hdr.Set("If-Match", `"`+cond.IfMatch+`"`)
	}
	if cond.IfNoneMatch {
		hdr.Set("If-None-Match", "*")
	}
	return e.putWith(ctx, p, r, size, hdr)
}

// putWith is Put with extra request headers hdr (which it may add to).
func (e *Endpoint) putWith(ctx context.Context, p string, r io.Reader, size int64, hdr http.Header) error {
	if p == "/" {
		return fail("put", p, fmt.Errorf("%w: is the root", endpoint.ErrRefused))
	}
	b, err := newReqBody(r, size)
	if err != nil {
		return fail("put", p, err)
	}
	if b.size < 0 {
		// XrdHttp 5.5.3 sometimes answers a chunked PUT with "400 Invalid
		// chunked encoding", depending on how chunks fall into its reads.
		// For it, a large body of unknown size is spooled to a local
		// temporary file first and sent with its length.
		if e.server.Load() == serverUnknown {
			_ = e.Probe(ctx) // learns the server; its failure shows below
		}
		if e.server.Load() == serverXrootD {
			f, err := spool(b.src)
			if err != nil {
				return fail("put", p, err)
			}
			defer f.Close() // removed already; closing frees the space
			fi, err := f.Stat()
			if err != nil {
				return fail("put", p, fmt.Errorf("%w: spool: %w", endpoint.ErrUnavailable, err))
			}
			b = &reqBody{size: fi.Size(), src: f, seek: f}
		}
	}
	if b.buf != nil {
		hdr.Set("Digest", "adler32="+httpx.Adler32Of(b.buf))
	}
	u := e.url(p, false)
	for attempt := 0; ; attempt++ {
		resp, err := e.put(ctx, u, hdr, b)
		if err != nil {
			if attempt == 0 && errors.Is(err, errStale) && b.canReopen() && ctx.Err() == nil {
				continue // a dead keep-alive connection took none of the body
			}
			return fail("put", p, err)
		}
		switch {
		case resp.StatusCode/100 == 2:
			drain(resp)
			if sums := parseDigests(resp.Header); sums[httpx.Adler32] != "" {
				if got := b.sum(); got != "" && got != sums[httpx.Adler32] {
					return fail("put", p, fmt.Errorf("%w: server reports adler32 %s, sent %s", endpoint.ErrUnavailable, sums[httpx.Adler32], got))
				}
			}
			return nil
		case resp.StatusCode == http.StatusConflict && attempt == 0 && path.Dir(p) != "/":
			se := statusError(resp, nil)
			if !b.canReopen() {
				return fail("put", p, fmt.Errorf("%w (parent missing?): %w", se, errNoRewind))
			}
			if info, err := e.Stat(ctx, p); err == nil && info.IsDir {
				return fail("put", p, fmt.Errorf("%w: is a directory", se))
			}
			if err := e.Mkdir(ctx, path.Dir(p)); err != nil {
				return fail("put", p, fmt.Errorf("%w; making parent: %w", se, err))
			}
		default:
			return fail("put", p, statusError(resp, nil))
		}
	}
}

// put sends one PUT. The Timeout bounds how long the server may stay
// silent: until the transport starts reading the body, between body reads,
// and after the last byte until the answer's headers.
func (e *Endpoint) put(ctx context.Context, u *url.URL, hdr http.Header, b *reqBody) (*http.Response, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := newWatchdog(e.timeout, cancel)
	b.watch = w
	defer w.stop()
	resp, err := e.do(ctx, http.MethodPut, u, hdr, b)
	fired := w.stop()
	if err != nil {
		if serr := b.srcErr(); serr != nil {
			return nil, fmt.Errorf("%w: reading source: %w", endpoint.ErrRefused, serr)
		}
		if fired {
			return nil, fmt.Errorf("%w: server silent for %v", endpoint.ErrUnavailable, e.timeout)
		}
		if b.cur != nil && b.cur.unread() && !errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("%w: %w", errStale, err)
		}
		return nil, err
	}
	// Read the small answer body now: ctx is cancelled when put returns.
	data, rerr := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if rerr != nil && resp.StatusCode/100 == 2 {
		return nil, fmt.Errorf("%w: reading answer: %w", endpoint.ErrUnavailable, rerr)
	}
	resp.Body = io.NopCloser(bytes.NewReader(data))
	return resp, nil
}

// errStale marks a streamed PUT that failed before the transport read any
// of its body, typically on a keep-alive connection the server had
// closed: Put may try once more.
var errStale = errors.New("connection failed before the body was sent")

// watchdog cancels an operation when nothing happened for d.
type watchdog struct {
	d     time.Duration
	timer *time.Timer
	mu    sync.Mutex
	fired bool
	done  bool
}

func newWatchdog(d time.Duration, cancel context.CancelFunc) *watchdog {
	w := &watchdog{d: d}
	w.timer = time.AfterFunc(d, func() {
		w.mu.Lock()
		if !w.done {
			w.fired = true
		}
		w.mu.Unlock()
		cancel()
	})
	return w
}

// kick restarts the wait: the operation made progress.
func (w *watchdog) kick() {
	if w == nil {
		return
	}
	w.mu.Lock()
	if !w.done && !w.fired {
		w.timer.Reset(w.d)
	}
	w.mu.Unlock()
}

// stop ends the watch and reports whether it had fired.
func (w *watchdog) stop() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.done = true
	w.timer.Stop()
	return w.fired
}

// reqBody is a request body that do can open once per attempt.
type reqBody struct {
	size  int64  // bytes, -1 unknown (chunked)
	buf   []byte // the whole body when small
	src   io.Reader
	seek  io.Seeker // src as a Seeker, or nil
	start int64     // src's offset at the start, for seek
	cur   *streamBody
	watch *watchdog
}

// bufferedBody is a small body known up front (a PROPFIND request).
func bufferedBody(b []byte) *reqBody { return &reqBody{size: int64(len(b)), buf: b} }

// newReqBody reads a small r into memory, or prepares to stream it.
func newReqBody(r io.Reader, size int64) (*reqBody, error) {
	if size >= 0 && size <= smallBody || size < 0 {
		limit := int64(smallBody) + 1
		if size >= 0 {
			limit = size + 1
		}
		buf, err := io.ReadAll(io.LimitReader(r, limit))
		if err != nil {
			return nil, fmt.Errorf("%w: reading source: %w", endpoint.ErrRefused, err)
		}
		switch {
		case size >= 0 && int64(len(buf)) != size:
			return nil, fmt.Errorf("%w: source gave %d bytes, want %d", endpoint.ErrRefused, min(int64(len(buf)), size+1), size)
		case size >= 0 || len(buf) <= smallBody:
			return &reqBody{size: int64(len(buf)), buf: buf}, nil
		}
		// Unknown size and larger than smallBody: stream the rest after
		// what was read.
		return &reqBody{size: -1, src: io.MultiReader(bytes.NewReader(buf), r)}, nil
	}
	b := &reqBody{size: size, src: r}
	if s, ok := r.(io.Seeker); ok {
		if off, err := s.Seek(0, io.SeekCurrent); err == nil {
			b.seek, b.start = s, off
		}
	}
	return b, nil
}

// canReopen reports whether the body can be sent once more.
func (b *reqBody) canReopen() bool {
	if b.buf != nil || b.seek != nil || b.cur == nil {
		return true
	}
	return b.cur.unread()
}

// open returns the body for one attempt. A streamed body's previous
// attempt is waited for: the transport may still hold it.
func (b *reqBody) open(ctx context.Context) (io.ReadCloser, error) {
	if b.buf != nil {
		return io.NopCloser(kickReader{bytes.NewReader(b.buf), b.watch}), nil
	}
	if b.cur != nil {
		select {
		case <-b.cur.closed:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %w", endpoint.ErrUnavailable, ctx.Err())
		}
		switch {
		case b.seek != nil:
			if _, err := b.seek.Seek(b.start, io.SeekStart); err != nil {
				return nil, fmt.Errorf("%w: rewinding source: %w", endpoint.ErrRefused, err)
			}
		case !b.cur.unread():
			return nil, fmt.Errorf("%w: %w", endpoint.ErrRefused, errNoRewind)
		}
	}
	b.cur = &streamBody{src: b.src, size: b.size, h: httpx.NewAdler32(), closed: make(chan struct{}), watch: b.watch}
	return b.cur, nil
}

// sum is the adler32 of the last attempt's body, or "" when it is not
// known complete.
func (b *reqBody) sum() string {
	if b.buf != nil {
		return httpx.Adler32Of(b.buf)
	}
	if b.cur == nil {
		return ""
	}
	return b.cur.sum()
}

// srcErr is the error the caller's reader gave, if any: the upload failed
// because of the source, not the server.
func (b *reqBody) srcErr() error {
	if b.cur == nil {
		return nil
	}
	b.cur.mu.Lock()
	defer b.cur.mu.Unlock()
	return b.cur.err
}

// streamBody streams the caller's reader for one attempt, hashing it,
// kicking the watchdog, and checking its length against size.
type streamBody struct {
	mu     sync.Mutex // guards everything below; held during Read so Close waits for it
	src    io.Reader
	size   int64
	n      int64
	h      hash.Hash32
	eof    bool
	err    error // the source's error, or a length mismatch
	shut   bool
	closed chan struct{}
	watch  *watchdog
}

var errTooLong = errors.New("source gives more bytes than the size given")

func (s *streamBody) Read(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shut {
		return 0, errors.New("http: body closed")
	}
	if s.err != nil {
		return 0, s.err
	}
	if s.eof {
		return 0, io.EOF
	}
	s.watch.kick()
	if s.size >= 0 && s.n == s.size {
		s.eof = true
		return 0, io.EOF
	}
	if s.size >= 0 && int64(len(p)) > s.size-s.n {
		p = p[:s.size-s.n]
	}
	k, err := s.src.Read(p)
	s.n += int64(k)
	s.watch.kick()
	if s.size >= 0 && s.n == s.size && err == nil {
		// Before the last bytes go out, check that the source really ends
		// here: once the server has size bytes it keeps the file.
		var one [1]byte
		m, perr := io.ReadFull(s.src, one[:])
		switch {
		case m > 0:
			s.err = errTooLong
			return 0, s.err
		case perr != nil && perr != io.EOF:
			s.err = perr
			return 0, perr
		}
		err = io.EOF
	}
	s.h.Write(p[:k])
	switch {
	case err == io.EOF && s.size >= 0 && s.n < s.size:
		s.err = fmt.Errorf("source gave %d bytes, want %d", s.n, s.size)
		return 0, s.err
	case err == io.EOF:
		s.eof = true
	case err != nil:
		s.err = err
		return 0, err
	}
	return k, err
}

func (s *streamBody) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.shut {
		s.shut = true
		close(s.closed)
	}
	return nil
}

func (s *streamBody) unread() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n == 0 && s.err == nil
}

func (s *streamBody) sum() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil || (s.size >= 0 && s.n != s.size) || (s.size < 0 && !s.eof) {
		return ""
	}
	return fmt.Sprintf("%08x", s.h.Sum32())
}

// kickReader kicks a watchdog on every read of a small body.
type kickReader struct {
	r io.Reader
	w *watchdog
}

func (k kickReader) Read(p []byte) (int, error) {
	k.w.kick()
	return k.r.Read(p)
}

// spool copies src into an unlinked temporary file, positioned at 0.
func spool(src io.Reader) (*os.File, error) {
	f, err := os.CreateTemp("", "lakefed-put-*")
	if err != nil {
		return nil, fmt.Errorf("%w: spool: %w", endpoint.ErrUnavailable, err)
	}
	os.Remove(f.Name())
	if _, err := io.CopyBuffer(f, src, make([]byte, smallBody)); err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: reading source: %w", endpoint.ErrRefused, err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: spool: %w", endpoint.ErrUnavailable, err)
	}
	return f, nil
}
