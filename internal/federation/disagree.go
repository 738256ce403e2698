package federation

import (
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

// disagree records that replicas a and b of one path differ.
func (f *Federator) disagree(p string, a, b *replica, issue string) {
	f.m.disagreements.Inc()
	f.dis.add(Disagreement{Time: time.Now().UTC(), Path: p, A: a.m.name, B: b.m.name, Issue: issue})
	f.log.Warn("replicas disagree", "path", p, "endpoint", a.m.name, "other", b.m.name, "issue", issue)
}

// Disagreements returns the replica disagreements seen recently, newest
// first.
func (f *Federator) Disagreements() []Disagreement { return f.dis.list() }

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
