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
// It is built for 10^8 entries in 20 GiB: 159 bytes an entry of a file
// on three sites at 10^6 entries (bench/cmd/entrybytes), where the
// entry kept whole took 1,272. An entry is kept packed (packed.go): one
// string of the path and 76 bytes, in a 24-byte slot of a slab, found
// through a map from the path's 64-bit hash (26 to 38 bytes an entry as
// its tables fill, where a map from the path to a list node took 46 and
// the node 48). A get of a packed entry unpacks it, and the shard keeps
// the entry it made, with its header values, while it is hot (up to
// the cache's hot bound, second chance again), so that a warm redirect allocates
// nothing. A look-up's own entry is not kept whole: a path read once (a
// scan, a job reading each of its files once) never pays for more than
// its packed form.
//
// Eviction is CLOCK (second chance), not strict LRU: a hit only sets the
// slot's referenced bit, atomically under the shard's read lock, so that
// hits on one shard do not serialise (moving an entry to the front on
// every hit took a tenth of the redirect handler's time). When the shard
// is full, put sweeps the slab from its hand: a referenced slot has its
// bit cleared and is passed, the first unreferenced one is evicted and
// takes the new entry, behind the hand, where a list would put it at
// the front.
type mdCache struct {
	seed     maphash.Seed
	perShard int
	hotMax   int // entries each shard keeps whole beyond the fat ones
	// members are what packed entries name by index (memberIdx): the
	// snapshot's, which never change for the cache's life.
	members   []*member
	memberIdx map[*member]int
	shards    [cacheShards]cacheShard
}

const cacheShards = 64

type cacheShard struct {
	// mu guards m, chunks (their slots' data and hot; the ref bits are
	// atomic, set under the read lock), n, free, hand, hot, hotHand, and
	// entry.rec and entry.pinned of the entries it holds.
	mu sync.RWMutex
	m  map[uint64]int32 // path hash → slot; a key collision is a miss
	// chunks hold the slots, n of them made so far; free are those that
	// hold nothing. The slab grows by chunks, which never move.
	chunks []*slotChunk
	n      int32
	free   []int32
	hand   int32 // the CLOCK hand: the next slot eviction looks at
	// hot is the ring of unpacked entries kept (hotRef), hotHand its
	// second-chance hand.
	hot     []hotRef
	hotHand int
	// gen counts the invalidations of the shard's keys. A look-up reads
	// it before it asks the endpoints and stores its answer only if no
	// invalidation came in between (putIf): an answer older than a write
	// must not be cached after the write dropped the path.
	gen atomic.Uint64
	// lost holds, by lostBucket of a key's hash, the latest expiry
	// (unix ns) of a pending mark that left the shard (evicted, or
	// replaced by an answer): pendingAfter counts it as still there, so
	// that losing a mark never lets an answer taken before the client's
	// write (a listing) be used while the mark would have refused it.
	// Keys share buckets: a loss may refuse a few other paths' answers
	// from a listing too, which then ask Stat.
	lost [lostBuckets]int64
}

// lostBuckets is the size of cacheShard.lost: 512 bytes a shard.
const lostBuckets = 64

// lostBucket is the bucket of cacheShard.lost of the key hashed to h
// (bits the shard index does not use).
func lostBucket(h uint64) int { return int(h / cacheShards % lostBuckets) }

// losePendingLocked records in lost that d, leaving its slot, was a
// pending mark of the key hashed to h; an expired one is recorded as
// harmlessly as it was kept (pendingAfter compares its expiry).
func (s *cacheShard) losePendingLocked(h uint64, d string) {
	if d != "" && packedFlags(d)&pkPending != 0 {
		b := &s.lost[lostBucket(h)]
		*b = max(*b, packedExpires(d))
	}
}

const chunkSlots = 256

type slotChunk struct {
	s   [chunkSlots]slot
	ref [chunkSlots / 32]atomic.Uint32 // hit since the hand last passed, a bit a slot
}

// slot is one entry of the cache.
type slot struct {
	data string // packed (packed.go); "" when free
	// hot is the entry unpacked from data and kept, or, when data is
	// pkFat, the entry itself; nil when data must be unpacked.
	hot *entry
}

// hotRef is an unpacked entry kept in slot i.
type hotRef struct {
	i int32
	e *entry
}

// newCache makes a cache of at most maxEntries whose packed entries
// name members by index (nil: every entry with replicas is kept whole),
// keeping up to hot of them unpacked while they are read (16,384 by
// default, 20 MB of entries of three replicas with their Link values:
// entrybytes -reads 2): beyond them a warm redirect unpacks its entry,
// 4 or 5 allocations and about 1 µs more (BenchmarkRedirectPacked),
// rather than answering from a kept one (none).
func newCache(maxEntries, hot int, members []*member) *mdCache {
	c := &mdCache{seed: maphash.MakeSeed(), perShard: max(1, (maxEntries+cacheShards-1)/cacheShards),
		members: members, memberIdx: make(map[*member]int, len(members))}
	c.hotMax = min(c.perShard, max(1, (hot+cacheShards-1)/cacheShards))
	for i, m := range members {
		c.memberIdx[m] = i
	}
	for i := range c.shards {
		c.shards[i].m = make(map[uint64]int32)
	}
	return c
}

func (c *mdCache) hash(key string) (uint64, *cacheShard) {
	h := maphash.String(c.seed, key)
	return h, &c.shards[h%cacheShards]
}

// shard is the shard of key (for tests).
func (c *mdCache) shard(key string) *cacheShard {
	_, s := c.hash(key)
	return s
}

func (s *cacheShard) slot(i int32) *slot { return &s.chunks[i/chunkSlots].s[i%chunkSlots] }

func (s *cacheShard) ref(i int32) (*atomic.Uint32, uint32) {
	return &s.chunks[i/chunkSlots].ref[i%chunkSlots/32], 1 << (i % 32)
}

// findLocked returns the slot holding key, or -1.
func (s *cacheShard) findLocked(h uint64, key string) int32 {
	i, ok := s.m[h]
	if !ok || packedKey(s.slot(i).data) != key {
		return -1
	}
	return i
}

// get returns the live entry for key, or nil. A pending entry (a write in
// progress) is not an answer. An expired entry stays until put replaces
// or evicts it.
func (c *mdCache) get(key string, now int64) *entry {
	h, s := c.hash(key)
	s.mu.RLock()
	i := s.findLocked(h, key)
	if i < 0 {
		s.mu.RUnlock()
		return nil
	}
	sl := s.slot(i)
	d, e := sl.data, sl.hot
	if now >= packedExpires(d) || packedFlags(d)&pkPending != 0 {
		s.mu.RUnlock()
		return nil
	}
	if w, bit := s.ref(i); w.Load()&bit == 0 {
		w.Or(bit)
	}
	s.mu.RUnlock()
	if e != nil {
		if !e.hotRef.Load() {
			e.hotRef.Store(true)
		}
		return e
	}
	if e = c.unpack(d); e == nil {
		return nil
	}
	return c.admit(s, i, d, e)
}

// admit keeps e, just unpacked from d, in slot i, unless the slot
// changed meanwhile or another get kept one first (which it returns).
func (c *mdCache) admit(s *cacheShard, i int32, d string, e *entry) *entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i >= s.n {
		return e
	}
	sl := s.slot(i)
	if sl.data != d {
		return e
	}
	if sl.hot != nil {
		return sl.hot
	}
	c.ownLocked(e, d)
	sl.hot = e
	s.hotPushLocked(c, i, e)
	return e
}

// ownLocked records that e is the entry of the packed d in c (keep).
func (c *mdCache) ownLocked(e *entry, d string) {
	if e.home.Load() == nil {
		e.rec = d
		e.home.Store(c)
	}
}

// hotPushLocked adds e, kept in slot i, to the ring of kept entries,
// dropping one not hit since the hand last passed when the ring is full.
// Entries that left their slot since are dropped first; pinned ones stay
// in their slot.
func (s *cacheShard) hotPushLocked(c *mdCache, i int32, e *entry) {
	if len(s.hot) < c.hotMax {
		s.hot = append(s.hot, hotRef{i, e})
		return
	}
	for range len(s.hot) + 1 {
		h := &s.hot[s.hotHand]
		s.hotHand = (s.hotHand + 1) % len(s.hot)
		live := h.i < s.n && s.slot(h.i).hot == h.e && !h.e.pinned
		if live && h.e.hotRef.Load() {
			h.e.hotRef.Store(false)
			continue
		}
		if live {
			s.slot(h.i).hot = nil
		}
		*h = hotRef{i, e}
		return
	}
}

// put stores e under key, evicting the least recently used entry when the
// shard is full. A negative answer does not replace a live pending entry:
// a client told to PUT there may be writing right now.
func (c *mdCache) put(key string, e *entry, now int64) {
	d, fat := c.pack(key, e)
	h, s := c.hash(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	c.putLocked(s, h, d, fat, e, now)
}

func (c *mdCache) putLocked(s *cacheShard, h uint64, d string, fat bool, e *entry, now int64) {
	if i, ok := s.m[h]; ok {
		old := s.slot(i).data
		if packedKey(old) == packedKey(d) && packedFlags(old)&pkPending != 0 && e.negative && now < packedExpires(old) {
			return
		}
		s.losePendingLocked(h, old)
		c.setLocked(s, i, d, fat, e)
		w, bit := s.ref(i)
		w.And(^bit)
		return
	}
	if len(s.m) >= c.perShard {
		s.evictLocked(c, now)
	}
	var i int32
	if len(s.free) > 0 {
		i = s.free[len(s.free)-1]
		s.free = s.free[:len(s.free)-1]
	} else {
		if s.n%chunkSlots == 0 {
			s.chunks = append(s.chunks, new(slotChunk))
		}
		i = s.n
		s.n++
	}
	s.m[h] = i
	c.setLocked(s, i, d, fat, e)
}

// setLocked makes slot i hold d, made from e.
func (c *mdCache) setLocked(s *cacheShard, i int32, d string, fat bool, e *entry) {
	sl := s.slot(i)
	sl.data, sl.hot = d, nil
	c.ownLocked(e, d)
	if fat {
		sl.hot, e.pinned = e, true
	}
}

// gen returns the invalidation count of key's shard, for putIf.
func (c *mdCache) gen(key string) uint64 { return c.shard(key).gen.Load() }

// shardIndex is the index of key's shard, for gensInto.
func (c *mdCache) shardIndex(key string) int {
	return int(maphash.String(c.seed, key) % cacheShards)
}

// gensInto reads the invalidation count of every shard into g: what an
// answer taken now for many paths at once (a listing) is checked
// against, path by path, when it is used.
func (c *mdCache) gensInto(g *[cacheShards]uint64) {
	for i := range c.shards {
		g[i] = c.shards[i].gen.Load()
	}
}

// pendingAfter reports whether key holds a pending mark (a client was
// sent to write it) that had not expired by since, or may have held one
// that left the cache (cacheShard.lost): an answer taken then may
// predate the client's write.
func (c *mdCache) pendingAfter(key string, since int64) bool {
	h, s := c.hash(key)
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.lost[lostBucket(h)] > since {
		return true
	}
	i := s.findLocked(h, key)
	if i < 0 {
		return false
	}
	d := s.slot(i).data
	return packedFlags(d)&pkPending != 0 && packedExpires(d) > since
}

// putIf is put, unless key's shard saw an invalidation since gen was
// read: then the answer may predate a write, and is not kept.
func (c *mdCache) putIf(key string, e *entry, now int64, gen uint64) {
	d, fat := c.pack(key, e)
	h, s := c.hash(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen.Load() == gen {
		c.putLocked(s, h, d, fat, e, now)
	}
}

// replace stores e under key only if key still holds old: a look-up
// finished in the background completes the entry it answered early
// with, and must not overwrite what a write or a newer look-up put since.
func (c *mdCache) replace(key string, old, e *entry) {
	d, fat := c.pack(key, e)
	h, s := c.hash(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := s.findLocked(h, key); i >= 0 && old.rec != "" && s.slot(i).data == old.rec {
		c.setLocked(s, i, d, fat, e)
	}
}

// keep makes the cache hold e itself in place of its packed form, for
// as long as it holds that form: e learned checksums after its look-up
// (entry.sums, replica.learn), which the packed form does not have.
func (c *mdCache) keep(e *entry) {
	key := packedKey(e.rec)
	h, s := c.hash(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := s.findLocked(h, key); i >= 0 && s.slot(i).data == e.rec {
		s.slot(i).hot, e.pinned = e, true
	}
}

// invalidate drops key and, for hold > 0, keeps a pending mark for that
// long so that a not-found found before the client's write lands is not
// cached.
func (c *mdCache) invalidate(key string, hold time.Duration) {
	now := time.Now().UnixNano()
	h, s := c.hash(key)
	var d string
	var e *entry
	if hold > 0 {
		e = &entry{pending: true, expires: now + int64(hold)}
		d, _ = c.pack(key, e)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gen.Add(1)
	if hold > 0 {
		c.putLocked(s, h, d, false, e, now)
		return
	}
	if i := s.findLocked(h, key); i >= 0 {
		s.dropLocked(c, i)
		s.free = append(s.free, i)
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
		s.chunks, s.n, s.free, s.hand = nil, 0, nil, 0
		s.hot, s.hotHand = nil, 0
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

// evictLocked frees one slot: the first from the hand that is expired
// or was not hit since the hand last passed (second chance); referenced
// slots met on the way lose their bit. Bounded: after one full turn
// every bit is clear.
func (s *cacheShard) evictLocked(c *mdCache, now int64) {
	for range 2*s.n + 1 {
		i := s.hand
		s.hand = (s.hand + 1) % s.n
		d := s.slot(i).data
		if d == "" {
			continue
		}
		if w, bit := s.ref(i); w.Load()&bit != 0 && now < packedExpires(d) {
			w.And(^bit)
			continue
		}
		s.dropLocked(c, i)
		s.free = append(s.free, i)
		return
	}
}

// dropLocked empties slot i.
func (s *cacheShard) dropLocked(c *mdCache, i int32) {
	sl := s.slot(i)
	h := maphash.String(c.seed, packedKey(sl.data))
	if s.m[h] == i {
		delete(s.m, h)
	}
	s.losePendingLocked(h, sl.data)
	sl.data, sl.hot = "", nil
	w, bit := s.ref(i)
	w.And(^bit)
}
