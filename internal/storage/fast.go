package storage

// The fast path: a minimal HTTP/1.1 loop in front of net/http for plain
// (non-TLS) listeners.
//
// Why: a HEAD through net/http costs about 9 µs of CPU here, most of it
// outside this package (request parsing into maps, header sorting and
// formatting, a goroutine and buffers per connection, deadline updates);
// profiles of the storage role under `ab -k -c16` HEAD load showed our
// handler at 17 % of the CPU and net/http's own request path at about 45 %.
// nginx answers the same HEAD for a third of that. The federator's Stat
// fan-out is exactly this load (many small HEADs on keep-alive
// connections), so the common case gets its own code path, and everything
// else keeps net/http's well-tested behaviour.
//
// How: every accepted connection starts here. A request is answered here
// only when it is the plain case, checked strictly: GET or HEAD, HTTP/1.1,
// an origin-form target of unreserved characters (no %-escapes, no query),
// CRLF line endings, only headers from a short list that cannot change
// the answer (Host, User-Agent, Accept, Connection, X-Request-ID, ...), no
// body, and the path names a regular file below Root. Anything else —
// another method, a Range or If-* header, Want-Digest, a path that fails,
// a directory, an error, headers too large for the buffer — hands the
// connection, with every byte read so far, to an http.Server that then
// owns it to the end.
// Hand-off is always correct: net/http sees exactly the bytes the client
// sent. So this file decides only "plain or not", and every error answer,
// limit (431, 413, 400) and WebDAV method stays with the tested handler.
//
// GET bodies go out with sendfile (net.TCPConn.ReadFrom of the *os.File).
// Metrics and the access log are recorded as for the handler.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/sys/unix"

	"github.com/lakefed/lakefed/internal/httpx"
)

// fastBufSize is the read and write buffer of a fast-path connection. A
// request whose headers do not fit is handed to net/http (which allows up
// to maxHeaderBytes).
const fastBufSize = 4 << 10

// Connection states, for shutdown: an idle connection waits for the first
// byte of a request and may be closed at once.
const (
	connActive int32 = iota
	connIdle
)

// fastServer owns the accept loop of one Serve call: it runs fast-path
// connections itself and passes the others to srv through hl.
type fastServer struct {
	s   *Server
	ln  net.Listener
	srv *http.Server
	hl  *handoffListener

	shutting atomic.Bool
	wg       sync.WaitGroup // one per fast-path connection goroutine

	mu    sync.Mutex // guards conns
	conns map[*fastConn]struct{}
}

// fastConn is one connection while the fast path owns it.
type fastConn struct {
	f        *fastServer
	c        net.Conn
	br       *bufio.Reader
	bw       *bufio.Writer
	state    atomic.Int32
	deadline time.Time // read deadline last set
	remote   string    // c.RemoteAddr().String(), for the access log, filled on first use

	// The Last-Modified value of the last file answered: clients tend to
	// ask for the same files, and formatting a date is a tenth of the CPU
	// a HEAD costs here.
	lmSec int64
	lm    []byte
}

// Buffers of fast-path connections: an idle keep-alive connection holds
// its pair, a closed one gives both back, a handed-off one keeps its
// reader (it holds the bytes net/http has still to read).
var (
	readerPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, fastBufSize) }}
	writerPool = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, fastBufSize) }}
)

// serveFast runs Serve for a plain listener: accept loop, fast path, and
// net/http for handed-off connections. Shutdown: stop accepting, close
// idle fast connections, let active ones finish their request (up to
// shutdownTimeout, then close them), then shut srv down.
func (s *Server) serveFast(ctx context.Context, ln net.Listener, srv *http.Server) error {
	f := &fastServer{s: s, ln: ln, srv: srv, hl: newHandoffListener(ln.Addr()), conns: map[*fastConn]struct{}{}}
	srvErr := make(chan error, 1)
	go func() { srvErr <- srv.Serve(f.hl) }()
	acceptErr := make(chan error, 1)
	go func() { acceptErr <- f.acceptLoop() }()

	var err error
	select {
	case aerr := <-acceptErr:
		err = fmt.Errorf("storage: serve: %w", aerr)
	case <-ctx.Done():
		ln.Close()
		<-acceptErr
	}
	ln.Close() // Serve closes ln, whatever ended it
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	f.shutdownConns(sctx)
	serr := srv.Shutdown(sctx)
	if serr != nil {
		srv.Close()
	}
	if e := <-srvErr; e != nil && !errors.Is(e, http.ErrServerClosed) && err == nil {
		err = fmt.Errorf("storage: serve: %w", e)
	}
	if err == nil && serr != nil {
		err = fmt.Errorf("storage: shutdown: %w", serr)
	}
	return err
}

// acceptLoop accepts until the listener fails (also when Serve closes it);
// it backs off on temporary errors (EMFILE) like net/http does.
func (f *fastServer) acceptLoop() error {
	var delay time.Duration
	for {
		c, err := f.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE) ||
				errors.Is(err, unix.ECONNABORTED) {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		fc := &fastConn{f: f, c: c}
		f.mu.Lock()
		if f.shutting.Load() {
			f.mu.Unlock()
			c.Close()
			return net.ErrClosed
		}
		f.conns[fc] = struct{}{}
		f.wg.Add(1)
		f.mu.Unlock()
		go fc.serve()
	}
}

// shutdownConns closes idle fast connections, waits for the active ones
// until ctx ends, then closes what is left.
func (f *fastServer) shutdownConns(ctx context.Context) {
	f.mu.Lock()
	f.shutting.Store(true)
	for c := range f.conns {
		if c.state.Load() == connIdle {
			c.c.SetReadDeadline(time.Unix(1, 0)) // wakes its read; it sees shutting and closes
		}
	}
	f.mu.Unlock()
	done := make(chan struct{})
	go func() { f.wg.Wait(); close(done) }()
	select {
	case <-done:
		return
	case <-ctx.Done():
	}
	f.mu.Lock()
	for c := range f.conns {
		c.c.Close()
	}
	f.mu.Unlock()
	<-done
}

// forget drops c from the tracked connections.
func (f *fastServer) forget(c *fastConn) {
	f.mu.Lock()
	delete(f.conns, c)
	f.mu.Unlock()
	f.wg.Done()
}

// serve runs the request loop of one connection until it closes or is
// handed to net/http.
func (c *fastConn) serve() {
	c.br = readerPool.Get().(*bufio.Reader)
	c.bw = writerPool.Get().(*bufio.Writer)
	c.br.Reset(c.c)
	c.bw.Reset(c.c)
	handedOff := false
	defer func() {
		if v := recover(); v != nil {
			c.f.s.log.Error("panic in fast path", "err", v, "stack", string(debug.Stack()))
		}
		c.bw.Reset(nil)
		writerPool.Put(c.bw)
		if !handedOff {
			c.c.Close()
			c.br.Reset(nil)
			readerPool.Put(c.br)
		}
		c.f.forget(c)
	}()
	for {
		now := time.Now()
		// Moving a deadline is cheap but not free; refresh it only when
		// it has moved a good way (the idle timeout is coarse anyway).
		if c.deadline.Sub(now) < idleTimeout-time.Second {
			c.deadline = now.Add(idleTimeout)
			c.c.SetReadDeadline(c.deadline)
		}
		c.state.Store(connIdle)
		if c.f.shutting.Load() {
			c.bw.Flush()
			return
		}
		if c.br.Buffered() == 0 && c.bw.Buffered() > 0 && c.bw.Flush() != nil {
			return // about to wait for the client: it must have every answer first
		}
		if _, err := c.br.Peek(1); err != nil {
			return // closed, idle timeout or shutdown
		}
		c.state.Store(connActive)
		req, n, ok, gone := c.parse()
		if gone {
			return // the client left (or stalled) mid-head: nothing to answer
		}
		if !ok {
			handedOff = c.handoff()
			return
		}
		keep, ok := c.answer(&req)
		if !ok {
			handedOff = c.handoff()
			return
		}
		c.br.Discard(n)
		if !keep {
			c.closeWrite()
			return
		}
	}
}

// closeWrite flushes and half-closes after a "Connection: close" answer so
// the client reads the whole response before the connection goes.
func (c *fastConn) closeWrite() {
	c.bw.Flush()
	if tc, ok := c.c.(*net.TCPConn); ok {
		tc.CloseWrite()
	}
}

// handoff passes the connection, with every buffered byte, to net/http.
// It reports false when that was not possible (shutting down, write
// failed); the caller then closes it.
func (c *fastConn) handoff() bool {
	if err := c.bw.Flush(); err != nil {
		return false
	}
	c.c.SetReadDeadline(time.Time{}) // net/http sets its own
	return c.f.hl.give(&handoffConn{Conn: c.c, br: c.br})
}

// fastReq is a request the fast path may answer.
type fastReq struct {
	head   bool
	http10 bool   // HTTP/1.0: keep-alive only when asked for, and then said
	target []byte // the request target, still inside the read buffer
	close  bool   // the client sent Connection: close
	keep   bool   // the client sent Connection: keep-alive
	// sentID is the client's X-Request-ID, still inside the read
	// buffer; nil: none. id is the ID answered, kept only for the
	// access log: without one the answer gets it with no allocation.
	sentID []byte
	id     string
}

// parse reads one request head from the buffer, waiting for more bytes
// when it is incomplete. ok is false when the request is not plain (see
// the file comment); gone when the connection failed before the head was
// complete. n is the size of the head, which stays in the buffer until it
// is answered.
func (c *fastConn) parse() (req fastReq, n int, ok, gone bool) {
	var buf []byte
	for {
		buf, _ = c.br.Peek(c.br.Buffered())
		end, complete, plain := scanHead(buf)
		if !plain {
			return req, 0, false, false
		}
		if complete {
			n = end
			break
		}
		if c.br.Buffered() >= c.br.Size() {
			return req, 0, false, false // larger than the buffer: net/http applies its limit
		}
		if c.bw.Flush() != nil {
			return req, 0, false, true
		}
		// A head split over several reads: the slow client gets
		// readHeaderTimeout, as with net/http.
		c.deadline = time.Now().Add(readHeaderTimeout)
		c.c.SetReadDeadline(c.deadline)
		if _, err := c.br.Peek(c.br.Buffered() + 1); err != nil {
			return req, 0, false, true
		}
	}
	req, n, ok = parseHead(buf[:n])
	return req, n, ok, false
}

// scanHead looks for the end of a request head in buf: every line must
// end in CRLF (a bare LF or CR is not plain). end is the index after the
// empty line.
func scanHead(buf []byte) (end int, complete, plain bool) {
	i := 0
	for {
		j := bytes.IndexByte(buf[i:], '\n')
		if j < 0 {
			// Incomplete: a CR may only be the last byte read so far.
			k := bytes.IndexByte(buf[i:], '\r')
			return 0, false, k < 0 || i+k == len(buf)-1
		}
		line := buf[i : i+j]
		if len(line) == 0 || line[len(line)-1] != '\r' || bytes.IndexByte(line[:len(line)-1], '\r') >= 0 {
			return 0, false, false
		}
		i += j + 1
		if len(line) == 1 {
			return i, true, true
		}
	}
}

// parseHead checks a complete request head (CRLF lines, ending in an empty
// line) against the plain case.
func parseHead(head []byte) (req fastReq, n int, ok bool) {
	n = len(head)
	lineEnd := bytes.IndexByte(head, '\r')
	line := head[:lineEnd]
	rest := head[lineEnd+2:]
	switch {
	case bytes.HasPrefix(line, []byte("HEAD ")):
		req.head, line = true, line[5:]
	case bytes.HasPrefix(line, []byte("GET ")):
		line = line[4:]
	default:
		return req, 0, false
	}
	sp := bytes.IndexByte(line, ' ')
	if sp < 1 {
		return req, 0, false
	}
	switch string(line[sp+1:]) {
	case "HTTP/1.1":
	case "HTTP/1.0": // ab, and some old clients
		req.http10 = true
	default:
		return req, 0, false
	}
	req.target = line[:sp]
	if req.target[0] != '/' || len(req.target) > 1 && req.target[1] == '/' {
		// Not origin-form, or "//x", which net/http reads as an authority.
		return req, 0, false
	}
	for _, b := range req.target {
		if !plainPathByte[b] {
			return req, 0, false
		}
	}
	hosts := 0
	for len(rest) > 2 {
		e := bytes.IndexByte(rest, '\r')
		hl := rest[:e]
		rest = rest[e+2:]
		colon := bytes.IndexByte(hl, ':')
		if colon < 1 {
			return req, 0, false
		}
		name, value := hl[:colon], bytes.Trim(hl[colon+1:], " \t")
		for _, b := range value {
			if b < 0x20 && b != '\t' || b == 0x7f {
				return req, 0, false
			}
		}
		switch {
		case asciiEqualFold(name, "host"):
			hosts++
			if hosts > 1 || !httpguts.ValidHostHeader(string(value)) {
				return req, 0, false
			}
		case asciiEqualFold(name, "connection"):
			switch {
			case asciiEqualFold(value, "close"):
				req.close = true
			case asciiEqualFold(value, "keep-alive"):
				req.keep = true
			default:
				return req, 0, false // upgrade, several tokens, ...: net/http decides
			}
		case asciiEqualFold(name, "x-request-id"):
			if req.sentID != nil {
				return req, 0, false // two: net/http's answer ignores both alike
			}
			req.sentID = value
		case asciiEqualFold(name, "content-length"):
			if string(value) != "0" {
				return req, 0, false
			}
		case asciiEqualFold(name, "user-agent"), asciiEqualFold(name, "accept"),
			asciiEqualFold(name, "accept-encoding"), asciiEqualFold(name, "accept-language"),
			asciiEqualFold(name, "cache-control"), asciiEqualFold(name, "pragma"):
			// These cannot change the answer: no content negotiation,
			// compression or caching decisions are made here.
		default:
			return req, 0, false
		}
	}
	if hosts != 1 && !req.http10 {
		return req, 0, false // HTTP/1.1 requires exactly one Host (RFC 9112 §3.2)
	}
	return req, n, true
}

// plainPathByte marks the bytes a plain request target may hold: RFC 3986
// unreserved characters, "/" and a few sub-delimiters that net/http and
// httpx.CleanPath take literally. No "%" (nothing to decode) and no "?".
var plainPathByte = func() (t [256]bool) {
	for b := 'a'; b <= 'z'; b++ {
		t[b] = true
	}
	for b := 'A'; b <= 'Z'; b++ {
		t[b] = true
	}
	for b := '0'; b <= '9'; b++ {
		t[b] = true
	}
	for _, b := range "-._~/+,=:@" {
		t[b] = true
	}
	return t
}()

// asciiEqualFold compares b with the lower-case ASCII string s, ignoring
// case, without allocating.
func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// answer serves a plain request when its path names a regular file below
// Root, or nothing at all (404: a federator's Stat fan-out asks many
// servers that lack the file); ok is false (nothing written) for every
// other outcome, which the handler then answers. keep is false when the
// connection must close.
func (c *fastConn) answer(req *fastReq) (keep, ok bool) {
	s := c.f.s
	start := time.Now()
	p, err := httpx.CleanPath(string(req.target))
	if err != nil || reserved(p) || (s.metricsPath != "" && p == s.metricsPath) {
		return false, false
	}
	name := rel(p)
	var st unix.Stat_t
	var f *os.File
	if req.head {
		if err = s.statRel(name, &st); err != nil {
			return c.notFound(req, p, start, err)
		}
		if !isReg(&st) {
			return false, false
		}
	} else {
		f, err = s.openRel(name, unix.O_RDONLY)
		if err != nil {
			return c.notFound(req, p, start, err)
		}
		defer f.Close()
		if unix.Fstat(int(f.Fd()), &st) != nil || !isReg(&st) {
			return false, false
		}
	}

	b := c.bw.AvailableBuffer()
	b = append(b, "HTTP/1.1 200 OK\r\nAccept-Ranges: bytes\r\nContent-Length: "...)
	b = strconv.AppendInt(b, st.Size, 10)
	b = append(b, "\r\nContent-Type: "...)
	b = append(b, contentType(name)[0]...)
	b = append(b, "\r\nDate: "...)
	b = append(b, httpDate(start)...)
	b = append(b, "\r\nEtag: "...)
	b = appendETag(b, &st) // same fstat: ctime and inode cost nothing more
	b = append(b, "\r\nLast-Modified: "...)
	if c.lm == nil || c.lmSec != st.Mtim.Sec {
		c.lmSec = st.Mtim.Sec
		c.lm = time.Unix(st.Mtim.Sec, 0).UTC().AppendFormat(c.lm[:0], http.TimeFormat)
	}
	b = append(b, c.lm...)
	b = append(b, "\r\nServer: "+httpx.StorageServer...)
	b = c.appendRequestID(b, req)
	b, keep = c.appendConnection(b, req)
	b = append(b, "\r\n\r\n"...)
	c.bw.Write(b)
	return c.finish(req, keep, p, start, f, st.Size)
}

// notFound answers 404 exactly as httpError does (same headers and
// body) when err says the path does not exist; any other error is left
// to the handler (ok false).
func (c *fastConn) notFound(req *fastReq, p string, start time.Time, err error) (keep, ok bool) {
	if !errors.Is(err, fs.ErrNotExist) {
		return false, false
	}
	const body = "not found\n"
	b := c.bw.AvailableBuffer()
	b = append(b, "HTTP/1.1 404 Not Found\r\nContent-Type: text/plain; charset=utf-8\r\nX-Content-Type-Options: nosniff\r\nDate: "...)
	b = append(b, httpDate(start)...)
	b = append(b, "\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(len(body)), 10)
	b = append(b, "\r\nServer: "+httpx.StorageServer...)
	b = c.appendRequestID(b, req)
	b, keep = c.appendConnection(b, req)
	b = append(b, "\r\n\r\n"...)
	var sent int64
	if !req.head {
		b = append(b, body...)
		sent = int64(len(body))
	}
	c.bw.Write(b)
	c.f.s.recordFast(c, req, p, http.StatusNotFound, start, sent)
	return keep, true
}

// appendRequestID adds the X-Request-ID header, with the ID TagRequest
// would give the request, and keeps it in req for the access log.
func (c *fastConn) appendRequestID(b []byte, req *fastReq) []byte {
	b = append(b, "\r\n"+httpx.RequestIDHeader+": "...)
	i := len(b)
	b = httpx.AppendRequestID(b, req.sentID)
	if c.f.s.cfg.AccessLog {
		req.id = string(b[i:])
	}
	return b
}

// appendConnection adds the Connection header the answer needs and
// reports whether the connection stays open. Like net/http: the status
// line says HTTP/1.1 whatever the request's version; an HTTP/1.0 client
// keeps the connection only when it asked and is told so; an HTTP/1.1
// client is told when it closes.
func (c *fastConn) appendConnection(b []byte, req *fastReq) ([]byte, bool) {
	keep := !req.close && (!req.http10 || req.keep)
	switch {
	case req.http10 && keep:
		b = append(b, "\r\nConnection: keep-alive"...)
	case !req.http10 && !keep:
		b = append(b, "\r\nConnection: close"...)
	}
	return b, keep
}

// finish writes the 200 answer for a regular file of size bytes: the
// headers (already in the buffer) and, for GET, the body from f.
func (c *fastConn) finish(req *fastReq, keep bool, p string, start time.Time, f *os.File, size int64) (bool, bool) {
	// A HEAD answer stays in the buffer until the connection would wait
	// for the client (serve flushes then), so pipelined answers share one
	// write.
	var sent int64
	if !req.head {
		if c.bw.Flush() != nil {
			keep = false
		} else {
			// sendfile for a TCP connection; a plain copy otherwise.
			var err error
			sent, err = io.Copy(c.c, &io.LimitedReader{R: f, N: size})
			if err != nil || sent != size {
				keep = false // the framing is broken: the client sees a short body
			}
		}
	}
	c.f.s.recordFast(c, req, p, http.StatusOK, start, sent)
	return keep, true
}

// recordFast updates the metrics (and the access log) as record does.
func (s *Server) recordFast(c *fastConn, req *fastReq, p string, status int, start time.Time, sent int64) {
	d := time.Since(start)
	mi := 0 // GET
	if req.head {
		mi = 1
	}
	s.m.requests[mi][status/100].Inc()
	s.m.fast.Inc()
	s.m.latency[mi].Observe(d.Seconds())
	if sent > 0 {
		s.m.sent.Add(float64(sent))
	}
	if s.cfg.AccessLog {
		if c.remote == "" {
			c.remote = c.c.RemoteAddr().String()
		}
		// The request's context, as the handler's log lines have it.
		ctx := httpx.WithRequestID(context.Background(), req.id)
		s.log.LogAttrs(ctx, slog.LevelInfo, "request",
			slog.String("method", methods[mi]), slog.String("path", p),
			slog.Int("status", status), slog.Int64("bytes", sent),
			slog.Duration("duration", d), slog.String("remote", c.remote))
	}
}

// httpDate returns t as an HTTP date (RFC 9110 §5.6.7), formatted once per
// second and shared.
func httpDate(t time.Time) string {
	sec := t.Unix()
	if d := dateCache.Load(); d != nil && d.sec == sec {
		return d.s
	}
	d := &cachedDate{sec: sec, s: t.UTC().Format(http.TimeFormat)}
	dateCache.Store(d)
	return d.s
}

// cachedDate is one formatted Date header value and its second.
type cachedDate struct {
	sec int64
	s   string
}

var dateCache atomic.Pointer[cachedDate]

// handoffListener is the net.Listener net/http serves: it yields the
// connections the fast path gives up.
type handoffListener struct {
	addr net.Addr
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newHandoffListener(addr net.Addr) *handoffListener {
	return &handoffListener{addr: addr, ch: make(chan net.Conn), done: make(chan struct{})}
}

// give passes c to net/http; false when the listener is closed.
func (l *handoffListener) give(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.done:
		return false
	}
}

// Accept returns the next handed-off connection.
func (l *handoffListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops Accept; http.Server.Shutdown calls it.
func (l *handoffListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

// Addr is the address of the real listener.
func (l *handoffListener) Addr() net.Addr { return l.addr }

// handoffConn is a connection handed to net/http: reads drain what the
// fast path had buffered first. ReadFrom keeps sendfile for net/http's
// file responses (it looks for io.ReaderFrom on the connection).
type handoffConn struct {
	net.Conn
	br *bufio.Reader
}

func (c *handoffConn) Read(p []byte) (int, error) { return c.br.Read(p) }

// ReadFrom hands file bodies to the TCP connection's sendfile.
func (c *handoffConn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}

// CloseWrite lets net/http half-close before closing (it looks for the
// method on the connection), as it does for its own TCP connections.
func (c *handoffConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
