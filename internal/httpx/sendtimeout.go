package httpx

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"
)

// DefaultSendTimeout is how long one step of sending an answer may take
// before the connection is reset: nginx's send_timeout default. A client
// that stops reading (its window shut) would otherwise hold the server's
// goroutine, file and socket buffers, and a proxied read's replica
// connection behind it, for as long as it keeps the connection open: an
// answer of any size has no fixed duration, so net/http's whole-answer
// WriteTimeout cannot bound it.
const DefaultSendTimeout = 60 * time.Second

// SendStep is the most one write, sendfile(2) or splice(2) of an answer
// moves under one deadline: a client must take SendStep bytes within
// the send timeout (35 KB/s with the defaults), as nginx's
// sendfile_max_chunk (2 MiB) and send_timeout ask of it. A client that
// reads, however slowly above that, is never cut.
//
// Why not the kernel's TCP_USER_TIMEOUT, which needs no code on the write
// paths: on Linux 6.18 it cut a client reading 256 KiB every 3 s with a
// 5 s timeout after 12 s, so it bounds the time a window stays mostly
// shut, not the time without progress.
const SendStep = 2 << 20

// SendConn is a connection whose answers must make progress: each step
// of at most SendStep bytes (Write, ReadFrom, or a move the caller
// brackets with Arm and Check) gets the send timeout as its write
// deadline, and a step that misses it resets the connection (RST, as
// nginx's reset_timedout_connection): a close would leave the unsent
// bytes queued in the kernel for as long as the client keeps its window
// shut. ReadFrom keeps sendfile(2) and splice(2) (net.TCPConn's), step by
// step. The one home of the send timeout: the fast path and every
// net/http listener (SendListener) use it.
type SendConn struct {
	net.Conn
	d  time.Duration
	at atomic.Int64 // the write deadline set last, Unix ns; 0: none
}

// NewSendConn returns c under a send timeout of d (≤ 0: none; then
// SendConn only passes the calls on).
func NewSendConn(c net.Conn, d time.Duration) *SendConn {
	return &SendConn{Conn: c, d: d}
}

// Arm gives the next step its deadline: now plus the send timeout
// (nextDeadline).
func (c *SendConn) Arm() {
	if dl, ok := nextDeadline(c.at.Load(), c.d); ok {
		c.at.Store(dl.UnixNano())
		c.Conn.SetWriteDeadline(dl)
	}
}

// nextDeadline is the deadline the next step of an answer under the send
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

// Write sends p in steps of at most SendStep, each under the timeout.
func (c *SendConn) Write(p []byte) (int, error) {
	var n int
	for len(p) > 0 {
		c.Arm()
		k := min(len(p), SendStep)
		m, err := c.Conn.Write(p[:k])
		n += m
		if err != nil {
			return n, c.Check(err)
		}
		p = p[k:]
	}
	return n, nil
}

// ReadFrom sends what r gives in steps of at most SendStep, each under
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
		step := &io.LimitedReader{R: r, N: SendStep}
		if limited {
			if lr.N <= 0 {
				return done, nil
			}
			step.R, step.N = lr.R, min(lr.N, SendStep)
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
// a send timeout of d: for a listener an http.Server serves directly
// (TLS wraps it, so that every record goes out under the timeout). The
// fast path applies its own (fastpath.Options.SendTimeout).
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

// SendTimeoutHandler puts the HTTP/2 answers of h under the send timeout
// d too. An HTTP/2 stream's bytes wait for the client's flow-control
// window, which a client can keep shut on a connection it keeps alive
// (it answers pings, it reads other streams): no write on the connection
// stalls, so SendConn never sees it. Each step of at most SendStep bytes
// of such an answer gets d as the stream's write deadline
// (http.ResponseController); a step that misses it resets the stream.
// HTTP/1 answers pass as they are (their connection is a SendConn).
func SendTimeoutHandler(h http.Handler, d time.Duration) http.Handler {
	if d <= 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 2 {
			h.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(&streamWriter{ResponseWriter: w, rc: http.NewResponseController(w), d: d}, r)
	})
}

// streamWriter is an HTTP/2 answer under the send timeout.
type streamWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
	at int64 // the write deadline set last, Unix ns; 0: none
}

// Write sends p in steps of at most SendStep, each under the timeout.
func (w *streamWriter) Write(p []byte) (int, error) {
	var n int
	for len(p) > 0 {
		if dl, ok := nextDeadline(w.at, w.d); ok {
			w.at = dl.UnixNano()
			w.rc.SetWriteDeadline(dl)
		}
		k := min(len(p), SendStep)
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
