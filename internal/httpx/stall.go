package httpx

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultStallTimeout is how long one step of a transfer may stall, either
// way, before the server lets the client go: nginx's send_timeout and
// client_body_timeout default. A client that stops reading an answer
// (its window shut), or stops sending a request body it announced, would
// otherwise hold the server's goroutine, file and socket buffers (and a
// proxied read's replica connection, an upload's temporary file) for as
// long as it keeps the connection open: a transfer of any size has no
// fixed duration, so net/http's whole-request ReadTimeout and
// WriteTimeout cannot bound it.
const DefaultStallTimeout = 60 * time.Second

// StallStep is the most one step moves under one deadline: a write,
// sendfile(2) or splice(2) of an answer, or the bytes of a request body
// read. A client must move StallStep bytes within the stall timeout (35
// KB/s with the defaults), as nginx's sendfile_max_chunk (2 MiB) and
// send_timeout ask of it; one that does, however slowly above that, is
// never cut.
//
// Why not the kernel's TCP_USER_TIMEOUT, which needs no code on the write
// paths: on Linux 6.18 it cut a client reading 256 KiB every 3 s with a
// 5 s timeout after 12 s, so it bounds the time a window stays mostly
// shut, not the time without progress.
const StallStep = 2 << 20

// SendConn is a connection whose answers must make progress: each step
// of at most StallStep bytes (Write, ReadFrom, or a move the caller
// brackets with Arm and Check) gets the stall timeout as its write
// deadline, and a step that misses it resets the connection (RST, as
// nginx's reset_timedout_connection): a close would leave the unsent
// bytes queued in the kernel for as long as the client keeps its window
// shut. ReadFrom keeps sendfile(2) and splice(2) (net.TCPConn's), step by
// step. The one home of the stall timeout for answers: the fast path
// and every net/http listener (SendListener) use it.
type SendConn struct {
	net.Conn
	d  time.Duration
	at atomic.Int64 // the write deadline set last, Unix ns; 0: none
}

// NewSendConn returns c under a stall timeout of d (≤ 0: none; then
// SendConn only passes the calls on).
func NewSendConn(c net.Conn, d time.Duration) *SendConn {
	return &SendConn{Conn: c, d: d}
}

// Arm gives the next step its deadline: now plus the stall timeout
// (nextDeadline).
func (c *SendConn) Arm() {
	if dl, ok := nextDeadline(c.at.Load(), c.d); ok {
		c.at.Store(dl.UnixNano())
		c.Conn.SetWriteDeadline(dl)
	}
}

// nextDeadline is the deadline the next step of an answer under the stall
// timeout d gets, when the one set (at, Unix ns; 0: none) must move: once
// it has fallen a sixty-fourth of d behind now plus d, since a deadline
// move is a timer change, not free.
func nextDeadline(at int64, d time.Duration) (time.Time, bool) {
	if d <= 0 {
		return time.Time{}, false
	}
	now := time.Now()
	if at != 0 && time.Unix(0, at).Sub(now) >= d-d/64 {
		return time.Time{}, false
	}
	return now.Add(d), true
}

// Check returns err, having set the connection to reset on close when
// err is the send deadline's.
func (c *SendConn) Check(err error) error {
	if err != nil && c.d > 0 && errors.Is(err, os.ErrDeadlineExceeded) {
		if tc, ok := c.Conn.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
	}
	return err
}

// Write sends p in steps of at most StallStep, each under the timeout.
func (c *SendConn) Write(p []byte) (int, error) {
	var n int
	for len(p) > 0 {
		c.Arm()
		k := min(len(p), StallStep)
		m, err := c.Conn.Write(p[:k])
		n += m
		if err != nil {
			return n, c.Check(err)
		}
		p = p[k:]
	}
	return n, nil
}

// ReadFrom sends what r gives in steps of at most StallStep, each under
// the timeout, through the connection's own ReadFrom (sendfile from a
// file, splice from a socket, which look through an io.LimitedReader).
// An io.LimitedReader r is used up as a plain copy would use it: a
// caller may read its N afterwards.
func (c *SendConn) ReadFrom(r io.Reader) (int64, error) {
	rf, ok := c.Conn.(io.ReaderFrom)
	if !ok {
		return io.Copy(struct{ io.Writer }{c}, r)
	}
	lr, limited := r.(*io.LimitedReader)
	var done int64
	for {
		step := &io.LimitedReader{R: r, N: StallStep}
		if limited {
			if lr.N <= 0 {
				return done, nil
			}
			step.R, step.N = lr.R, min(lr.N, StallStep)
		}
		want := step.N
		c.Arm()
		m, err := rf.ReadFrom(step)
		done += m
		if limited {
			lr.N -= m
		}
		if err != nil {
			return done, c.Check(err)
		}
		if m < want {
			return done, nil // r ended
		}
	}
}

// SetWriteDeadline sets the deadline and lets the next step's Arm set
// its own from it.
func (c *SendConn) SetWriteDeadline(t time.Time) error {
	c.note(t)
	return c.Conn.SetWriteDeadline(t)
}

// SetDeadline is net.Conn's, noted as SetWriteDeadline notes it.
func (c *SendConn) SetDeadline(t time.Time) error {
	c.note(t)
	return c.Conn.SetDeadline(t)
}

func (c *SendConn) note(t time.Time) {
	if t.IsZero() {
		c.at.Store(0)
	} else {
		c.at.Store(t.UnixNano())
	}
}

// CloseWrite half-closes, for net/http's close after an answer that ends
// the connection (it looks for the method on the connection).
func (c *SendConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// SendListener returns ln with every accepted connection a SendConn under
// a stall timeout of d: for a listener an http.Server serves directly
// (TLS wraps it, so that every record goes out under the timeout). The
// fast path applies its own (fastpath.Options.StallTimeout).
func SendListener(ln net.Listener, d time.Duration) net.Listener {
	if d <= 0 {
		return ln
	}
	return sendListener{ln, d}
}

type sendListener struct {
	net.Listener
	d time.Duration
}

func (l sendListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return NewSendConn(c, l.d), nil
}

// StallHandler puts h's request bodies, and its HTTP/2 answers, under the
// stall timeout d (the HTTP/1 answers are its connection's: SendConn):
//
//   - the reads of each step of a request body (at most StallStep
//     bytes) may wait d in all for the client; the handler's own work
//     between them does not count. Over HTTP/1 a body that stalls
//     longer ends its connection (closed by a timer, which needs the
//     connection: StallConnContext); over HTTP/2, its stream (the
//     stream's read deadline). A read deadline on an HTTP/1 connection would outlive
//     the body: net/http reads the connection in the background once the
//     body is read, and a deadline that fires then cancels the request's
//     context while its handler still works. The timer closes nothing
//     once the body has ended or the handler has returned.
//   - an HTTP/2 answer's bytes wait for the client's flow-control window,
//     which a client can keep shut on a connection it keeps alive (it
//     answers pings, it reads other streams): no write on the connection
//     stalls, so SendConn never sees it. Each step of such an answer gets
//     d as the stream's write deadline (http.ResponseController); a step
//     that misses it resets the stream.
func StallHandler(h http.Handler, d time.Duration) http.Handler {
	if d <= 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h2 := r.ProtoMajor == 2
		if r.Body != nil && r.Body != http.NoBody {
			b := &stallBody{ReadCloser: r.Body, d: d}
			if h2 {
				b.rc = http.NewResponseController(w)
			} else {
				b.conn, _ = r.Context().Value(connKey{}).(net.Conn)
			}
			if b.rc != nil || b.conn != nil {
				// The handler's request is a copy: net/http looks at
				// its own request's Body after the handler (an
				// unread "Expect: 100-continue" body closes the
				// connection, any other is read on), and must find
				// the body it made there.
				r2 := new(http.Request)
				*r2 = *r
				r2.Body = b
				r = r2
				defer b.stop()
			}
		}
		if h2 {
			w = &streamWriter{ResponseWriter: w, rc: http.NewResponseController(w), d: d}
		}
		h.ServeHTTP(w, r)
	})
}

// connKey is the request context's key of its connection.
type connKey struct{}

// StallConnContext is the http.Server's ConnContext StallHandler needs:
// it keeps each connection in its requests' contexts, so that a request
// body that stalls can end its connection.
func StallConnContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// stallBody is a request body under the stall timeout. What a step may
// take is the time its reads wait for the client, not the handler's own
// work between them (a proxied upload written on to a slow endpoint is
// not the client's stall).
type stallBody struct {
	io.ReadCloser
	d      time.Duration
	rc     *http.ResponseController // HTTP/2: the stream's read deadline
	conn   net.Conn                 // HTTP/1: closed when a step stalls
	left   int64                    // bytes the step may still bring
	budget time.Duration            // the wait the step may still take

	mu    sync.Mutex
	t     *time.Timer // HTTP/1: closes conn
	ended bool        // the body ended or the handler returned
}

// Read is the body's, its waits bounded per step of StallStep bytes.
func (b *stallBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		b.left, b.budget = StallStep, b.d
	}
	start := time.Now()
	b.watch(start.Add(b.budget))
	n, err := b.ReadCloser.Read(p)
	b.budget -= time.Since(start)
	b.left -= int64(n)
	if err != nil {
		b.stop()
	} else {
		b.watch(time.Time{})
	}
	return n, err
}

// watch bounds the read about to wait by dl, or ends the bound (dl zero).
func (b *stallBody) watch(dl time.Time) {
	if b.rc != nil {
		b.rc.SetReadDeadline(dl)
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.ended:
	case dl.IsZero():
		if b.t != nil {
			b.t.Stop()
		}
	case b.t == nil:
		b.t = time.AfterFunc(time.Until(dl), b.expire)
	default:
		b.t.Reset(time.Until(dl))
	}
}

// expire ends a connection whose body stalled.
func (b *stallBody) expire() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.ended {
		b.ended = true
		b.conn.Close()
	}
}

// stop ends the watch for good: the body has ended or its handler
// returned.
func (b *stallBody) stop() {
	if b.rc != nil {
		b.rc.SetReadDeadline(time.Time{})
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ended = true
	if b.t != nil {
		b.t.Stop()
	}
}

// streamWriter is an HTTP/2 answer under the stall timeout.
type streamWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
	at int64 // the write deadline set last, Unix ns; 0: none
}

// Write sends p in steps of at most StallStep, each under the timeout.
func (w *streamWriter) Write(p []byte) (int, error) {
	var n int
	for len(p) > 0 {
		if dl, ok := nextDeadline(w.at, w.d); ok {
			w.at = dl.UnixNano()
			w.rc.SetWriteDeadline(dl)
		}
		k := min(len(p), StallStep)
		m, err := w.ResponseWriter.Write(p[:k])
		n += m
		if err != nil {
			return n, err
		}
		p = p[k:]
	}
	return n, nil
}

// Flush is http.Flusher's, for handlers that ask for it by assertion.
func (w *streamWriter) Flush() { w.rc.Flush() }

// Unwrap lets http.ResponseController reach the stream.
func (w *streamWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
