package xroot

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"go-hep.org/x/hep/xrootd/xrdfs"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/endpoint/xroot/xrdwire"
)

// Why Stat does not go through go-hep's session: a federator's cold
// look-up stats every endpoint once per new path, for every client at
// once, and xrootd answers the requests of one connection one after the
// other (a link is read again only once its request is done). On the one
// multiplexed go-hep connection every stat of every client queued behind
// the others, and each paid for go-hep's goroutines and channels and two
// crossings of the loopback relay (conn.go). So kXR_stat goes on a pool of
// plain, logged-in connections, one request at a time on each, as an HTTP
// client keeps keep-alive connections: concurrent stats run in parallel
// on the server, and a stat costs one write and one read.
//
// The pool keeps up to poolIdle connections idle and closes those idle
// longer than poolIdleTimeout (endpoint.IdlePool). A connection that
// fails in any way but a server's answer is closed, never reused; a stat
// that finds its reused connection closed by the server (idle too long on
// its side) is sent again once on a fresh one. A server that asks for authentication at login, or answers
// the stat with a redirect (a redirector), sends this and every later call
// to the go-hep session (Endpoint.noDirect); one that asks to wait sends
// this call there.
//
// Protocol reference: XRootD protocol v5 (XProtocol.hh): kXR_stat.

// poolIdle bounds the idle connections of an endpoint's pool: what a
// federator's fan-out needs for its clients' concurrent look-ups, as the
// HTTP kinds keep 64 idle connections per host (transport).
const poolIdle = 64

// poolIdleTimeout is how long a connection may stay idle in the pool.
const poolIdleTimeout = 90 * time.Second

// pool holds idle, logged-in connections to one server. Safe for
// concurrent use.
type pool struct {
	addr, user string
	timeout    time.Duration // dial and login, and each request's answer
	idle       endpoint.IdlePool[*poolConn]
	closed     atomic.Bool
}

// newPool makes the pool of connections to addr.
func newPool(addr, user string, timeout time.Duration) *pool {
	return &pool{addr: addr, user: user, timeout: timeout,
		idle: endpoint.IdlePool[*poolConn]{Max: poolIdle, IdleTimeout: poolIdleTimeout, Drop: func(pc *poolConn) { pc.c.Close() }}}
}

// close closes the idle connections, and those given back later; get
// fails from now on.
func (p *pool) close() {
	p.closed.Store(true)
	p.idle.Close()
}

// poolConn is one logged-in connection, used by one caller at a time.
type poolConn struct {
	c      net.Conn
	br     *bufio.Reader
	sid    uint16 // stream id of the last request
	reused bool   // it served a request before this one
	// dataServer: the server called itself a data server in the
	// handshake, not a load balancer (xrdwire.DialServer).
	dataServer bool
}

// get returns an idle connection, or a new one dialled and logged in.
func (p *pool) get(ctx context.Context) (*poolConn, error) {
	if p.closed.Load() {
		return nil, fmt.Errorf("%w: endpoint closed", endpoint.ErrUnavailable)
	}
	if pc, ok := p.idle.Get(); ok {
		pc.reused = true
		return pc, nil
	}
	c, dataServer, err := dialDirect(ctx, p.addr, p.user, p.timeout)
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetKeepAlive(true)
	}
	return &poolConn{c: c, br: bufio.NewReaderSize(c, 4<<10), sid: 1, dataServer: dataServer}, nil
}

// next returns the stream id of the next request on pc.
func (pc *poolConn) next() [2]byte {
	pc.sid++
	if pc.sid < 2 {
		pc.sid = 2 // 0,1 was the login
	}
	var sid [2]byte
	binary.BigEndian.PutUint16(sid[:], pc.sid)
	return sid
}

// stat sends kXR_stat for the server path rp on pc and reads its answer,
// within d and ctx. A server error comes back as xrdproto.ServerError and
// leaves pc usable; any other error leaves it unusable.
func (pc *poolConn) stat(ctx context.Context, rp string, d time.Duration) (xrdfs.EntryStat, error) {
	sid := pc.next()
	// kXR_stat: options, reserved[11], fhandle[4], dlen, path.
	req := make([]byte, 24+len(rp))
	copy(req[0:2], sid[:])
	binary.BigEndian.PutUint16(req[2:], xrdwire.ReqStat)
	binary.BigEndian.PutUint32(req[20:], uint32(len(rp)))
	copy(req[24:], rp)
	body, err := pc.exchange(ctx, req, sid, d, math.MaxInt)
	if err != nil {
		return xrdfs.EntryStat{}, err
	}
	return parseStat(body)
}

// exchange sends req, of stream id sid, on pc and reads its whole answer,
// at most max bytes (xrdwire.ErrTooLong), within d and ctx. A redirect
// gives errFallback, a wait errTryGoHEP. A server error comes back as
// xrdproto.ServerError and leaves pc usable; any other error leaves it
// unusable.
func (pc *poolConn) exchange(ctx context.Context, req []byte, sid [2]byte, d time.Duration, max int) ([]byte, error) {
	_ = pc.c.SetDeadline(time.Now().Add(d))
	stop := context.AfterFunc(ctx, func() { _ = pc.c.SetDeadline(time.Unix(1, 0)) })
	var st int
	var body []byte
	_, err := pc.c.Write(req)
	if err == nil {
		st, body, err = xrdwire.ReadAnswerLimit(pc.br, sid, max)
	}
	if !stop() {
		return nil, ctxErr(ctx)
	}
	switch {
	case err != nil:
		return nil, err
	case st == xrdwire.StatusRedirect:
		return nil, errFallback
	case st != xrdwire.StatusOK:
		return nil, errTryGoHEP
	}
	return body, nil
}

// parseStat reads a stat answer: "id size flags mtime", NUL-terminated
// (newer servers may add fields after these).
func parseStat(body []byte) (xrdfs.EntryStat, error) {
	var f [4]int64
	rest := body
	for i := range f {
		for len(rest) > 0 && rest[0] == ' ' {
			rest = rest[1:]
		}
		n := 0
		for n < len(rest) && rest[n] != ' ' && rest[n] != 0 && rest[n] != '\n' {
			n++
		}
		v, err := strconv.ParseInt(string(rest[:n]), 10, 64)
		if err != nil || n == 0 {
			return xrdfs.EntryStat{}, fmt.Errorf("bad stat answer %q", body)
		}
		f[i] = v
		rest = rest[n:]
	}
	if f[1] < 0 {
		return xrdfs.EntryStat{}, fmt.Errorf("bad stat answer %q", body)
	}
	return xrdfs.EntryStat{HasStatInfo: true, ID: f[0], EntrySize: f[1], Flags: xrdfs.StatFlags(f[2]), Mtime: f[3]}, nil
}

// statPooled stats the server path rp on a pooled connection.
// errFallback and errTryGoHEP say the go-hep session must answer.
func (e *Endpoint) statPooled(ctx context.Context, rp string) (xrdfs.EntryStat, error) {
	return onPooled(ctx, e, func(pc *poolConn) (xrdfs.EntryStat, error) { return pc.stat(ctx, rp, e.timeout) })
}

// onPooled runs ask on a pooled connection of e, which goes back to the
// pool when ask read a whole answer (or sent nothing: errLoadBalancer)
// and is closed otherwise. A connection the server closed while it was
// idle (a restart closes them all) costs one retry on a new one. An
// answer cut short or garbled wraps ErrUnavailable; one over ask's bound
// is xrdwire.ErrTooLong.
func onPooled[T any](ctx context.Context, e *Endpoint, ask func(*poolConn) (T, error)) (T, error) {
	var zero T
	for retried := false; ; retried = true {
		pc, err := e.pool.get(ctx)
		if err != nil {
			if errors.Is(err, errFallback) || isOurs(err) {
				return zero, err
			}
			return zero, fmt.Errorf("%w: connect %s: %w", endpoint.ErrUnavailable, e.addr, err)
		}
		v, err := ask(pc)
		switch {
		case err == nil, serverCode(err) != 0, errors.Is(err, errFallback), errors.Is(err, errTryGoHEP), errors.Is(err, errLoadBalancer):
			// A whole answer was read: the connection is ready for the next.
			e.pool.idle.Put(pc)
			return v, err
		}
		pc.c.Close()
		switch {
		case errors.Is(err, xrdwire.ErrTooLong):
			return zero, err
		case pc.reused && !retried && ctx.Err() == nil && endpoint.ClosedByPeer(err):
			// Closed while idle: the server may have restarted, and
			// closed every idle connection with it.
			e.pool.idle.Drain()
			continue
		case isOurs(err):
			return zero, err
		case errors.Is(err, io.EOF):
			err = io.ErrUnexpectedEOF // the server hung up mid-answer: never its end
		}
		return zero, fmt.Errorf("%w: %w", endpoint.ErrUnavailable, err)
	}
}
