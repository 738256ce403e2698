//go:build nemesis

package nemesis

import (
	"fmt"
	"math/rand/v2"
	"os"
	"syscall"
	"time"

	"github.com/lakefed/lakefed/internal/testenv"
)

// targets are what each fault may hit in this lake.
func (l *lake) targets() Targets {
	procs := []string{"site-a", "site-b", "site-c", "fed-0", "fed-1", "fed-2"}
	return Targets{
		Kill:       procs,
		Pause:      append(append([]string{}, procs...), "redis"),
		Partition:  {"fed-2"},
		Divergence: {"site-a", "site-c"},
		FullDisk:   {"site-a", "cache-0", "buffer"},
		RedisKill:  {"redis"},
	}
}

// applied is a fault in force and how to heal it.
type applied struct {
	f    Fault
	op   Op
	heal func() error
}

// apply starts fault f; it runs on the test's goroutine (a server that
// cannot start again ends the run there).
func (l *lake) apply(f Fault, w *Workload) *applied {
	fmt.Printf("nemesis: %6.1fs %s %s\n", time.Duration(w.now()).Seconds(), f.Kind, f.Target)
	a := &applied{f: f, op: Op{Client: -1, Node: f.Target, Kind: FaultOp, Fault: string(f.Kind), Target: f.Target, Start: w.now(), OK: true}}
	fail := func(err error) *applied {
		a.op.OK, a.op.Err, a.heal = false, err.Error(), func() error { return nil }
		return a
	}
	switch f.Kind {
	case Kill:
		a.heal = l.kill(f.Target)
	case Pause:
		if err := l.signal(f.Target, syscall.SIGSTOP); err != nil {
			return fail(err)
		}
		a.heal = func() error { return l.signal(f.Target, syscall.SIGCONT) }
	case Partition:
		if err := l.ns.SetLink(false); err != nil {
			return fail(err)
		}
		a.heal = func() error { return l.ns.SetLink(true) }
	case Divergence:
		return l.diverge(f, w, a)
	case FullDisk:
		filler := testenv.FillFS(l.t, l.disks[f.Target], 0)
		a.heal = func() error { return os.Remove(filler) }
	case RedisKill:
		l.redis.Kill()
		a.heal = func() error { l.redis.Restart(l.t); return nil }
	}
	return a
}

// kill kills a process with SIGKILL and returns how to start it again.
func (l *lake) kill(target string) func() error {
	switch target {
	case "site-b":
		l.s3.Kill()
		return func() error { l.s3.Restart(l.t); return nil }
	case "site-c":
		l.xrd.Kill()
		return func() error { l.xrd.Restart(l.t); return nil }
	}
	p := l.proc(target)
	p.Kill()
	return p.TryStart
}

func (l *lake) signal(target string, sig syscall.Signal) error {
	switch target {
	case "site-b":
		return l.s3.Signal(sig)
	case "site-c":
		return l.xrd.Signal(sig)
	case "redis":
		return l.redis.Signal(sig)
	}
	return l.proc(target).Signal(sig)
}

func (l *lake) proc(target string) *testenv.Proc {
	switch target {
	case "site-a":
		return l.siteA
	case "fed-0":
		return l.feds[0]
	case "fed-1":
		return l.feds[1]
	case "fed-2":
		return l.feds[2]
	}
	panic("nemesis: no process " + target)
}

// diverge writes a new version of a path (one the workload wrote, not
// buffered) straight into a site's directory, and records it as a write
// of the nemesis.
func (l *lake) diverge(f Fault, w *Workload, a *applied) *applied {
	rng := rand.New(rand.NewPCG(f.Seed, 1))
	var ps []string
	for _, p := range w.Paths {
		if !p.Buffered {
			ps = append(ps, p.Name)
		}
	}
	p := ps[rng.IntN(len(ps))]
	v := w.Versions.Next(p)
	op := Op{Client: -1, Node: f.Target, Kind: Diverge, Path: p, Version: v, Start: w.now()}
	err := l.writeSite(f.Target, p, Content(p, v))
	op.End, op.OK = w.now(), err == nil
	if err != nil {
		op.Err = err.Error()
	}
	w.History.Add(op)
	a.op.Path, a.op.OK, a.op.Err = p, err == nil, op.Err
	a.heal = func() error { return nil }
	return a
}

// end heals a fault and records it, from its start to its heal.
func (a *applied) end(w *Workload) {
	if err := a.heal(); err != nil {
		a.op.OK, a.op.Err = false, err.Error()
	}
	a.op.End = w.now()
	w.History.Add(a.op)
	fmt.Printf("nemesis: %6.1fs healed %s %s %s\n", time.Duration(a.op.End).Seconds(), a.f.Kind, a.f.Target, a.op.Err)
}

// ensureUp starts every process of the lake that is not running (a kill
// whose restart failed), after the heal.
func (l *lake) ensureUp() {
	for _, p := range append([]*testenv.Proc{l.siteA}, l.feds...) {
		if !p.Running() {
			p.Start(l.t)
		}
	}
	_ = l.ns.SetLink(true)
}

// sleepUntil waits until the run's clock reaches at: the schedule is
// made of instants, and nothing else announces them.
func sleepUntil(w *Workload, at time.Duration) {
	if d := at - time.Duration(w.now()); d > 0 {
		time.Sleep(d)
	}
}
