package federation

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"sync"
	"time"
)

// Disagreement is one pair of replicas of a path found holding different
// bytes: different sizes at look-up, or different checksums when a
// proxied read looked for a replica to move to. The federator never mixes
// them in one answer; this record makes them visible (/api/disagreements
// and lakefed_federation_replica_disagreements_total) so that an operator
// can repair the stale copy.
type Disagreement struct {
	Time  time.Time `json:"time"`
	Path  string    `json:"path"` // logical path
	A     string    `json:"a"`    // endpoint names
	B     string    `json:"b"`
	Issue string    `json:"issue"` // what differs
}

// maxDisagreements bounds the records kept; the oldest go first.
const maxDisagreements = 100

// disagreements keeps the most recent Disagreements.
type disagreements struct {
	mu   sync.Mutex // guards ring and next
	ring []Disagreement
	next int
}

func (d *disagreements) add(x Disagreement) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.ring) < maxDisagreements {
		d.ring = append(d.ring, x)
		return
	}
	d.ring[d.next] = x
	d.next = (d.next + 1) % maxDisagreements
}

// list returns the records, newest first.
func (d *disagreements) list() []Disagreement {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]Disagreement, 0, len(d.ring))
	for i := range d.ring {
		j := (d.next - 1 - i + 2*len(d.ring)) % len(d.ring)
		out = append(out, d.ring[j])
	}
	return out
}

// disagree records that replicas a and b of one path differ: in this
// process, and, when state is shared, in Redis, where every federator of
// the lake reads them and a restart does not forget them.
func (f *Federator) disagree(p string, a, b *replica, issue string) {
	d := Disagreement{Time: time.Now().UTC(), Path: p, A: a.m.name, B: b.m.name, Issue: issue}
	f.m.disagreements.Inc()
	f.dis.add(d)
	f.log.Warn("replicas disagree", "path", p, "endpoint", a.m.name, "other", b.m.name, "issue", issue)
	if sh := f.opts.Shared; sh != nil {
		if js, err := json.Marshal(d); err == nil {
			ctx, cancel := context.WithTimeout(f.ctx, time.Second)
			_ = sh.Push(ctx, "disagreements", js, maxDisagreements)
			cancel()
		}
	}
}

// Disagreements returns the replica disagreements seen recently, newest
// first: those of every federator sharing state, else (or while Redis
// cannot be reached) this one's.
func (f *Federator) Disagreements() []Disagreement {
	if sh := f.opts.Shared; sh != nil {
		ctx, cancel := context.WithTimeout(f.ctx, time.Second)
		vals, err := sh.List(ctx, "disagreements")
		cancel()
		if err == nil {
			out := make([]Disagreement, 0, len(vals))
			for _, v := range vals {
				var d Disagreement
				if json.Unmarshal(v, &d) == nil {
					out = append(out, d)
				}
			}
			return out
		}
	}
	return f.dis.list()
}

// serveDisagreements answers /api/disagreements: the records of the
// paths Options.MayList lets the caller list.
func (f *Federator) serveDisagreements(w http.ResponseWriter, r *http.Request) {
	ds := f.Disagreements()
	if f.opts.MayList != nil {
		ds = slices.DeleteFunc(ds, func(d Disagreement) bool { return !f.opts.MayList(r, d.Path) })
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(ds)
}
