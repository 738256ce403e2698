package bench

import (
	"context"
	"fmt"
	"path"
	"slices"
	"time"
)

// OpenOptions shape the open-rate test (the CMS AAA file-open scale test).
type OpenOptions struct {
	Common
	Ramp
	// Period is how often each job opens a file (0: 500ms, i.e. 2 Hz).
	Period time.Duration `json:"period"`
	// Files is the size of the fresh file list (0: 1000). Jobs open the
	// files round-robin from different starting points, so within a
	// pass every open is of a different file.
	Files int `json:"files"`
	// FileSize is the size of each fresh file (0: 4096).
	FileSize int64 `json:"file_size"`
}

// OpenDefaults are the AAA open test's numbers: 50 jobs at 2 Hz (a
// 100 Hz target), 5 jobs added every 30 s, the full load held for 60 s.
func OpenDefaults() OpenOptions {
	return OpenOptions{
		Ramp:     Ramp{Jobs: 50, Step: 5, Every: 30 * time.Second, Hold: 60 * time.Second},
		Period:   500 * time.Millisecond,
		Files:    1000,
		FileSize: 4096,
	}
}

func (o *OpenOptions) fill() {
	d := OpenDefaults()
	if o.Jobs <= 0 {
		o.Jobs = d.Jobs
	}
	if o.Every <= 0 {
		o.Every = d.Every
	}
	if o.Period <= 0 {
		o.Period = d.Period
	}
	if o.Files <= 0 {
		o.Files = d.Files
	}
	if o.FileSize <= 0 {
		o.FileSize = d.FileSize
	}
}

// OpenSummary is the open test's result. Rates are per second of real
// time (Speed times the unscaled rate).
type OpenSummary struct {
	Speed float64 `json:"speed"`
	// Jobs is the job count at the end of the ramp.
	Jobs int `json:"jobs"`
	// ExpectedRate and ObservedRate are in the last (full-load) stage.
	ExpectedRate float64 `json:"expected_rate"`
	ObservedRate float64 `json:"observed_rate"`
	// MaxObservedRate is the best stage.
	MaxObservedRate float64 `json:"max_observed_rate"`
	// Slope is observed against expected rate over the stages (1: the
	// target keeps up; near 0: flat). SlopeValid is false with fewer than
	// two distinct expected rates.
	Slope      float64 `json:"slope"`
	SlopeValid bool    `json:"slope_valid"`
	// Opens and Failures count every open; FailFrac is their ratio.
	Opens    int64   `json:"opens"`
	Failures int64   `json:"failures"`
	FailFrac float64 `json:"fail_frac"`
	// Open times in seconds, over every successful open.
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
	// FirstErr is one of the errors seen, for the report.
	FirstErr string `json:"first_err,omitempty"`
	// Fleet is what each node did, for a run handed out to agents.
	Fleet *FleetReport `json:"fleet,omitempty"`
}

// Open runs the open-rate test against t: jobs that each open (stat and
// read the first byte of) a different file every Period, ramped. The
// files are a fresh set written for the run (Common.Reuse: the prepared
// set), removed afterwards (Common.Keep: kept).
func Open(ctx context.Context, t *Target, o OpenOptions) (*Result, error) {
	p, cleanup, err := PrepareOpen(ctx, t, &o)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	return p.runHere(ctx, t, o.Progress, o)
}

// PrepareOpen makes the open test of o ready to run on t (its files
// written; o's defaults filled) and returns it with the function that
// removes its fresh files.
func PrepareOpen(ctx context.Context, t *Target, o *OpenOptions) (*PacedTest, func(), error) {
	o.fill()
	rng := o.rng()
	fs, err := t.openFiles(ctx, &o.Common, o.Files, o.FileSize, rng, "open")
	if err != nil {
		return nil, nil, err
	}
	o.Files, o.FileSize = len(fs.paths), fs.size
	plan := o.Ramp.plan(&o.Common)
	p := &PacedTest{Kind: "open", Stages: stagesOf(plan), Period: o.scale(o.Period), Paths: fs.paths, Size: fs.size,
		Starts: make([]int64, o.Jobs), PerJob: perJob(&o.Common, plan)}
	for j := range o.Jobs {
		p.Starts[j] = int64(j * len(fs.paths) / o.Jobs)
	}
	return p, t.cleanup(ctx, fs, o.Keep), nil
}

// cleanup returns what removes fs after the run: its fresh files, unless
// keep.
func (t *Target) cleanup(ctx context.Context, fs *fileSet, keep bool) func() {
	return func() {
		if fs.fresh && !keep {
			t.removeFiles(context.WithoutCancel(ctx), fs)
		}
	}
}

// runHere runs every job of p on t in this process, and makes its
// result with params (the test's options).
func (p *PacedTest) runHere(ctx context.Context, t *Target, progress Progress, params any) (*Result, error) {
	var cnt counters
	res := &Result{Kind: p.Kind, Target: t.raw, Site: t.site, Params: params, Started: time.Now()}
	t.served.reset()
	stop := showProgress(progress, progressLine(p.Kind, p.plan(), res.Started, &cnt, p.Kind == "read"))
	op, err := p.op(t, allJobs(p.Jobs()))
	if err != nil {
		stop()
		return nil, err
	}
	recs := runJobs(ctx, p.PerJob, p.Kind, p.plan(), p.Period, op, &cnt, res.Started, allJobs(p.Jobs()))
	stop()
	res.Ended = time.Now()
	res.Site = t.servedSite(context.WithoutCancel(ctx))
	res.Canceled = ctx.Err() != nil
	p.finish(res, recs)
	return res, nil
}

func allJobs(n int) []int {
	jobs := make([]int, n)
	for j := range jobs {
		jobs[j] = j
	}
	return jobs
}

// openFiles returns the file set an open or read test uses: the prepared
// one (Reuse) or a fresh one written now.
func (t *Target) openFiles(ctx context.Context, c *Common, n int, size int64, rng interface{ Uint64() uint64 },
	what string) (*fileSet, error) {
	if c.Reuse {
		m, err := t.manifest(ctx)
		if err != nil {
			return nil, err
		}
		if what == "open" {
			if m.OpenFiles == 0 {
				return nil, fmt.Errorf("bench: the prepared set has no open files")
			}
			return t.newFileSet(Root+"/open", "f", m.OpenFiles, m.OpenSize, false), nil
		}
		if m.ReadFiles == 0 {
			return nil, fmt.Errorf("bench: the prepared set has no read files")
		}
		return t.newFileSet(Root+"/read", "r", m.ReadFiles, m.ReadSize, false), nil
	}
	tag := fmt.Sprintf("%s-%x", time.Now().UTC().Format("20060102T150405"), rng.Uint64()&0xffffff)
	fs := t.newFileSet(path.Join(Root, "runs", tag), what[:1], n, size, true)
	if err := t.writeFiles(ctx, fs, rng.Uint64(), what, c.Progress); err != nil {
		t.removeFiles(context.WithoutCancel(ctx), fs)
		return nil, err
	}
	return fs, nil
}

func progressLine(kind string, plan []stepPlan, start time.Time, cnt *counters, bytes bool) func() string {
	total := plan[len(plan)-1].end
	var lastOps, lastBytes int64
	last := start
	return func() string {
		now := time.Now()
		ops, b := cnt.ops.Load(), cnt.bytes.Load()
		dt := now.Sub(last).Seconds()
		rate := float64(ops-lastOps) / dt
		brate := float64(b-lastBytes) / dt
		lastOps, lastBytes, last = ops, b, now
		el := now.Sub(start)
		line := fmt.Sprintf("%s: %5.1fs/%.1fs  jobs %d  ops %d  failed %d  %.1f ops/s",
			kind, el.Seconds(), total.Seconds(), cnt.active.Load(), ops, cnt.fails.Load(), rate)
		if bytes {
			line += fmt.Sprintf("  %s/s", formatBytes(brate))
		}
		return line
	}
}

func summarizeOpen(res *Result, speed float64) *OpenSummary {
	s := &OpenSummary{Speed: speed}
	var xs, ys []float64
	for _, st := range res.Steps {
		s.Opens += st.Ops
		s.Failures += st.Failures
		s.MaxObservedRate = max(s.MaxObservedRate, st.Observed)
		xs, ys = append(xs, st.Expected), append(ys, st.Observed)
	}
	if n := len(res.Steps); n > 0 {
		last := res.Steps[n-1]
		s.Jobs, s.ExpectedRate, s.ObservedRate = last.Jobs, last.Expected, last.Observed
	}
	s.Slope, s.SlopeValid = slope(xs, ys)
	if s.Opens > 0 {
		s.FailFrac = float64(s.Failures) / float64(s.Opens)
	}
	var d []float64
	for _, sm := range res.Samples {
		if sm.OK {
			d = append(d, sm.Value)
		} else if s.FirstErr == "" {
			s.FirstErr = sm.Err
		}
	}
	slices.Sort(d)
	s.Mean = mean(d)
	s.P50, s.P90, s.P99 = percentile(d, 0.5), percentile(d, 0.9), percentile(d, 0.99)
	if len(d) > 0 {
		s.Max = d[len(d)-1]
	}
	return s
}
