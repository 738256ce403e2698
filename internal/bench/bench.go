// Package bench is lakefed's site and scale tests — the Dynafed IO
// benchmark, the CMS AAA open-rate and read-rate scale tests and a ROOT
// read test — with the AAA classification of a site as "ok" or "to debug".
// The tests run against any URL lakefed can read (a storage role, nginx,
// XRootD's HTTP door, a federator pinned to one site with SiteParam), keep
// every sample, and hand a Result to the results store (package store).
//
//	t, _ := bench.NewTarget(ctx, bench.TargetConfig{URL: "http://127.0.0.1:8080/"})
//	res, _ := bench.Open(ctx, t, bench.OpenOptions{Jobs: 50, Common: bench.Common{Speed: 10}})
//	v := bench.Classify(res, bench.DefaultThresholds())
//	bench.WriteSummary(os.Stdout, res, v)
//	bench.Save(ctx, st, res, v)
//
// --speed (Common.Speed) divides every period and duration, so the AAA
// shapes (2 Hz per job, 2.5 MiB per 10 s per job, ramps over minutes) run
// in seconds; rates then come out Speed times higher and the
// classification scales its thresholds by the same factor.
package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lakefed/lakefed/internal/results"
)

// Root is the directory under a target's base URL that holds every test
// file: prepared sets in Root/open, Root/read, Root/root, fresh per-run
// sets in Root/runs/<tag>.
const Root = "/lakefed-bench"

// Common are the options every test takes.
type Common struct {
	// Speed divides every period and duration (the shape stays, the rates
	// rise). Zero means 1.
	Speed float64 `json:"speed"`
	// Seed makes file names, data and schedules reproducible. Zero: random.
	Seed uint64 `json:"seed,omitempty"`
	// Reuse uses the file set `lakefed bench prepare` wrote instead of
	// a fresh set per run, so caches on the way may bias the result.
	Reuse bool `json:"reuse,omitempty"`
	// Keep leaves the fresh per-run files in place after the run.
	Keep bool `json:"keep,omitempty"`
	// MaxSamples bounds the samples a run keeps (0: 5,000,000, about 8
	// minutes at 10,000 opens/s), split evenly between the jobs. The
	// stages are computed from the kept samples, so a run that outgrows
	// the bound under-reports its later stages: raise it for long runs.
	MaxSamples int `json:"max_samples,omitempty"`
	// Progress, when not nil, is shown the run's progress. Not part of
	// the parameters.
	Progress Progress `json:"-"`
}

func (c *Common) speed() float64 {
	if c.Speed <= 0 {
		return 1
	}
	return c.Speed
}

func (c *Common) scale(d time.Duration) time.Duration {
	return time.Duration(float64(d) / c.speed())
}

func (c *Common) rng() *rand.Rand {
	seed := c.Seed
	if seed == 0 {
		seed = rand.Uint64()
		c.Seed = seed
	}
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

func (c *Common) maxSamples() int {
	if c.MaxSamples <= 0 {
		return 5_000_000
	}
	return c.MaxSamples
}

// Result is what one test run measured.
type Result struct {
	// Kind is "io", "open", "read" or "root".
	Kind string `json:"kind"`
	// Target is the URL tested; Site the site it tested: the pinned one,
	// or the one a redirecting target sent the reads to ("" when the
	// target served them itself).
	Target string `json:"target"`
	Site   string `json:"site,omitempty"`
	// Params are the options the test ran with.
	Params any `json:"params"`
	// Started and Ended bound the run.
	Started time.Time `json:"started"`
	Ended   time.Time `json:"ended"`
	// Steps are the ramp's stages (open and read tests).
	Steps []results.Step `json:"steps,omitempty"`
	// Samples are the operations, at most Common.MaxSamples of them.
	Samples []results.Sample `json:"-"`
	// Summary is the kind's summary: *IOSummary, *OpenSummary,
	// *ReadSummary or *ROOTSummary.
	Summary any `json:"summary"`
	// Canceled says the run was interrupted before its end; Incomplete
	// says what it lacks when it ended without all of its samples (a run
	// from several nodes whose store could not take some).
	Canceled   bool   `json:"canceled,omitempty"`
	Incomplete string `json:"incomplete,omitempty"`
	// samplesStored: the samples are in the results store already (the
	// agents of a run from several nodes wrote them).
	samplesStored bool
}

// Progress is shown a run's progress. Implementations must be safe for
// concurrent use; Update is called a few times a second.
type Progress interface {
	// Update shows one line describing where the run is.
	Update(line string)
	// Done ends the progress display.
	Done()
}

// stepPlan is one stage of a ramp: Jobs jobs from Start to End.
type stepPlan struct {
	start, end time.Duration
	jobs       int
}

// Ramp is how a paced test adds jobs: Step jobs every Every until Jobs run,
// then holds all of them for Hold (the AAA tests' shape). Durations are
// unscaled; Common.Speed divides them.
type Ramp struct {
	// Jobs is the number of jobs at the end of the ramp.
	Jobs int `json:"jobs"`
	// Step is the number of jobs added at each stage (0: all at once).
	Step int `json:"step"`
	// Every is how long each stage lasts.
	Every time.Duration `json:"every"`
	// Hold is how long the last stage (all jobs) lasts; at least Every.
	Hold time.Duration `json:"hold"`
}

// plan returns the ramp's stages, scaled.
func (r Ramp) plan(c *Common) []stepPlan {
	step := r.Step
	if step <= 0 || step > r.Jobs {
		step = r.Jobs
	}
	every, hold := c.scale(r.Every), c.scale(r.Hold)
	hold = max(hold, every)
	var out []stepPlan
	var t time.Duration
	for jobs := step; ; jobs += step {
		jobs = min(jobs, r.Jobs)
		d := every
		if jobs == r.Jobs {
			d = hold
		}
		out = append(out, stepPlan{start: t, end: t + d, jobs: jobs})
		t += d
		if jobs == r.Jobs {
			return out
		}
	}
}

// jobStart returns when job j starts: at the start of the stage that adds
// it, staggered across one period so the jobs of a stage do not tick in
// lockstep.
func jobStart(plan []stepPlan, j int, period time.Duration) time.Duration {
	prev := 0
	for _, s := range plan {
		if j < s.jobs {
			k := s.jobs - prev
			return s.start + time.Duration(int64(period)*int64(j-prev)/int64(k))
		}
		prev = s.jobs
	}
	return plan[len(plan)-1].end
}

// pacedOp is one operation of a paced job: n counts the job's operations
// from 0. It returns the bytes moved.
type pacedOp func(ctx context.Context, job, n int) (int64, error)

// jobRecord is what one job saw.
type jobRecord struct {
	samples []results.Sample
	missed  []float64 // start times (s) of ticks skipped because the job was late
}

// counters are what the progress line reads while a test runs.
type counters struct {
	ops, fails, bytes, active atomic.Int64
}

// perJob is the samples each job keeps at most: its share of the sample
// budget.
func perJob(c *Common, plan []stepPlan) int {
	return max(c.maxSamples()/max(plan[len(plan)-1].jobs, 1), 1)
}

// runJobs runs the jobs given (all of a run's, or some on one of the
// nodes running it) on the schedule of a run that started at start, each
// doing op every period from its start until the plan's end. A job that
// falls more than a period behind skips the ticks it missed (and records
// them), as an AAA job that cannot keep up would. Every loop is bounded
// by the plan's end and ctx. The records are in the order of jobs.
func runJobs(ctx context.Context, perJob int, kind string, plan []stepPlan, period time.Duration,
	op pacedOp, cnt *counters, start time.Time, jobs []int) []jobRecord {
	end := plan[len(plan)-1].end
	recs := make([]jobRecord, len(jobs))
	var wg sync.WaitGroup
	for x, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := &recs[x]
			next := jobStart(plan, j, period)
			timer := time.NewTimer(time.Until(start.Add(next)))
			defer timer.Stop()
			cnt.active.Add(1)
			defer cnt.active.Add(-1)
			for n := 0; next < end; n++ {
				select {
				case <-ctx.Done():
					return
				case <-timer.C:
				}
				t0 := time.Now()
				b, err := op(ctx, j, n)
				d := time.Since(t0)
				cnt.ops.Add(1)
				cnt.bytes.Add(b)
				if err != nil {
					if ctx.Err() != nil {
						return // interrupted, not a failure of the target
					}
					cnt.fails.Add(1)
				}
				if len(rec.samples) < perJob {
					s := results.Sample{T: next.Seconds(), Kind: kind, Job: j, Value: d.Seconds(), Bytes: b, OK: err == nil}
					if err != nil {
						s.Err = err.Error()
					}
					rec.samples = append(rec.samples, s)
				}
				next += period
				if late := time.Since(start) - next; late > period {
					skip := late / period
					for k := range skip {
						if len(rec.missed) < perJob {
							rec.missed = append(rec.missed, (next + k*period).Seconds())
						}
					}
					next += skip * period
				}
				timer.Reset(time.Until(start.Add(next)))
			}
		}()
	}
	wg.Wait()
	return recs
}

// percentile returns the p-th percentile (0..1) of sorted values.
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// slope is the least-squares slope of y against x, and false when x does
// not vary (fewer than two distinct x).
func slope(x, y []float64) (float64, bool) {
	if len(x) < 2 {
		return 0, false
	}
	mx, my := mean(x), mean(y)
	var sxy, sxx float64
	for i := range x {
		sxy += (x[i] - mx) * (y[i] - my)
		sxx += (x[i] - mx) * (x[i] - mx)
	}
	if sxx == 0 {
		return 0, false
	}
	return sxy / sxx, true
}

// steps aggregates the samples of recs into the plan's stages. expected
// gives a stage's expected rate from its job count; byteRate says whether
// rates count bytes (read tests) or operations.
func aggregateSteps(plan []stepPlan, recs []jobRecord, period time.Duration, expected func(jobs int) float64,
	byteRate bool) []results.Step {
	out := make([]results.Step, len(plan))
	durs := make([][]float64, len(plan))
	busy := make([]float64, len(plan))
	bytes := make([]float64, len(plan))
	bad := make([]map[int]bool, len(plan)) // jobs that missed a tick, failed or overran in the stage
	find := func(t float64) int {
		for i, s := range plan {
			if t >= s.start.Seconds() && t < s.end.Seconds() {
				return i
			}
		}
		return -1
	}
	for i := range plan {
		bad[i] = map[int]bool{}
	}
	for j, rec := range recs {
		for _, s := range rec.samples {
			i := find(s.T)
			if i < 0 {
				continue
			}
			st := &out[i]
			st.Ops++
			if !s.OK {
				st.Failures++
				bad[i][j] = true
				continue
			}
			durs[i] = append(durs[i], s.Value)
			busy[i] += s.Value
			bytes[i] += float64(s.Bytes)
			if s.Value > period.Seconds() {
				bad[i][j] = true
			}
		}
		for _, t := range rec.missed {
			if i := find(t); i >= 0 {
				bad[i][j] = true
			}
		}
	}
	for i, p := range plan {
		st := &out[i]
		st.Index = i
		st.Start, st.End = p.start.Seconds(), p.end.Seconds()
		st.Jobs = p.jobs
		st.Expected = expected(p.jobs)
		d := (p.end - p.start).Seconds()
		if byteRate {
			st.Observed = bytes[i] / d
		} else {
			st.Observed = float64(st.Ops-st.Failures) / d
		}
		if st.Ops > 0 {
			st.FailFrac = float64(st.Failures) / float64(st.Ops)
		}
		slices.Sort(durs[i])
		st.Mean = mean(durs[i])
		st.P50, st.P90, st.P99 = percentile(durs[i], 0.5), percentile(durs[i], 0.9), percentile(durs[i], 0.99)
		st.IOWait = busy[i] / (float64(p.jobs) * d)
		st.Sustained = p.jobs - len(bad[i])
	}
	return out
}

// flatten concatenates the jobs' samples in time order.
func flatten(recs []jobRecord) []results.Sample {
	n := 0
	for _, r := range recs {
		n += len(r.samples)
	}
	out := make([]results.Sample, 0, n)
	for _, r := range recs {
		out = append(out, r.samples...)
	}
	slices.SortStableFunc(out, func(a, b results.Sample) int {
		switch {
		case a.T < b.T:
			return -1
		case a.T > b.T:
			return 1
		}
		return 0
	})
	return out
}

// showProgress updates p every half second with line() until stop is
// closed. It returns when the goroutine it starts has ended.
func showProgress(p Progress, line func() string) (stop func()) {
	if p == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tk := time.NewTicker(500 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-done:
				return
			case <-tk.C:
				p.Update(line())
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
		p.Done()
	}
}

// marshalParams renders a test's options for the store.
func marshalParams(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage(fmt.Sprintf("{%q:%q}", "error", err.Error()))
	}
	return b
}
