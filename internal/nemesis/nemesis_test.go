//go:build nemesis

package nemesis

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/testenv"
)

// limits are the failures the lake may answer with while faults are in
// force, and the bound on every answer: 503 (an outage, with
// Retry-After), 504 (a gateway's timeout), 507 (a full disk or buffer),
// "conn" (the node asked is down or cut off), "broken" (a transfer cut
// by a kill), "door" (the door's kXR_wait past xrdcp's patience, or
// kXR_ServerError), "cut" (a request the end of the run cut short).
var limits = Limits{ErrKinds: []string{"503", "504", "507", "conn", "broken", "door", "cut"}, MaxLatency: 45 * time.Second}

// TestNemesis runs the lake under the nemesis for NEMESIS_DURATION
// (default 3m) with the schedule of NEMESIS_SEED (default: a random
// seed, printed), heals it, reads every path through every node, and
// checks the history. It writes history.jsonl, summary.txt and every
// process's log to NEMESIS_OUT (default $TMPDIR/lakefed-nemesis-SEED).
func TestNemesis(t *testing.T) {
	d, seed, clients := settings(t)
	out := os.Getenv("NEMESIS_OUT")
	if out == "" {
		out = filepath.Join(os.TempDir(), fmt.Sprintf("lakefed-nemesis-%d", seed))
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("nemesis: seed %d, %v, %d clients, output in %s\n", seed, d, clients, out)
	l := startLake(t, out)
	w := &Workload{Nodes: l.nodes, Paths: MakePaths(300, bufPrefix), History: &History{}, Versions: &Versions{},
		T0: time.Now(), Timeout: 60 * time.Second, Xrdcp: testenv.Require(t, "xrdcp"), TmpDir: t.TempDir(),
		HTTP: &http.Client{Transport: &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
			MaxIdleConnsPerHost: 16,
		}}}
	sched := Schedule(seed, d, l.targets())

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() { w.Client(ctx, i, rand.New(rand.NewPCG(seed, uint64(i)))) })
	}
	l.run(w, sched, d)
	stop()
	wg.Wait()

	l.ensureUp()
	l.settle(w)
	l.finalReads(w)
	l.inspect(w)

	ops := w.History.Ops()
	vs := Check(ops, limits)
	if hung(vs) {
		// A request that took the whole client timeout, or a path still
		// unreadable after the heal, is a process waiting on something:
		// its goroutines say what.
		for _, p := range l.feds {
			p.Quit(10 * time.Second)
		}
		fmt.Printf("nemesis: a node hung; every federator's goroutines are at the end of its log in %s\n", out)
	}
	report(t, out, seed, ops, vs)
}

// hung reports whether vs has an answer that took too long or a path
// left unreadable.
func hung(vs []Violation) bool {
	for _, v := range vs {
		if v.Kind == "too-slow" || v.Kind == "unreadable-at-end" {
			return true
		}
	}
	return false
}

// settings reads NEMESIS_DURATION, NEMESIS_SEED and NEMESIS_CLIENTS.
func settings(t *testing.T) (time.Duration, uint64, int) {
	d := 3 * time.Minute
	if s := os.Getenv("NEMESIS_DURATION"); s != "" {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			t.Fatalf("NEMESIS_DURATION=%q: %v", s, err)
		}
	}
	seed := rand.Uint64() % 1_000_000
	if s := os.Getenv("NEMESIS_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("NEMESIS_SEED=%q: %v", s, err)
		}
	}
	clients := 8
	if s := os.Getenv("NEMESIS_CLIENTS"); s != "" {
		clients, _ = strconv.Atoi(s)
	}
	return d, seed, clients
}

// run applies the schedule: each fault at its instant, each heal at its
// own, and whatever is still in force at the end.
func (l *lake) run(w *Workload, sched []Fault, d time.Duration) {
	var active []*applied
	healDue := func(a *applied) time.Duration { return a.f.At + a.f.For }
	for i := 0; i < len(sched) || len(active) > 0; {
		next := d
		if i < len(sched) {
			next = sched[i].At
		}
		sort.Slice(active, func(a, b int) bool { return healDue(active[a]) < healDue(active[b]) })
		if len(active) > 0 && healDue(active[0]) <= next {
			sleepUntil(w, healDue(active[0]))
			active[0].end(w)
			active = active[1:]
			continue
		}
		if i == len(sched) {
			break
		}
		sleepUntil(w, next)
		active = append(active, l.apply(sched[i], w))
		i++
	}
	sleepUntil(w, d)
	for _, a := range active {
		a.end(w)
	}
}

// settle waits, after the heal, until every federator answers and sees
// every site up, and the buffer holds nothing (every file migrated and
// retired, every delete carried out).
func (l *lake) settle(w *Workload) {
	client := &http.Client{Timeout: 10 * time.Second}
	for i := range l.feds {
		testenv.Eventually(l.t, 3*time.Minute, fmt.Sprintf("fed-%d sees every site up", i), func() bool {
			resp, err := l.api(client, i, "/api/endpoints")
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			var eps []struct{ Name, State string }
			if json.NewDecoder(resp.Body).Decode(&eps) != nil || len(eps) != 3 {
				return false
			}
			for _, e := range eps {
				if e.State != "up" {
					return false
				}
			}
			return true
		})
	}
	var last string
	if !testenv.Within(5*time.Minute, func() bool {
		resp, err := l.api(client, 0, "/api/buffer")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var st struct {
			PendingFiles   int `json:"pending_files"`
			PendingDeletes int `json:"pending_deletes"`
			HeldFiles      int `json:"held_files"`
		}
		if json.NewDecoder(resp.Body).Decode(&st) != nil {
			return false
		}
		last = fmt.Sprintf("%+v", st)
		return st.PendingFiles == 0 && st.PendingDeletes == 0 && st.HeldFiles == 0
	}) {
		l.t.Logf("the buffer did not drain after the heal: %s", last)
	}
}

// finalReads reads every path through every node; a read that fails is
// tried again for at most 2 minutes from the phase's start.
func (l *lake) finalReads(w *Workload) {
	deadline := time.Now().Add(2 * time.Minute)
	type job struct {
		n Node
		p string
	}
	jobs := make(chan job)
	var wg sync.WaitGroup
	for c := range 8 {
		wg.Go(func() {
			for j := range jobs {
				w.FinalRead(context.Background(), 1000+c, j.n, j.p, deadline)
			}
		})
	}
	for _, p := range w.Paths {
		for _, n := range w.Nodes {
			jobs <- job{n, p.Name}
		}
	}
	close(jobs)
	wg.Wait()
}

// inspect lists what the buffer and the caches left: the buffer must
// hold no file once drained, a cache no block file without its map (or
// the reverse) and no temporary file once quiet.
func (l *lake) inspect(w *Workload) {
	var left []string
	for _, sub := range []string{"data", "tmp"} {
		left = append(left, files(filepath.Join(l.bufDir, sub), func(string) bool { return true })...)
	}
	w.History.Add(Op{Client: -1, Node: "buffer", Kind: Inspect, Start: w.now(), End: w.now(), OK: true, Leftovers: left})
	for i, dir := range l.cacheDirs {
		root := filepath.Join(dir, "data")
		orphan := func(p string) bool {
			switch {
			case strings.HasSuffix(p, ".tmp"):
				return true
			case strings.HasSuffix(p, ".data"):
				return !exists(strings.TrimSuffix(p, ".data") + ".meta")
			case strings.HasSuffix(p, ".meta"):
				return !exists(strings.TrimSuffix(p, ".meta") + ".data")
			}
			return true
		}
		// Fills and prefetches of the final reads may still be in
		// flight: wait for the directory to be quiet.
		var left []string
		testenv.Within(30*time.Second, func() bool {
			left = files(root, orphan)
			return len(left) == 0
		})
		w.History.Add(Op{Client: -1, Node: fmt.Sprintf("cache-%d", i), Kind: Inspect, Start: w.now(), End: w.now(), OK: true, Leftovers: left})
	}
}

// files lists the files under root that keep says are left over.
func files(root string, keep func(string) bool) []string {
	var out []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && keep(p) {
			rel, _ := filepath.Rel(root, p)
			out = append(out, rel)
		}
		return nil
	})
	return out
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// report writes the history and the summary, prints the summary, and
// fails the test on any violation.
func report(t *testing.T, out string, seed uint64, ops []Op, vs []Violation) {
	f, err := os.Create(filepath.Join(out, "history.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteJSONL(f, ops); err != nil {
		t.Fatal(err)
	}
	f.Close()
	var sum bytes.Buffer
	if err := Summary(&sum, seed, ops, vs); err != nil {
		t.Fatal(err)
	}
	if b, err := json.MarshalIndent(vs, "", "  "); err == nil {
		_ = os.WriteFile(filepath.Join(out, "violations.json"), b, 0o644)
	}
	_ = os.WriteFile(filepath.Join(out, "summary.txt"), sum.Bytes(), 0o644)
	fmt.Print(sum.String())
	fmt.Printf("nemesis: history in %s (replay: NEMESIS_SEED=%d)\n", out, seed)
	if len(vs) > 0 {
		t.Errorf("%d violations (seed %d); see %s/violations.json", len(vs), seed, out)
	}
}
