package fastpath

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/lakefed/lakefed/internal/httpx"
)

// Connection states, for shutdown: an idle connection waits for the first
// byte of a request and may be closed at once.
const (
	stateActive int32 = iota
	stateIdle
)

// conn is one connection while the fast path owns it.
type conn struct {
	s        *Server
	c        net.Conn
	sc       *httpx.SendConn // c under the stall timeout: every answer's bytes go through it
	br       *bufio.Reader
	bw       *bufio.Writer
	state    atomic.Int32
	deadline time.Time // the read deadline last set; zero: none
	idleSet  bool      // deadline is an idle timeout's, not a head's

	// The request being answered and its answer, reused.
	req Request
	ans Answer
	w   Writer // ans's, when the Responder asks for it

	// id is the request ID answered (httpx.AppendRequestID's choice),
	// made before Respond so that the Responder may log it.
	id    [httpx.MaxRequestIDLen]byte
	idLen int

	remote string // c.RemoteAddr().String(), made on first use

	// The last time HeaderTime formatted: clients tend to ask for the
	// same files, and formatting a date is a tenth of the CPU a HEAD
	// costs.
	timeSec int64
	timeFmt []byte
}

// serve runs the request loop of the connection until it closes or is
// handed to net/http.
func (c *conn) serve() {
	s := c.s
	c.br = s.readers.Get().(*bufio.Reader)
	c.bw = s.writers.Get().(*bufio.Writer)
	c.sc = httpx.NewSendConn(c.c, s.stallTimeout)
	c.br.Reset(c.c)
	c.bw.Reset(c.sc)
	handedOff := false
	defer func() {
		// A panic ends the connection, with what is buffered sent first
		// (answers before it, the head and body begun), as net/http
		// does: the client sees the answer cut. http.ErrAbortHandler
		// aborts an answer quietly, as there.
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler {
				s.log.Error("panic in fast path", "err", v, "stack", string(debug.Stack()))
			}
			c.bw.Flush()
		}
		c.bw.Reset(nil)
		s.writers.Put(c.bw)
		if !handedOff {
			c.c.Close()
			c.br.Reset(nil)
			s.readers.Put(c.br)
		}
		s.forget(c)
	}()
	for {
		c.idleDeadline()
		c.state.Store(stateIdle)
		if s.shutting.Load() {
			c.bw.Flush()
			return
		}
		if c.br.Buffered() == 0 && c.bw.Buffered() > 0 && c.bw.Flush() != nil {
			return // about to wait for the client: it must have every answer first
		}
		if _, err := c.br.Peek(1); err != nil {
			return // closed, idle timeout or shutdown
		}
		c.state.Store(stateActive)
		n, plain, gone := c.readHead()
		if gone {
			return // the client left (or stalled) mid-head: nothing to answer
		}
		if !plain || !c.respond() {
			handedOff = c.handoff()
			return
		}
		c.br.Discard(n)
		if c.ans.broken {
			// A body went out short: the client gets what there is,
			// and must then see the connection end.
			c.bw.Flush()
			return
		}
		if !c.ans.keep {
			c.closeWrite()
			return
		}
	}
}

// idleDeadline sets the read deadline for the wait between requests:
// the idle timeout. Moving a deadline is cheap but not free, so it moves
// only when it has fallen a sixty-fourth of the timeout behind (the
// timeout is coarse anyway); a head's deadline set for the last request
// is always replaced.
func (c *conn) idleDeadline() {
	d := c.s.idleTimeout
	if d <= 0 {
		if !c.deadline.IsZero() {
			c.deadline = time.Time{}
			c.c.SetReadDeadline(c.deadline)
		}
		return
	}
	now := time.Now()
	if !c.idleSet || c.deadline.Sub(now) < d-d/64 {
		c.deadline, c.idleSet = now.Add(d), true
		c.c.SetReadDeadline(c.deadline)
	}
}

// readHead reads one request head into the buffer, waiting for more bytes
// while it is incomplete, and parses it into c.req. plain is false when
// the request is not the plain case (parse.go), gone when the connection
// failed before the head was complete. n is the size of the head, which
// stays in the buffer until it is answered.
func (c *conn) readHead() (n int, plain, gone bool) {
	s := c.s
	headDeadline := false
	var buf []byte
	for {
		buf, _ = c.br.Peek(c.br.Buffered())
		end, complete, ok := scanHead(buf)
		if !ok {
			return 0, false, false
		}
		if complete {
			n = end
			break
		}
		if c.br.Buffered() >= c.br.Size() || c.br.Buffered() > s.maxHead {
			return 0, false, false // larger than the buffer: net/http applies its limit
		}
		if c.bw.Flush() != nil {
			return 0, false, true
		}
		if s.headerTimeout > 0 && !headDeadline {
			// A head that comes in pieces gets ReadHeaderTimeout from
			// its first byte, as in net/http: once, so that a client
			// trickling a byte at a time cannot keep the connection.
			headDeadline = true
			c.deadline, c.idleSet = time.Now().Add(s.headerTimeout), false
			c.c.SetReadDeadline(c.deadline)
		}
		if _, err := c.br.Peek(c.br.Buffered() + 1); err != nil {
			return 0, false, true
		}
	}
	if n > s.maxHead {
		return 0, false, false
	}
	if !parseHead(buf[:n], &c.req) || c.req.Query != nil && !s.opts.Query {
		return 0, false, false
	}
	return n, true, false
}

// respond offers the parsed request to the Responder and reports whether
// it answered.
func (c *conn) respond() bool {
	s := c.s
	c.req.c = c
	c.idLen = len(httpx.AppendRequestID(c.id[:0], c.req.sentID))
	c.ans = Answer{c: c}
	ok := s.resp.Respond(&c.ans, &c.req)
	if ok && c.ans.w != nil {
		c.ans.w.End() // the handler returned: its answer ends, as in net/http
	}
	if ok != c.ans.ended {
		// Ended but declined: the answer is in the buffer and cannot be
		// handed off. Answered without an end: nothing framed it.
		panic(fmt.Sprintf("fastpath: Respond returned %v, answer ended %v", ok, c.ans.ended))
	}
	return ok
}

// closeWrite flushes and half-closes after a "Connection: close" answer so
// that the client reads the whole answer before the connection goes
// (RFC 9112 §9.6).
func (c *conn) closeWrite() {
	c.bw.Flush()
	if cw, ok := c.c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
}

// handoff passes the connection, with every buffered byte, to net/http.
// It reports false when that was not possible (shutting down, a write
// failed); the caller then closes it.
func (c *conn) handoff() bool {
	if err := c.bw.Flush(); err != nil {
		return false
	}
	// net/http sets its own deadlines, for each request; a head that came
	// in pieces here gets its header timeout afresh there, so a client
	// has at most twice ReadHeaderTimeout for one head.
	c.c.SetReadDeadline(time.Time{})
	return c.s.hl.give(&handoffConn{Conn: c.sc, br: c.br})
}

// remoteAddr is the peer's address as net/http gives it in
// http.Request.RemoteAddr.
func (c *conn) remoteAddr() string {
	if c.remote == "" {
		c.remote = c.c.RemoteAddr().String()
	}
	return c.remote
}

// remoteAddrPort is the peer's address as netip.ParseAddrPort reads
// remoteAddr: an IPv4 client of a dual-stack listener is a 4-byte
// address there, as in the string form.
func (c *conn) remoteAddrPort() netip.AddrPort {
	if ta, ok := c.c.RemoteAddr().(*net.TCPAddr); ok {
		ap := ta.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	ap, _ := netip.ParseAddrPort(c.remoteAddr())
	return ap
}
