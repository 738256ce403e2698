package federation

import (
	"hash/maphash"
	"sync"
	"time"
)

// mdCache is the metadata cache: locate answers by logical path, bounded
// by entries, least recently used first out, split in shards so that the
// redirect path never takes a global lock. Expiry is per entry (a TTL for
// found, a shorter one for not-found).
type mdCache struct {
	seed     maphash.Seed
	perShard int
	shards   [cacheShards]cacheShard
}

const cacheShards = 64

type cacheShard struct {
	mu sync.Mutex // guards m and the list
	m  map[string]*cacheNode
	// head is the most recently used node; the list is circular through
	// a sentinel so that unlinking needs no nil checks.
	root cacheNode
}

type cacheNode struct {
	key        string
	e          *entry
	prev, next *cacheNode
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
// progress) is not an answer.
func (c *mdCache) get(key string, now int64) *entry {
	s := c.shard(key)
	s.mu.Lock()
	n := s.m[key]
	if n == nil {
		s.mu.Unlock()
		return nil
	}
	if now >= n.e.expires {
		s.unlinkLocked(n)
		delete(s.m, key)
		s.mu.Unlock()
		return nil
	}
	if n.e.pending {
		s.mu.Unlock()
		return nil
	}
	if s.root.next != n {
		s.unlinkLocked(n)
		s.pushFrontLocked(n)
	}
	s.mu.Unlock()
	return n.e
}

// put stores e under key, evicting the least recently used entry when the
// shard is full. A negative answer does not replace a live pending entry:
// a client told to PUT there may be writing right now.
func (c *mdCache) put(key string, e *entry, now int64) {
	s := c.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := s.m[key]; n != nil {
		if n.e.pending && e.negative && now < n.e.expires {
			return
		}
		n.e = e
		s.unlinkLocked(n)
		s.pushFrontLocked(n)
		return
	}
	if len(s.m) >= c.perShard {
		old := s.root.prev
		s.unlinkLocked(old)
		delete(s.m, old.key)
	}
	n := &cacheNode{key: key, e: e}
	s.m[key] = n
	s.pushFrontLocked(n)
}

// invalidate drops key and, for hold > 0, keeps a pending mark for that
// long so that a not-found found before the client's write lands is not
// cached.
func (c *mdCache) invalidate(key string, hold time.Duration) {
	now := time.Now().UnixNano()
	if hold > 0 {
		c.put(key, &entry{pending: true, expires: now + int64(hold)}, now)
		return
	}
	s := c.shard(key)
	s.mu.Lock()
	if n := s.m[key]; n != nil {
		s.unlinkLocked(n)
		delete(s.m, key)
	}
	s.mu.Unlock()
}

// len returns the number of entries (for tests and the API).
func (c *mdCache) len() int {
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	return n
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
