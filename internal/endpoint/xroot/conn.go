package xroot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"go-hep.org/x/hep/xrootd"
)

// Why this file exists: go-hep's client (v0.40.0) is correct on the wire
// but was written for command-line tools, and three of its habits would
// hurt a long-running server:
//
//  1. When the connection of the first session breaks (the server dies,
//     a reset), its reader goroutine panics (cliSession.handleReadError),
//     killing the whole process, unless the session's context was
//     cancelled first.
//  2. A caller whose ctx ends before the answer leaves its stream claimed;
//     when the answer comes the reader blocks forever on an unbuffered
//     channel while holding the multiplexer's lock, and every later
//     request of that client hangs (mux.SendData, mux.Claim).
//  3. The ctx given to NewClient (and to a write that opens a kXR_bind
//     sub-session) is the lifetime of that session, not a deadline.
//
// So a session here is driven like this: go-hep dials a loopback relay we
// own instead of the server, and every request runs with the session's
// own long-lived context (sctx), never with the caller's. A caller waits
// on its own select with the caller's ctx and a timer; a timer that fires
// means the server stopped answering, and the whole session is killed:
// sctx is cancelled first (so go-hep's reader goroutines exit quietly, 1)
// and then the relay closes both sides of every connection (so nothing
// waits on a dead socket). When the server side of a relayed connection
// ends on its own, the relay kills the session the same way. A caller that
// leaves early (its ctx ended) does not kill the session: the request goes
// on in the background, still read by its goroutine (so 2 cannot happen),
// and a watchdog kills the session if that answer never comes.
//
// The relay costs one extra loopback hop, spliced by the kernel (io.Copy
// between TCP connections uses splice(2) on Linux).
//
// TODO(lakefed): fork go-hep's client (BSD-3) with these fixes, or send
// them upstream, and drop the relay.

// session is one go-hep client, its relay and its lifetime.
type session struct {
	cli    *xrootd.Client // set once by dial before the session is shared
	sctx   context.Context
	cancel context.CancelFunc
	relay  *relay
	dead   chan struct{} // closed by kill
	once   sync.Once

	mu     sync.Mutex // guards killed and handing cli over between dial and kill
	killed bool
}

// kill ends the session: cancel first, then cut the connections (see the
// comment at the top of this file for why the order matters). Safe to call
// many times and from any goroutine.
func (s *session) kill() {
	s.once.Do(func() {
		s.cancel()
		s.relay.close()
		close(s.dead)
		s.mu.Lock()
		s.killed = true
		s.mu.Unlock()
		// go-hep's Client.Close is not called: it iterates the session
		// map without a lock while a request still in flight may write
		// it (a data race inside go-hep), and it may block on a request
		// whose caller has left. With the session context cancelled and
		// the relay's connections cut, go-hep's goroutines end by
		// themselves.
	})
}

// alive reports whether the session has not been killed.
func (s *session) alive() bool {
	select {
	case <-s.dead:
		return false
	default:
		return true
	}
}

// relay forwards loopback connections from go-hep to the XRootD server.
// Any connection that breaks calls onBreak (which kills the session).
type relay struct {
	ln       net.Listener
	upstream string
	first    net.Conn // pre-dialled server connection for the first accept; guarded by mu
	dialTO   time.Duration
	onBreak  func()
	wg       *sync.WaitGroup // the endpoint's: Close waits for relay goroutines

	mu     sync.Mutex // guards conns and closed
	conns  []net.Conn
	closed bool
}

// newRelay dials the server once (so a refused or unreachable server is
// reported as such) and listens on loopback for go-hep.
func newRelay(upstream string, dialTO time.Duration, wg *sync.WaitGroup) (*relay, error) {
	up, err := net.DialTimeout("tcp", upstream, dialTO)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		up.Close()
		return nil, fmt.Errorf("relay listen: %w", err)
	}
	return &relay{ln: ln, upstream: upstream, first: up, dialTO: dialTO, wg: wg}, nil
}

// upstreamConn returns the pre-dialled connection the first time, a new
// one after that.
func (r *relay) upstreamConn() (net.Conn, error) {
	r.mu.Lock()
	up := r.first
	r.first = nil
	r.mu.Unlock()
	if up != nil {
		return up, nil
	}
	return net.DialTimeout("tcp", r.upstream, r.dialTO)
}

// addr is where go-hep should dial.
func (r *relay) addr() string { return r.ln.Addr().String() }

// serve accepts go-hep's connections until the relay is closed.
func (r *relay) serve() {
	defer r.wg.Done()
	for {
		down, err := r.ln.Accept()
		if err != nil {
			return
		}
		if !r.track(down) {
			return
		}
		r.wg.Add(1)
		go r.pipe(down)
	}
}

// track remembers c so close can cut it; false when already closed.
func (r *relay) track(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		c.Close()
		return false
	}
	r.conns = append(r.conns, c)
	return true
}

func (r *relay) pipe(down net.Conn) {
	defer r.wg.Done()
	up, err := r.upstreamConn()
	if err != nil || !r.track(up) {
		r.onBreak()
		return
	}
	if tc, ok := up.(*net.TCPConn); ok {
		_ = tc.SetKeepAlive(true)
		_ = tc.SetNoDelay(true)
	}
	done := make(chan struct{}, 2)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		_, _ = io.Copy(up, down)
		done <- struct{}{}
	}()
	_, _ = io.Copy(down, up)
	done <- struct{}{}
	// Either direction ending means the session is over: the server
	// went away, or we closed it.
	r.onBreak()
	<-done
}

// close stops accepting and cuts every connection. Safe to call twice.
func (r *relay) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	r.closed = true
	r.ln.Close()
	if r.first != nil {
		r.first.Close()
		r.first = nil
	}
	for _, c := range r.conns {
		c.Close()
	}
	r.conns = nil
}

// errDialTimeout says the server accepted TCP but did not finish the
// XRootD handshake and login within the timeout.
var errDialTimeout = errors.New("no handshake within timeout")

// dial makes a new session to addr: a relay, then go-hep's client through
// it. It gives up after d, killing what it started.
func dial(addr, user string, d time.Duration, wg *sync.WaitGroup) (*session, error) {
	rl, err := newRelay(addr, d, wg)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(context.Background())
	s := &session{sctx: sctx, cancel: cancel, relay: rl, dead: make(chan struct{})}
	rl.onBreak = s.kill
	wg.Add(1)
	go rl.serve()

	type result struct {
		cli *xrootd.Client
		err error
	}
	ch := make(chan result, 1)
	go func() {
		cli, err := xrootd.NewClient(sctx, rl.addr(), user)
		ch <- result{cli, err}
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case res := <-ch:
		if res.err != nil {
			s.kill()
			return nil, res.err
		}
		s.mu.Lock()
		killed := s.killed
		if !killed {
			s.cli = res.cli
		}
		s.mu.Unlock()
		if killed {
			// The relay broke during the handshake.
			go func() { _ = res.cli.Close() }()
			return nil, errors.New("connection closed during login")
		}
		return s, nil
	case <-t.C:
		s.kill()
		go func() {
			// NewClient returns once sctx is cancelled; close what it made.
			if res := <-ch; res.cli != nil {
				_ = res.cli.Close()
			}
		}()
		return nil, errDialTimeout
	}
}
