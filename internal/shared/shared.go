// Package shared is the state that several lakefed processes share
// through Redis (Redis 7, Debian's redis-server): the federators'
// membership, the invalidation of a written path in every process before
// the write is acknowledged, a second level of the metadata cache, the
// holds of write buffers on the files they have not yet carried to their
// targets (hold.go), and short leases that let one process do what would
// otherwise be done by all (a cold look-up, a health probe). Nothing
// home-made coordinates: every decision is a Redis command or a Lua
// script run by Redis.
//
//	c, err := shared.New(ctx, shared.Options{URL: "redis://127.0.0.1:6379/0",
//		OnInvalidate: func(paths []string) { fed.ForgetLocal(paths...) },
//		OnFlush:      fed.ForgetAll})
//	go c.Run(ctx)
//	err = c.Invalidate(ctx, "/atlas/f.root") // every live process has dropped it
//
// # Invalidation
//
// A write is seen everywhere before it is acknowledged. Invalidate
// deletes the path's second-level entry, bumps its version, publishes
// the path, and waits until every live member has acknowledged that it
// dropped the path from its own memory. A member that does not
// acknowledge within AckTimeout is expelled from the membership, and
// Invalidate then waits until that member's lease has run out: a member
// trusts its own memory only while it holds a lease (Trusted), so once
// the lease is out the expelled member serves nothing it learned before
// (it flushes, and joins again). Leases are kept on Redis's clock (the
// TIME command inside the scripts), and each member measures its own
// lease from before it asked for it, on its monotonic clock, so no two
// machines' clocks are compared.
//
// # Degraded
//
// When Redis cannot be reached, Degraded reports true and Invalidate
// fails with ErrDegraded: a writer must then refuse the write (or, when
// the operator chose so, go on alone). Reads go on: from each process's
// own memory while its lease lasts, then from the endpoints (Trusted), as
// the others may be writing without it. When Redis answers again, OnFlush
// is called before the process joins again, so nothing learned while
// apart outlives the partition.
package shared

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Schema is the version of every key and channel this package writes:
// processes of different schemas never read each other's entries.
const Schema = "lakefed:v1:"

// Defaults for zero Options fields.
const (
	DefaultLease      = 3 * time.Second
	DefaultAckTimeout = 500 * time.Millisecond
)

// ErrDegraded: Redis cannot be reached now, so what is shared cannot be
// promised.
var ErrDegraded = errors.New("shared: redis unreachable")

// Options configure a Client.
type Options struct {
	// URL is the Redis URL ("redis://127.0.0.1:6379/0"). Required.
	URL string
	// Node names this process among the members; it must be unique.
	// "": the host name, the pid and a random suffix.
	Node string
	// Lease is how long a member is trusted without renewing: it renews
	// every Lease/3, and an expelled or cut-off member stops trusting its
	// memory after at most Lease. Zero: DefaultLease.
	Lease time.Duration
	// AckTimeout is how long Invalidate waits for a member's
	// acknowledgement before expelling it. Zero: DefaultAckTimeout.
	AckTimeout time.Duration
	// OnInvalidate is called with the paths another member wrote; it
	// must drop them from this process's memory before it returns (the
	// writer is told only then). Nil: nothing is dropped.
	OnInvalidate func(paths []string)
	// OnFlush is called when this process may have missed invalidations
	// (Redis was unreachable, or the process was expelled or stalled):
	// it must drop everything learned from the endpoints. Nil: nothing.
	OnFlush func()
	// Log receives state changes. Nil: slog.Default().
	Log *slog.Logger
}

// Client is one process's handle on the shared state. Its methods may be
// called concurrently.
type Client struct {
	opts Options
	rdb  *redis.Client
	log  *slog.Logger
	node string

	degraded atomic.Bool
	// listening: the subscription to invalidations is in place; only
	// then does this process join the membership.
	listening atomic.Bool
	// validUntil is the monotonic deadline of this member's lease, as
	// time.Time (nil until the first successful join).
	validUntil atomic.Pointer[time.Time]
	seq        atomic.Uint64
	// runID is the run_id of the Redis server this client's newest
	// connection reached (onConnect): it changes with every restart of
	// the server, which a snapshot it reloads does not undo (StoreMeta).
	runID atomic.Pointer[string]

	mu      sync.Mutex // guards waiters
	waiters map[uint64]*ackWait

	flushMu sync.Mutex // serializes flush-and-join
	done    chan struct{}
}

type ackWait struct {
	mu      sync.Mutex
	pending map[string]bool
	all     chan struct{} // closed when pending is empty
}

// New connects to Redis. An unreachable Redis is not an error: the
// client starts degraded and Run keeps trying.
func New(ctx context.Context, opts Options) (*Client, error) {
	ro, err := redis.ParseURL(opts.URL)
	if err != nil {
		return nil, fmt.Errorf("shared: redis url %q: %w", opts.URL, err)
	}
	ro.DialTimeout = time.Second
	ro.ReadTimeout = time.Second
	ro.WriteTimeout = time.Second
	ro.MaxRetries = -1 // a failure is reported at once: the caller decides
	ro.PoolTimeout = time.Second
	if opts.Lease <= 0 {
		opts.Lease = DefaultLease
	}
	if opts.AckTimeout <= 0 {
		opts.AckTimeout = DefaultAckTimeout
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	node := opts.Node
	if node == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		node = host + "-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])
	}
	c := &Client{opts: opts, log: opts.Log.With("component", "shared", "node", node),
		node: node, waiters: map[uint64]*ackWait{}, done: make(chan struct{})}
	ro.OnConnect = c.onConnect
	c.rdb = redis.NewClient(ro)
	c.degraded.Store(true)
	return c, nil
}

// onConnect learns the server's run_id on every new connection, before
// the connection carries a command: a reply read on it is judged by the
// run_id of the server that sent it.
func (c *Client) onConnect(ctx context.Context, cn *redis.Conn) error {
	info, err := cn.Info(ctx, "server").Result()
	if err != nil {
		return err
	}
	for line := range strings.SplitSeq(info, "\n") {
		if id, ok := strings.CutPrefix(strings.TrimSpace(line), "run_id:"); ok {
			c.runID.Store(&id)
			return nil
		}
	}
	return fmt.Errorf("shared: redis INFO server has no run_id")
}

// server returns the run_id onConnect last learned, or "".
func (c *Client) server() string {
	if id := c.runID.Load(); id != nil {
		return *id
	}
	return ""
}

// Node is this member's name.
func (c *Client) Node() string { return c.node }

// Lease is how long a member is trusted without renewing: how long a
// process that died is still taken for a member.
func (c *Client) Lease() time.Duration { return c.opts.Lease }

// Degraded reports whether Redis could not be reached at the last try.
func (c *Client) Degraded() bool { return c.degraded.Load() }

// Trusted reports whether this process may serve what it remembers
// because no write can have been acknowledged without its knowing: it
// holds a lease. A writer waits out the lease of a member it cannot
// reach, so a process cut off from Redis (degraded) keeps trusting its
// memory until its lease runs out and not after: the others may be
// writing, their acknowledgements waiting only for this lease. It cannot
// tell Redis down for all (when nobody acknowledges a write) from itself
// cut off (when the others do), so it assumes the second. When the lease
// has run out it flushes first, once, and reports false until it joins
// again. That flush calls OnFlush in the caller's goroutine: a caller
// must not hold a lock that OnFlush takes.
func (c *Client) Trusted() bool {
	v := c.validUntil.Load()
	if v != nil && time.Now().Before(*v) {
		return true
	}
	if v != nil {
		c.flush("lease ran out")
	}
	return false
}

// Redis is the underlying client, for the roles' own keys (under Key).
func (c *Client) Redis() *redis.Client { return c.rdb }

// Key returns the schema-versioned key for the parts given.
func Key(parts ...string) string { return Schema + strings.Join(parts, ":") }

func (c *Client) flush(why string) {
	c.validUntil.Store(nil)
	c.log.Warn("dropping what this process learned", "why", why)
	if c.opts.OnFlush != nil {
		c.opts.OnFlush()
	}
}

// Close stops using Redis; it leaves the membership so that writers do
// not wait for this process.
func (c *Client) Close() error {
	select {
	case <-c.done:
	default:
		close(c.done)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c.rdb.ZRem(ctx, Key("members"), c.node)
	return c.rdb.Close()
}

// heartbeat renews this member's lease, on Redis's clock: it drops the
// members whose lease ran out, and answers -1 when this one is no longer
// a member although it must be (it was expelled).
var heartbeat = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if ARGV[3] == '1' and not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return -1
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
return now
`)

// expel removes members and answers how many milliseconds the longest
// of their leases has left (0 when none was a member).
var expel = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local left = 0
for i, m in ipairs(ARGV) do
  local exp = redis.call('ZSCORE', KEYS[1], m)
  if exp then
    redis.call('ZREM', KEYS[1], m)
    left = math.max(left, tonumber(exp) - now)
  end
end
return left
`)

// members lists the live members other than this one.
var liveMembers = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf')
`)

// Members lists the live members (this one too, when it is one): the
// processes every write waits for.
func (c *Client) Members(ctx context.Context) ([]string, error) {
	m, err := liveMembers.Run(ctx, c.rdb, []string{Key("members")}).StringSlice()
	if err != nil {
		return nil, c.unreachable(err)
	}
	return m, nil
}

// Run keeps the membership and the subscriptions until ctx ends.
func (c *Client) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { c.subscribe(ctx) })
	c.beat(ctx)
	wg.Wait()
}

// beat renews the lease every Lease/3 and notices Redis going and
// coming back.
func (c *Client) beat(ctx context.Context) {
	t := time.NewTicker(c.opts.Lease / 3)
	defer t.Stop()
	for {
		c.renew(ctx)
		select {
		case <-ctx.Done():
			return
		case <-c.done:
			return
		case <-t.C:
		}
	}
}

func (c *Client) renew(ctx context.Context) {
	c.flushMu.Lock()
	defer c.flushMu.Unlock()
	if !c.listening.Load() {
		// Not a member until it hears invalidations; whether Redis
		// answers is still worth knowing (Degraded).
		rctx, cancel := context.WithTimeout(ctx, c.opts.Lease/3)
		err := c.rdb.Ping(rctx).Err()
		cancel()
		if err != nil {
			c.down(err)
		} else if c.degraded.Swap(false) {
			c.flush("redis reachable again")
		}
		return
	}
	must := "1"
	if c.validUntil.Load() == nil {
		must = "0" // joining
	}
	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, c.opts.Lease/3)
	n, err := heartbeat.Run(rctx, c.rdb, []string{Key("members")}, c.node, c.opts.Lease.Milliseconds(), must).Int64()
	cancel()
	switch {
	case err != nil:
		c.down(err)
		return
	case c.degraded.Load():
		// Back: whatever was learned while apart may be stale.
		c.flush("redis reachable again")
		c.degraded.Store(false)
		c.log.Info("redis reachable: sharing again")
		c.renewLocked(ctx)
		return
	case n < 0:
		c.flush("expelled by a writer that did not hear from this process")
		c.renewLocked(ctx)
		return
	}
	until := start.Add(c.opts.Lease)
	c.validUntil.Store(&until)
}

// renewLocked joins again after a flush.
func (c *Client) renewLocked(ctx context.Context) {
	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, c.opts.Lease/3)
	defer cancel()
	if _, err := heartbeat.Run(rctx, c.rdb, []string{Key("members")}, c.node, c.opts.Lease.Milliseconds(), "0").Int64(); err != nil {
		c.down(err)
		return
	}
	until := start.Add(c.opts.Lease)
	c.validUntil.Store(&until)
}

// subscribe listens for invalidations and for the acknowledgements of
// this member's own. A member is one only while it listens: when the
// subscription breaks (Redis restarted, the connection dropped), it may
// have missed invalidations, so it flushes and leaves the membership
// (writers do not wait for it), and joins again once it listens again.
func (c *Client) subscribe(ctx context.Context) {
	ps := c.rdb.Subscribe(ctx, Key("inval"), Key("ack", c.node))
	defer ps.Close()
	go func() {
		select {
		case <-ctx.Done():
		case <-c.done:
		}
		ps.Close() // ends a Receive in progress
	}()
	for {
		msg, err := ps.Receive(ctx)
		if err != nil {
			select {
			case <-ctx.Done():
				return
			case <-c.done:
				return
			default:
			}
			if c.listening.Swap(false) {
				c.leave("the subscription broke: " + err.Error())
			}
			t := time.NewTimer(c.opts.Lease / 10)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-c.done:
				t.Stop()
				return
			case <-t.C:
			}
			continue
		}
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" && m.Count == 2 {
				c.listening.Store(true)
			}
		case *redis.Message:
			if m.Channel == Key("inval") {
				c.onInval(ctx, m.Payload)
			} else {
				c.onAck(m.Payload)
			}
		}
	}
}

// leave flushes and leaves the membership: this process may have missed
// invalidations.
func (c *Client) leave(why string) {
	c.flushMu.Lock()
	defer c.flushMu.Unlock()
	c.flush(why)
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.Lease/3)
	defer cancel()
	c.rdb.ZRem(ctx, Key("members"), c.node)
}

// An invalidation's payload is "node seq\npath\npath...".
func (c *Client) onInval(ctx context.Context, payload string) {
	head, rest, _ := strings.Cut(payload, "\n")
	from, seq, _ := strings.Cut(head, " ")
	if from == c.node {
		return
	}
	if c.opts.OnInvalidate != nil && rest != "" {
		c.opts.OnInvalidate(strings.Split(rest, "\n"))
	}
	actx, cancel := context.WithTimeout(ctx, c.opts.AckTimeout)
	c.rdb.Publish(actx, Key("ack", from), seq+" "+c.node)
	cancel()
}

func (c *Client) onAck(payload string) {
	seqS, from, _ := strings.Cut(payload, " ")
	seq, err := strconv.ParseUint(seqS, 10, 64)
	if err != nil {
		return
	}
	c.mu.Lock()
	w := c.waiters[seq]
	c.mu.Unlock()
	if w == nil {
		return
	}
	w.mu.Lock()
	if w.pending[from] {
		delete(w.pending, from)
		if len(w.pending) == 0 {
			close(w.all)
		}
	}
	w.mu.Unlock()
}

// Invalidate makes paths unknown to every process sharing this Redis
// before it returns nil: their second-level entries are deleted, their
// versions and their directories' bumped (a look-up that started
// before, or answered from a listing taken before, cannot store its
// answer: StoreMeta, StoreMetaListed), and every live member has
// dropped them from its memory or has been expelled and its lease has
// run out. ErrDegraded when Redis cannot be reached: the caller must not
// acknowledge a write as seen everywhere.
func (c *Client) Invalidate(ctx context.Context, paths ...string) error {
	if len(paths) == 0 {
		return nil
	}
	if c.degraded.Load() {
		return ErrDegraded
	}
	seq := c.seq.Add(1)
	w := &ackWait{pending: map[string]bool{}, all: make(chan struct{})}
	c.mu.Lock()
	c.waiters[seq] = w
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.waiters, seq)
		c.mu.Unlock()
	}()
	pipe := c.rdb.TxPipeline()
	for _, p := range paths {
		pipe.Del(ctx, Key("md", p))
		pipe.Incr(ctx, Key("ver", p))
		pipe.PExpire(ctx, Key("ver", p), versionTTL)
		// An answer from a listing of p's directory taken before this
		// write must not be stored either (StoreMetaListed).
		pipe.Incr(ctx, Key("dver", path.Dir(p)))
		pipe.PExpire(ctx, Key("dver", path.Dir(p)), versionTTL)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return c.unreachable(err)
	}
	names, err := liveMembers.Run(ctx, c.rdb, []string{Key("members")}).StringSlice()
	if err != nil {
		return c.unreachable(err)
	}
	w.mu.Lock()
	for _, m := range names {
		if m != c.node {
			w.pending[m] = true
		}
	}
	if len(w.pending) == 0 {
		close(w.all)
	}
	w.mu.Unlock()
	payload := c.node + " " + strconv.FormatUint(seq, 10) + "\n" + strings.Join(paths, "\n")
	if err := c.rdb.Publish(ctx, Key("inval"), payload).Err(); err != nil {
		return c.unreachable(err)
	}
	t := time.NewTimer(c.opts.AckTimeout)
	defer t.Stop()
	select {
	case <-w.all:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
	}
	w.mu.Lock()
	var late []string
	for m := range w.pending {
		late = append(late, m)
	}
	w.mu.Unlock()
	if len(late) == 0 {
		return nil
	}
	left, err := expel.Run(ctx, c.rdb, []string{Key("members")}, toAny(late)...).Int64()
	if err != nil {
		return c.unreachable(err)
	}
	c.log.Warn("members did not acknowledge an invalidation: expelled, waiting out their leases",
		"members", strings.Join(late, ","), "wait", time.Duration(left)*time.Millisecond)
	if left > 0 {
		lt := time.NewTimer(time.Duration(left) * time.Millisecond)
		defer lt.Stop()
		select {
		case <-lt.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (c *Client) unreachable(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) && !isNet(err) {
		return err
	}
	c.down(err)
	return fmt.Errorf("%w: %w", ErrDegraded, err)
}

// down records that Redis could not be reached, and says so when it
// could until now: whichever command notices first (a heartbeat, a
// write's invalidation, a look-up) logs it, once.
func (c *Client) down(err error) {
	if !c.degraded.Swap(true) {
		c.log.Warn("redis unreachable: degraded, serving from this process's own state", "err", err)
	}
}

func isNet(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne)
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
