package nemesis

import (
	"math/rand/v2"
	"sort"
	"time"
)

// FaultKind is a kind of fault the nemesis makes.
type FaultKind string

// The kinds of fault.
const (
	// Kill is kill -9 of a process, restarted when healed.
	Kill FaultKind = "kill"
	// Pause is kill -STOP of a process, -CONT when healed.
	Pause FaultKind = "pause"
	// Partition takes the link of the runner's network namespace down,
	// cutting the process inside it off; up again when healed.
	Partition FaultKind = "partition"
	// Divergence writes a new version of a path straight into a site's
	// directory, behind the federation's back (healed at once).
	Divergence FaultKind = "diverge"
	// FullDisk fills the tmpfs under a role's directory (a site's root,
	// a cache's blocks, the buffer's spool); the filler is removed when
	// healed.
	FullDisk FaultKind = "full-disk"
	// RedisKill is kill -9 of Redis, restarted (empty) when healed.
	RedisKill FaultKind = "redis-kill"
)

// Targets are what each kind of fault may hit, as the runner names
// them. A kind with no targets is never scheduled.
type Targets map[FaultKind][]string

// Fault is one scheduled fault: at At after the run began, Kind hits
// Target, and is healed For later.
type Fault struct {
	At     time.Duration
	For    time.Duration
	Kind   FaultKind
	Target string
	// Seed drives the fault's own choices (which path diverges).
	Seed uint64
}

// Schedule returns the faults of a run of length d for seed: a pure
// function, so a seed replays the same schedule. Faults follow each
// other with gaps of 1 to 6 s and last 2 to 12 s; at most two are in
// force at once, never two on one target.
func Schedule(seed uint64, d time.Duration, targets Targets) []Fault {
	rng := rand.New(rand.NewPCG(seed, 0x6e656d65736973))
	var kinds []FaultKind
	for k, ts := range targets {
		if len(ts) > 0 {
			kinds = append(kinds, k)
		}
	}
	sort.Slice(kinds, func(i, j int) bool { return kinds[i] < kinds[j] })
	if len(kinds) == 0 {
		return nil
	}
	busy := map[string]time.Duration{} // target -> healed at
	var out []Fault
	at := 2 * time.Second
	for {
		at += time.Second + time.Duration(rng.Int64N(int64(5*time.Second)))
		if at >= d {
			return out
		}
		k := kinds[rng.IntN(len(kinds))]
		ts := targets[k]
		f := Fault{At: at, Kind: k, Target: ts[rng.IntN(len(ts))], Seed: rng.Uint64(),
			For: 2*time.Second + time.Duration(rng.Int64N(int64(10*time.Second)))}
		if k == Divergence {
			f.For = 0
		}
		if at+f.For > d {
			f.For = d - at
		}
		if busy[f.Target] > at || active(out, at) >= 2 {
			continue
		}
		busy[f.Target] = at + f.For
		out = append(out, f)
	}
}

// active counts the faults of s in force at t.
func active(s []Fault, t time.Duration) int {
	n := 0
	for _, f := range s {
		if f.At <= t && t < f.At+f.For {
			n++
		}
	}
	return n
}
