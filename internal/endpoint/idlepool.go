package endpoint

import (
	"errors"
	"io"
	"sync"
	"syscall"
	"time"
)

// IdlePool keeps a kind's idle connections to one server for the next
// request, as an HTTP client keeps keep-alive connections: a federator's
// look-ups ask every endpoint for every new path, for many clients at
// once, and a request that finds a connection idle skips the dial and
// the login or handshake. The kinds whose metadata requests go one at a
// time on a connection of their own use it (root:// kXR_stat, plain-HTTP
// HEAD).
//
// It holds at most Max idle connections (Put closes those beyond) and
// closes those idle longer than IdleTimeout with a timer, not on the next
// request: an endpoint a reload replaced is never asked again. Safe for
// concurrent use; the zero value is not usable: set the fields before
// the first Put and leave them.
//
//	p := &endpoint.IdlePool[*conn]{Max: 64, IdleTimeout: 90 * time.Second, Drop: (*conn).close}
//	c, ok := p.Get() // !ok: dial one
//	... one request on c ...
//	p.Put(c)         // or close c if the exchange failed
type IdlePool[C any] struct {
	// Max bounds the idle connections kept.
	Max int
	// IdleTimeout is how long a connection may stay idle.
	IdleTimeout time.Duration
	// Drop closes a connection the pool lets go.
	Drop func(C)

	mu     sync.Mutex    // guards idle, sweep and closed
	idle   []idleConn[C] // oldest first
	sweep  *time.Timer   // closes the connections idle too long; nil when none is idle
	closed bool
}

// idleConn is a connection and when it went idle.
type idleConn[C any] struct {
	c     C
	since time.Time
}

// Get takes the connection idle the shortest time; false when none is
// (or the pool is closed).
func (p *IdlePool[C]) Get() (C, bool) {
	var zero C
	p.mu.Lock()
	n := len(p.idle)
	if n == 0 || p.closed {
		p.mu.Unlock()
		return zero, false
	}
	ic := p.idle[n-1]
	p.idle[n-1] = idleConn[C]{}
	p.idle = p.idle[:n-1]
	p.mu.Unlock()
	if time.Since(ic.since) > p.IdleTimeout {
		// The newest is stale, so all are (the timer is late).
		p.Drop(ic.c)
		p.Drain()
		return zero, false
	}
	return ic.c, true
}

// Put gives c back for the next request, or closes it when the pool is
// full or closed. c must be ready for a new request: nothing of an
// earlier exchange left to read.
func (p *IdlePool[C]) Put(c C) {
	now := time.Now()
	p.mu.Lock()
	if p.closed || len(p.idle) >= p.Max {
		p.mu.Unlock()
		p.Drop(c)
		return
	}
	p.idle = append(p.idle, idleConn[C]{c, now})
	if p.sweep == nil {
		p.sweep = time.AfterFunc(p.IdleTimeout, p.expire)
	}
	p.mu.Unlock()
}

// Idle reports how many connections are idle.
func (p *IdlePool[C]) Idle() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}

// expire closes the connections idle longer than IdleTimeout and sets
// the timer for the next one to expire.
func (p *IdlePool[C]) expire() {
	now := time.Now()
	p.mu.Lock()
	n := 0
	for n < len(p.idle) && now.Sub(p.idle[n].since) >= p.IdleTimeout {
		n++
	}
	stale := make([]C, n)
	for i := range n {
		stale[i] = p.idle[i].c
	}
	p.idle = append(p.idle[:0], p.idle[n:]...)
	switch {
	case p.closed:
	case len(p.idle) > 0:
		d := p.IdleTimeout - now.Sub(p.idle[0].since)
		if p.sweep == nil {
			// A Drain stopped the timer that ran this one.
			p.sweep = time.AfterFunc(d, p.expire)
		} else {
			p.sweep.Reset(d)
		}
	default:
		p.sweep = nil
	}
	p.mu.Unlock()
	for _, c := range stale {
		p.Drop(c)
	}
}

// Drain closes every idle connection: the server went away, and those
// it had are dead too.
func (p *IdlePool[C]) Drain() {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	if p.sweep != nil {
		p.sweep.Stop()
		p.sweep = nil
	}
	p.mu.Unlock()
	for _, ic := range idle {
		p.Drop(ic.c)
	}
}

// Close closes the idle connections, and those Put later.
func (p *IdlePool[C]) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.Drain()
}

// ClosedByPeer reports whether err, from a request on a connection taken
// from an IdlePool, says the server had closed the connection before the
// request reached it (EOF before any answer, a reset, a broken pipe): the
// request may go again once on a new connection when it is idempotent.
func ClosedByPeer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
