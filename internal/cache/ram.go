package cache

import (
	"container/list"
	"sync"
)

// ramCache keeps recently read blocks in memory, already checked against
// their CRC-32C, so a hot block costs neither a disk read nor a check.
// It is keyed by epoch: a block of a dropped version is never found.
type ramCache struct {
	mu    sync.Mutex // guards what follows
	max   int64
	size  int64
	lru   *list.List // of *ramBlock, most recent first
	index map[ramKey]*list.Element
}

type ramKey struct {
	file  string
	epoch uint64
	block int64
}

type ramBlock struct {
	key ramKey
	b   []byte
}

func newRAMCache(max int64) *ramCache {
	return &ramCache{max: max, lru: list.New(), index: map[ramKey]*list.Element{}}
}

// get returns the block, or nil. The slice must not be changed.
func (r *ramCache) get(file string, epoch uint64, block int64) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.index[ramKey{file, epoch, block}]
	if e == nil {
		return nil
	}
	r.lru.MoveToFront(e)
	return e.Value.(*ramBlock).b
}

// put keeps a copy of b.
func (r *ramCache) put(file string, epoch uint64, block int64, b []byte) {
	if int64(len(b)) > r.max/4 {
		return
	}
	k := ramKey{file, epoch, block}
	cp := append([]byte(nil), b...)
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.index[k]; e != nil {
		r.lru.MoveToFront(e)
		return
	}
	r.index[k] = r.lru.PushFront(&ramBlock{key: k, b: cp})
	r.size += int64(len(cp))
	for r.size > r.max {
		e := r.lru.Back()
		rb := e.Value.(*ramBlock)
		r.lru.Remove(e)
		delete(r.index, rb.key)
		r.size -= int64(len(rb.b))
	}
}

// forget drops a block (found corrupt on disk).
func (r *ramCache) forget(file string, epoch uint64, block int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := ramKey{file, epoch, block}
	if e := r.index[k]; e != nil {
		r.lru.Remove(e)
		delete(r.index, k)
		r.size -= int64(len(e.Value.(*ramBlock).b))
	}
}
