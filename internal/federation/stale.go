package federation

import (
	"sync"

	"github.com/lakefed/lakefed/internal/endpoint"
)

// staleSet remembers replicas a write through the federator made stale
// but could not delete (their endpoint failed between the look-up and
// the delete): the version each held then. Such a write answers 503, so
// no client was told it succeeded; until the client writes again, a
// look-up drops the replica while it still holds that version, so no
// reader of this process is served the old bytes beside the new. Once
// the replica changes (repaired, rewritten, deleted) it is forgotten.
// The marks live in memory only, which is why the write is not
// acknowledged: after a restart the replicas may disagree, and
// /api/disagreements shows them. (A write is refused before it starts
// when a replica's endpoint cannot be asked, or is read-only.)
type staleSet struct {
	mu sync.Mutex // guards m
	m  map[staleKey]endpoint.Info
}

type staleKey struct{ endpoint, path string }

// maxStale bounds the set; beyond it the oldest marks are not kept
// (an arbitrary one is dropped: the bound is a safety net, not a cache).
const maxStale = 100000

func (st *staleSet) mark(ep, p string, info endpoint.Info) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.m == nil {
		st.m = map[staleKey]endpoint.Info{}
	}
	if len(st.m) >= maxStale {
		for k := range st.m {
			delete(st.m, k)
			break
		}
	}
	st.m[staleKey{ep, p}] = info
}

// isStale reports whether the replica of p on ep, described by info,
// is a version a write replaced; a replica seen changed is forgotten.
func (st *staleSet) isStale(ep, p string, info endpoint.Info) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	old, ok := st.m[staleKey{ep, p}]
	if !ok {
		return false
	}
	if old.Size == info.Size && old.ETag == info.ETag && old.ModTime.Equal(info.ModTime) {
		return true
	}
	delete(st.m, staleKey{ep, p})
	return false
}

func (st *staleSet) empty() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.m) == 0
}
