package federation

import (
	"io"
	"sync"
	"time"

	"github.com/lakefed/lakefed/internal/endpoint"
)

// An endpoint a reload removes still serves the requests that began with
// the snapshot holding it (Reload's promise), and holds connections
// until it is closed: a root:// endpoint keeps its session, a pool of
// idle connections and their goroutines. closeRemoved closes it once no
// request can use it any more: its metadata operations end within its
// timeout, and its streams (proxied reads, writes), which may last
// longer, are counted (member.streams) and waited for.

// inflight counts a member's streams in flight.
type inflight struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to 0; nil while nobody waits
}

func (c *inflight) begin() {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
}

func (c *inflight) end() {
	c.mu.Lock()
	c.n--
	if c.n == 0 && c.idle != nil {
		close(c.idle)
		c.idle = nil
	}
	c.mu.Unlock()
}

// drained is closed once no stream is in flight.
func (c *inflight) drained() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == 0 {
		done := make(chan struct{})
		close(done)
		return done
	}
	if c.idle == nil {
		c.idle = make(chan struct{})
	}
	return c.idle
}

// closeRemoved closes m's endpoint, which a reload took out of the
// federation, once its metadata operations begun before have timed out
// and its streams have ended; at once when the federator closes.
func (f *Federator) closeRemoved(m *member) {
	f.bg.Add(1)
	go func() {
		defer f.bg.Done()
		t := time.NewTimer(m.cfg.TimeoutOrDefault())
		select {
		case <-t.C:
			select {
			case <-m.streams.drained():
			case <-f.ctx.Done():
			}
		case <-f.ctx.Done():
			t.Stop()
		}
		closeEndpoint(m.ep)
	}()
}

// closeEndpoint lets go of what ep holds, for the kinds that hold
// something (io.Closer).
func closeEndpoint(ep endpoint.Endpoint) {
	if c, ok := ep.(io.Closer); ok {
		_ = c.Close()
	}
}
