package federation

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
)

// mdCache is the metadata cache: locate answers by logical path, bounded
// by entries, split in shards so that the redirect path never takes a
// global lock. Expiry is per entry (a TTL for found, a shorter one for
// not-found).
//
// Eviction is CLOCK (second chance), not strict LRU: a hit only sets the
// node's referenced bit, atomically under the shard's read lock, so that
// hits on one shard do not serialise (moving the node to the front on
// every hit took a tenth of the redirect handler's time). When the shard
// is full, put walks from the oldest end: a referenced node has its bit
// cleared and goes to the front, the first unreferenced one is evicted.
type mdCache struct {
	seed     maphash.Seed
	perShard int
	shards   [cacheShards]cacheShard
}

const cacheShards = 64

type cacheShard struct {
	mu sync.RWMutex // guards m, the list and cacheNode.e (read under RLock by get)
	m  map[string]*cacheNode
	// gen counts the invalidations of the shard's keys. A look-up reads
	// it before it asks the endpoints and stores its answer only if no
	// invalidation came in between (putIf): an answer older than a write
	// must not be cached after the write dropped the path.
	gen atomic.Uint64
	// head is the most recently used node; the list is circular through
	// a sentinel so that unlinking needs no nil checks.
	root cacheNode
}

type cacheNode struct {
	key        string
	e          *entry
	prev, next *cacheNode
	ref        atomic.Bool // hit since the clock hand last passed
}

func newCache(maxEntries int) *mdCache {
	c := &mdCache{seed: maphash.MakeSeed(), perShard: max(1, (maxEntries+cacheShards-1)/cacheShards)}
	for i := range c.shards {
		s := &c.shards[i]
		s.m = make(map[string]*cacheNode)
		s.root.next, s.root.prev = &s.root, &s.root
	}
	return c
}

func (c *mdCache) shard(key string) *cacheShard {
	return &c.shards[maphash.String(c.seed, key)%cacheShards]
}

// get returns the live entry for key, or nil. A pending entry (a write in
// progress) is not an answer. An expired entry stays until put replaces
// or evicts it.
func (c *mdCache) get(key string, now int64) *entry {
	s := c.shard(key)
	s.mu.RLock()
	n := s.m[key]
	if n == nil {
		s.mu.RUnlock()
		return nil
	}
	e := n.e
	if now >= e.expires || e.pending {
		s.mu.RUnlock()
		return nil
	}
	if !n.ref.Load() {
		n.ref.Store(true)
	}
	s.mu.RUnlock()
	return e
}

// put stores e under key, evicting the least recently used entry when the
// shard is full. A negative answer does not replace a live pending entry:
// a client told to PUT there may be writing right now.
func (c *mdCache) put(key string, e *entry, now int64) {
	s := c.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	c.putLocked(s, key, e, now)
}

func (c *mdCache) putLocked(s *cacheShard, key string, e *entry, now int64) {
	if n := s.m[key]; n != nil {
		if n.e.pending && e.negative && now < n.e.expires {
			return
		}
		n.e = e
		n.ref.Store(false)
		s.unlinkLocked(n)
		s.pushFrontLocked(n)
		return
	}
	if len(s.m) >= c.perShard {
		s.evictLocked(now)
	}
	n := &cacheNode{key: key, e: e}
	s.m[key] = n
	s.pushFrontLocked(n)
}

// gen returns the invalidation count of key's shard, for putIf.
func (c *mdCache) gen(key string) uint64 { return c.shard(key).gen.Load() }

// putIf is put, unless key's shard saw an invalidation since gen was
// read: then the answer may predate a write, and is not kept.
func (c *mdCache) putIf(key string, e *entry, now int64, gen uint64) {
	s := c.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen.Load() == gen {
		c.putLocked(s, key, e, now)
	}
}

// replace stores e under key only if key still holds old: a look-up
// finished in the background completes the entry it answered early
// with, and must not overwrite what a write or a newer look-up put since.
func (c *mdCache) replace(key string, old, e *entry) {
	s := c.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := s.m[key]; n != nil && n.e == old {
		n.e = e
	}
}

// invalidate drops key and, for hold > 0, keeps a pending mark for that
// long so that a not-found found before the client's write lands is not
// cached.
func (c *mdCache) invalidate(key string, hold time.Duration) {
	now := time.Now().UnixNano()
	s := c.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gen.Add(1)
	if hold > 0 {
		c.putLocked(s, key, &entry{pending: true, expires: now + int64(hold)}, now)
		return
	}
	if n := s.m[key]; n != nil {
		s.unlinkLocked(n)
		delete(s.m, key)
	}
}

// clear drops every entry, and counts an invalidation on every shard
// (look-ups in flight do not store their answers).
func (c *mdCache) clear() {
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		s.gen.Add(1)
		clear(s.m)
		s.root.next, s.root.prev = &s.root, &s.root
		s.mu.Unlock()
	}
}

// len returns the number of entries (for tests and the API).
func (c *mdCache) len() int {
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.RLock()
		n += len(s.m)
		s.mu.RUnlock()
	}
	return n
}

// evictLocked drops one node: the oldest that is expired or was not hit
// since the hand last passed (second chance); referenced nodes met on the
// way lose their bit and go to the front. Bounded: after one full turn
// every bit is clear, so the oldest goes.
func (s *cacheShard) evictLocked(now int64) {
	for range len(s.m) {
		old := s.root.prev
		if old.ref.Load() && now < old.e.expires {
			old.ref.Store(false)
			s.unlinkLocked(old)
			s.pushFrontLocked(old)
			continue
		}
		s.unlinkLocked(old)
		delete(s.m, old.key)
		return
	}
	old := s.root.prev
	s.unlinkLocked(old)
	delete(s.m, old.key)
}

func (s *cacheShard) unlinkLocked(n *cacheNode) {
	n.prev.next, n.next.prev = n.next, n.prev
	n.prev, n.next = nil, nil
}

func (s *cacheShard) pushFrontLocked(n *cacheNode) {
	n.prev, n.next = &s.root, s.root.next
	s.root.next.prev = n
	s.root.next = n
}
