package bench

import (
	"fmt"
	"strings"
	"time"
)

// Plan is what a run will cost, known before it starts: a user about to
// start the AAA open test with its defaults (about 6 minutes) or the IO
// test (1 GiB written) is told so first.
type Plan struct {
	// Kind is the test: "io", "open" or "read".
	Kind string
	// Shape is the load: "50 jobs (5 more every 30s), hold 1m0s".
	Shape string
	// Duration is the planned length of the load, scaled by Speed; the
	// time to write the test files and the IO test's transfers are not
	// in it (they depend on the target).
	Duration time.Duration
	// Ops is how many operations the load starts: opens or block reads.
	Ops int64
	// Write is how many bytes the run writes: fresh test files, the IO
	// test's file. Read is how many it reads back.
	Write, Read int64
}

// String renders p on one line, as bench prints it when a run starts:
// "open: 50 jobs (5 more every 30s), hold 1m0s: about 5m30s, 19500 opens;
// writes 3.91 MiB, reads 19500 B".
func (p Plan) String() string {
	var b strings.Builder
	b.WriteString(p.Kind + ": ")
	if p.Shape != "" {
		b.WriteString(p.Shape + ": ")
	}
	if p.Duration > 0 {
		fmt.Fprintf(&b, "about %s", roundForPeople(p.Duration))
		if p.Ops > 0 {
			fmt.Fprintf(&b, ", %d %s", p.Ops, map[string]string{"open": "opens", "read": "block reads"}[p.Kind])
		}
		b.WriteString("; ")
	}
	var moves []string
	if p.Write > 0 {
		moves = append(moves, "writes "+formatBytes(float64(p.Write)))
	}
	if p.Read > 0 {
		moves = append(moves, "reads "+formatBytes(float64(p.Read)))
	}
	if len(moves) == 0 {
		moves = append(moves, "writes nothing")
	}
	b.WriteString(strings.Join(moves, ", "))
	return b.String()
}

// shape describes a ramp for Plan.Shape.
func (r Ramp) shape() string {
	if r.Step <= 0 || r.Step >= r.Jobs {
		return fmt.Sprintf("%d jobs at once, hold %s", r.Jobs, max(r.Hold, r.Every))
	}
	return fmt.Sprintf("%d jobs (%d more every %s), hold %s", r.Jobs, r.Step, r.Every, max(r.Hold, r.Every))
}

// ticks is how many operations jobs paced at period start over the ramp:
// each stage's jobs × its length / period. Speed cancels out.
func (r Ramp) ticks(c *Common, period time.Duration) (time.Duration, int64) {
	plan := r.plan(c)
	p := c.scale(period)
	var n int64
	for _, s := range plan {
		n += int64(s.jobs) * int64((s.end-s.start)/max(p, 1))
	}
	return plan[len(plan)-1].end, n
}

// Plan returns what the open test with o will cost. Shape and durations
// are unscaled in the text; Duration is scaled.
func (o OpenOptions) Plan() Plan {
	o.fill()
	d, n := o.Ramp.ticks(&o.Common, o.Period)
	p := Plan{Kind: "open", Shape: o.Ramp.shape(), Duration: d, Ops: n, Read: n}
	if !o.Reuse {
		p.Write = int64(o.Files) * o.FileSize
	}
	return p
}

// Plan returns what the read test with o will cost.
func (o ReadOptions) Plan() Plan {
	o.fill()
	d, n := o.Ramp.ticks(&o.Common, o.Period)
	p := Plan{Kind: "read", Shape: o.Ramp.shape() + fmt.Sprintf(", %s every %s per job", formatBytes(float64(o.Block)), o.Period),
		Duration: d, Ops: n, Read: n * o.Block}
	if !o.Reuse {
		p.Write = int64(o.Files) * o.FileSize
	}
	return p
}

// Plan returns what the IO test with o will cost: its file, written once
// and read back once.
func (o IOOptions) Plan() Plan {
	if o.Size <= 0 {
		o.Size = DefaultIOSize
	}
	return Plan{Kind: "io", Shape: "one file of " + formatBytes(float64(o.Size)), Write: o.Size, Read: o.Size}
}

// roundForPeople keeps two or three significant figures of d: "5m30s",
// "33s", "1.2s", "100ms" rather than "5m30.000001s" or, at --speed 100,
// "0s".
func roundForPeople(d time.Duration) time.Duration {
	switch {
	case d >= time.Minute:
		return d.Round(time.Second)
	case d >= time.Second:
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}
