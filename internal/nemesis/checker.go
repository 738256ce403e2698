package nemesis

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// The model the checker holds the lake to, per path (Jepsen's, for a
// register whose values are the versions written and "absent"):
//
//   - Every write (Put, XPut, Delete, Diverge) has an interval, from
//     its start to its answer. One that was acknowledged (OK) took effect
//     at some instant inside its interval; one that was not may have
//     taken effect at any instant after its start, even after its answer
//     (a timeout, a copy landing late), or never. A Diverge (the nemesis
//     writing a site's directory) is done by its end but replaces
//     nothing, since the lake was not told of it. The state before any
//     write is "absent", as if written by an acknowledged delete that
//     ended before the run.
//   - Write A is before write B when A was acknowledged and A's interval
//     ended before B's began; writes whose intervals overlap may be
//     ordered either way.
//   - A read that started after write W was acknowledged must see W or a
//     write that may be after it: a value v (a version, or absent) is
//     legal for read R when some write c of v started before R ended and
//     no acknowledged write w (other than c) is both after c and ended
//     before R started. A final read (after every fault healed) failing
//     this is a lost write; a read during the run, a stale read (or a
//     false not-found when it said absent).
//   - A read returns the bytes of one write: bytes no write produced are
//     a violation, and so are bytes of two versions in one answer.
//   - Through one node, reads do not go back: once a read through node N
//     returned version v, a read through N that started after that one
//     ended must not return a value all of whose writes are before v's
//     write (even when v's write was never acknowledged, so the global
//     rule allows the older value). A version the nemesis wrote behind
//     the lake's back binds no node this way.
//   - Every failure is of a declared kind, and no answer takes longer
//     than the declared bound; but a request to a node the nemesis cut
//     off (a Partition fault whose interval overlaps the request's) may
//     wait for the client's own timeout: the clients are cut off from
//     it too, and nothing can answer across the cut.
//   - After every fault healed, reads are answered (a final read that
//     keeps failing hides what the lake holds).
//   - At the end no role leaves files that nothing holds (Inspect).
//
// Check is a pure function of the history.

// Limits are the declared kinds of failure and the bound on answers.
type Limits struct {
	// ErrKinds are the failure kinds allowed (Op.ErrKind).
	ErrKinds []string
	// MaxLatency bounds every workload answer, failures included.
	MaxLatency time.Duration
}

// The kinds of violation.
const (
	LostWrite      = "lost-write"
	StaleRead      = "stale-read"
	FalseNotFound  = "false-not-found"
	UnknownBytes   = "unknown-bytes"
	MixedRead      = "mixed-read"
	FutureRead     = "future-read"
	NonMonotonic   = "non-monotonic"
	UndeclaredErr  = "undeclared-error"
	TooSlow        = "too-slow"
	OrphanLeftover = "orphan"
	Unreadable     = "unreadable-at-end"
)

// Violation is one answer the model does not allow.
type Violation struct {
	Kind   string `json:"kind"`
	Op     int    `json:"op"` // the operation that shows it
	Node   string `json:"node,omitempty"`
	Path   string `json:"path,omitempty"`
	Detail string `json:"detail"`
	// Related are the other operations involved (the writes it should
	// have seen, the earlier read).
	Related []int `json:"related,omitempty"`
}

func (v Violation) String() string {
	return fmt.Sprintf("%s op %d %s %s: %s %v", v.Kind, v.Op, v.Node, v.Path, v.Detail, v.Related)
}

// write is one write of a path as the checker sees it.
type write struct {
	id         int // -1: the state before the run
	version    int // 0 for a tombstone
	tomb       bool
	diverge    bool  // written by the nemesis behind the lake's back
	start, end int64 // end: math.MaxInt64 when not acknowledged
	ok         bool
}

// pathWrites are a path's writes, with the initial absent state.
type pathWrites struct {
	all       []write
	byVersion map[int]*write
}

func (pw *pathWrites) candidates(r *Op) []*write {
	var out []*write
	if r.Absent {
		for i := range pw.all {
			if pw.all[i].tomb {
				out = append(out, &pw.all[i])
			}
		}
		return out
	}
	for _, v := range r.Versions {
		if w := pw.byVersion[v]; w != nil {
			out = append(out, w)
		}
	}
	return out
}

// superseded reports whether an acknowledged write after c ended before
// the read r started, and returns it.
func (pw *pathWrites) superseded(c *write, r *Op) *write {
	for i := range pw.all {
		w := &pw.all[i]
		if w != c && w.ok && c.end < w.start && w.end < r.Start {
			return w
		}
	}
	return nil
}

// mustSee are the acknowledged writes a read starting after them must
// see one of (those no later acknowledged write replaced before r).
func (pw *pathWrites) mustSee(r *Op) []int {
	var out []int
	for i := range pw.all {
		w := &pw.all[i]
		if w.ok && w.end < r.Start && w.id >= 0 && pw.superseded(w, r) == nil {
			out = append(out, w.id)
		}
	}
	return out
}

// Check returns every violation of the model in the history.
func Check(ops []Op, lim Limits) []Violation {
	var out []Violation
	declared := map[string]bool{}
	for _, k := range lim.ErrKinds {
		declared[k] = true
	}
	writes := collectWrites(ops)
	cuts := partitions(ops)
	legal := make([]bool, len(ops))
	for i := range ops {
		op := &ops[i]
		if !cuts.across(op) {
			out = append(out, checkAnswer(op, declared, lim.MaxLatency, cuts.overlap(op))...)
		}
		if op.Kind == Inspect && len(op.Leftovers) > 0 {
			out = append(out, Violation{Kind: OrphanLeftover, Op: op.ID, Node: op.Node,
				Detail: fmt.Sprintf("%d files nothing holds: %s", len(op.Leftovers), strings.Join(first(op.Leftovers, 5), ", "))})
		}
		if op.Final && !op.OK {
			out = append(out, Violation{Kind: Unreadable, Op: op.ID, Node: op.Node, Path: op.Path,
				Detail: fmt.Sprintf("a final %s, after every fault healed, still failed: %s %s", op.Kind, op.ErrKind, op.Err)})
		}
		if !readValue(op) {
			continue
		}
		v, ok := checkRead(op, writes[op.Path])
		legal[i] = ok
		if !ok {
			out = append(out, v)
		}
	}
	out = append(out, checkMonotonic(ops, writes, legal)...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Op < out[j].Op })
	return out
}

// readValue reports whether op is a read that got a value to check: a
// delete answered "not found" reads absent too.
func readValue(op *Op) bool {
	return op.OK && (op.Kind.IsRead() || (op.Kind == Delete && op.Absent))
}

func collectWrites(ops []Op) map[string]*pathWrites {
	writes := map[string]*pathWrites{}
	get := func(p string) *pathWrites {
		pw := writes[p]
		if pw == nil {
			pw = &pathWrites{all: []write{{id: -1, tomb: true, start: never, end: never, ok: true}}}
			writes[p] = pw
		}
		return pw
	}
	for i := range ops {
		op := &ops[i]
		if op.Kind.IsRead() && op.Path != "" {
			get(op.Path)
		}
		if !op.Kind.IsWrite() {
			continue
		}
		w := write{id: op.ID, version: op.Version, tomb: op.Kind == Delete, diverge: op.Kind == Diverge,
			start: op.Start, end: op.End, ok: op.OK}
		switch {
		case op.Kind == Diverge:
			// Written and done by its end, but behind the lake's back:
			// the lake may go on serving what it knew, so it replaces
			// nothing (it is never "acknowledged").
			w.ok = false
		case !w.ok:
			w.end = math.MaxInt64
		}
		get(op.Path).all = append(get(op.Path).all, w)
	}
	for _, pw := range writes {
		pw.byVersion = map[int]*write{}
		for i := range pw.all {
			if !pw.all[i].tomb {
				pw.byVersion[pw.all[i].version] = &pw.all[i]
			}
		}
	}
	return writes
}

// cut is a time a node was cut off by a partition.
type cut struct {
	node       string
	start, end int64
}

type cuts []cut

// partitions are the partitions of the history.
func partitions(ops []Op) cuts {
	var out cuts
	for _, op := range ops {
		if op.Kind == FaultOp && op.Fault == "partition" {
			out = append(out, cut{op.Target, op.Start, op.End})
		}
	}
	return out
}

// across reports whether op asked a node while it was cut off, and
// timed out or answered late.
func (cs cuts) across(op *Op) bool {
	for _, c := range cs {
		if c.node == op.Node && op.Start < c.end && c.start < op.End && (op.ErrKind == "timeout" || op.OK) {
			return true
		}
	}
	return false
}

// overlap is how long op's node was cut off while op ran: no server
// answers through a link that is down, and TCP, which backs off while
// it is, is slow to notice it is up again.
func (cs cuts) overlap(op *Op) time.Duration {
	var d int64
	for _, c := range cs {
		if c.node == op.Node {
			d += max(0, min(op.End, c.end)-max(op.Start, c.start))
		}
	}
	return time.Duration(d)
}

// checkAnswer holds any workload answer to the declared failures and
// the bound, which the time its node was cut off while it ran (cut)
// does not count against.
func checkAnswer(op *Op, declared map[string]bool, bound, cut time.Duration) []Violation {
	if op.Client < 0 || op.Kind == FaultOp || op.Kind == Inspect {
		return nil
	}
	var out []Violation
	if !op.OK && !declared[op.ErrKind] {
		out = append(out, Violation{Kind: UndeclaredErr, Op: op.ID, Node: op.Node, Path: op.Path,
			Detail: fmt.Sprintf("%s answered %q (%d %s)", op.Kind, op.ErrKind, op.Status, op.Err)})
	}
	if took := time.Duration(op.End - op.Start); bound > 0 && took-cut > bound {
		detail := fmt.Sprintf("%s took %v, bound %v", op.Kind, took.Round(time.Millisecond), bound)
		if cut > 0 {
			detail += fmt.Sprintf(" (%v of it with its node cut off, not counted)", cut.Round(time.Millisecond))
		}
		out = append(out, Violation{Kind: TooSlow, Op: op.ID, Node: op.Node, Path: op.Path, Detail: detail})
	}
	return out
}

// checkRead checks one read's value against the path's writes.
func checkRead(r *Op, pw *pathWrites) (Violation, bool) {
	v := Violation{Op: r.ID, Node: r.Node, Path: r.Path}
	switch {
	case r.Mixed:
		v.Kind, v.Detail = MixedRead, fmt.Sprintf("%s returned bytes of versions %v in one answer", r.Kind, r.Versions)
		return v, false
	case r.Unknown || (!r.Absent && len(r.Versions) == 0):
		v.Kind, v.Detail = UnknownBytes, fmt.Sprintf("%s returned %d bytes no write produced", r.Kind, r.Size)
		return v, false
	}
	cands := pw.candidates(r)
	if len(cands) == 0 {
		v.Kind, v.Detail = UnknownBytes, fmt.Sprintf("%s returned version(s) %v, which no write of the path produced", r.Kind, r.Versions)
		return v, false
	}
	started := false
	for _, c := range cands {
		if c.start >= r.End {
			continue
		}
		started = true
		if pw.superseded(c, r) == nil {
			return v, true
		}
	}
	if !started {
		v.Kind, v.Detail = FutureRead, fmt.Sprintf("%s returned version(s) %v, written only after it answered", r.Kind, r.Versions)
		return v, false
	}
	v.Related = pw.mustSee(r)
	what := fmt.Sprintf("version(s) %v", r.Versions)
	if r.Absent {
		what = "not found"
	}
	switch {
	case r.Final:
		v.Kind = LostWrite
	case r.Absent:
		v.Kind = FalseNotFound
	default:
		v.Kind = StaleRead
	}
	v.Detail = fmt.Sprintf("%s returned %s after acknowledged writes %s replaced it", r.Kind, what, describe(pw, v.Related))
	return v, false
}

// describe names writes by op and version.
func describe(pw *pathWrites, ids []int) string {
	var parts []string
	for _, id := range ids {
		for _, w := range pw.all {
			if w.id == id {
				if w.tomb {
					parts = append(parts, fmt.Sprintf("op %d (delete)", id))
				} else {
					parts = append(parts, fmt.Sprintf("op %d (version %d)", id, w.version))
				}
			}
		}
	}
	return strings.Join(parts, ", ")
}

// checkMonotonic finds reads through one node that went back: legal
// reads (the global rule already reported the others) whose every
// write is before the write of a version an earlier read through that
// node returned.
func checkMonotonic(ops []Op, writes map[string]*pathWrites, legal []bool) []Violation {
	type key struct{ node, path string }
	seen := map[key][]*Op{}
	for i := range ops {
		if legal[i] && !ops[i].Mixed {
			k := key{ops[i].Node, ops[i].Path}
			seen[k] = append(seen[k], &ops[i])
		}
	}
	var out []Violation
	for _, reads := range seen {
		pw := writes[reads[0].Path]
		for _, r2 := range reads {
			cands := pw.candidates(r2)
			for _, r1 := range reads {
				if r1.End >= r2.Start || r1.Absent || len(r1.Versions) != 1 {
					continue
				}
				w1 := pw.byVersion[r1.Versions[0]]
				// A divergence binds no node: the lake was not told of it,
				// and may go on serving the replicas it knew.
				if w1 == nil || w1.diverge || !allBefore(cands, w1) {
					continue
				}
				what := fmt.Sprintf("version(s) %v", r2.Versions)
				if r2.Absent {
					what = "not found"
				}
				out = append(out, Violation{Kind: NonMonotonic, Op: r2.ID, Node: r2.Node, Path: r2.Path, Related: []int{r1.ID},
					Detail: fmt.Sprintf("%s returned %s, older than version %d an earlier read through the same node returned", r2.Kind, what, r1.Versions[0])})
				break
			}
		}
	}
	return out
}

// allBefore reports whether every write in cands is before w.
func allBefore(cands []*write, w *write) bool {
	for _, c := range cands {
		if c == w || !c.ok || c.end >= w.start {
			return false
		}
	}
	return len(cands) > 0
}

func first[T any](s []T, n int) []T { return s[:min(n, len(s))] }
