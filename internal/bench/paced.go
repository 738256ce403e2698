package bench

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/lakefed/lakefed/internal/results"
)

// PacedTest is an open or read test made ready to run: its files
// written, its ramp planned, each job's starting point drawn. It is what
// every node running some of its jobs needs (JSON, for bench agents), so
// that a job behaves the same on whichever node runs it.
type PacedTest struct {
	// Kind is "open" or "read".
	Kind string `json:"kind"`
	// Stages are the ramp's stages, scaled; Period a job's pace.
	Stages []Stage       `json:"stages"`
	Period time.Duration `json:"period"`
	Paths  []string      `json:"paths"`
	Size   int64         `json:"size"`
	Starts []int64       `json:"starts"` // per job: open, its first file; read, its first block
	Block  int64         `json:"block,omitempty"`
	Vector int           `json:"vector,omitempty"`
	PerJob int           `json:"per_job"` // samples each job keeps at most
}

// Stage is one stage of a ramp: Jobs jobs from Start to End (since the
// run's start).
type Stage struct {
	Start time.Duration `json:"start"`
	End   time.Duration `json:"end"`
	Jobs  int           `json:"jobs"`
}

// Jobs is the number of jobs at the end of the ramp.
func (p *PacedTest) Jobs() int { return p.Stages[len(p.Stages)-1].Jobs }

// End is when the last stage ends, since the run's start.
func (p *PacedTest) End() time.Duration { return p.Stages[len(p.Stages)-1].End }

func (p *PacedTest) plan() []stepPlan {
	out := make([]stepPlan, len(p.Stages))
	for i, s := range p.Stages {
		out[i] = stepPlan{start: s.Start, end: s.End, jobs: s.Jobs}
	}
	return out
}

func stagesOf(plan []stepPlan) []Stage {
	out := make([]Stage, len(plan))
	for i, s := range plan {
		out[i] = Stage{Start: s.start, End: s.end, Jobs: s.jobs}
	}
	return out
}

// op is what job j does for its n-th tick, on t: the same operation on
// every node, since the files and starting points are the test's.
func (p *PacedTest) op(t *Target, jobs []int) (pacedOp, error) {
	fs := t.newFileSet("", "", 0, p.Size, false)
	fs.paths = p.Paths
	if t.base != nil {
		for _, q := range p.Paths {
			fs.urls = append(fs.urls, t.fileURL(q))
		}
	}
	switch p.Kind {
	case "open":
		openers := make(map[int]*opener, len(jobs))
		for _, j := range jobs {
			openers[j] = t.newOpener()
		}
		return func(ctx context.Context, j, n int) (int64, error) {
			i := int((p.Starts[j] + int64(n)) % int64(len(fs.paths)))
			_, err := openers[j].open(ctx, fs.paths[i], fs.url(i))
			return 0, err
		}, nil
	case "read":
		nblocks := max(p.Size/p.Block, 1)
		return func(ctx context.Context, j, n int) (int64, error) {
			i := j % len(fs.paths)
			off := ((p.Starts[j] + int64(n)) % nblocks) * p.Block
			if p.Vector <= 1 {
				return t.readRange(ctx, fs.paths[i], fs.url(i), off, p.Block)
			}
			return t.vectorRead(ctx, fs.paths[i], fs.url(i), fs.size, off, p.Block, p.Vector)
		}, nil
	}
	return nil, fmt.Errorf("bench: %q is not a paced test", p.Kind)
}

// Run runs the jobs given of p on t, on the schedule of a run that
// started at start (now, or a time every agent of a run was given): each
// does its operation every Period from its start until the plan's end.
// It returns what each job saw, in the order of jobs.
func (p *PacedTest) Run(ctx context.Context, t *Target, jobs []int, start time.Time, cnt *counters) ([]JobRecord, error) {
	op, err := p.op(t, jobs)
	if err != nil {
		return nil, err
	}
	if cnt == nil {
		cnt = &counters{}
	}
	recs := runJobs(ctx, p.PerJob, p.Kind, p.plan(), p.Period, op, cnt, start, jobs)
	out := make([]JobRecord, len(recs))
	for x, r := range recs {
		out[x] = JobRecord{Job: jobs[x], Samples: r.samples, Missed: r.missed}
	}
	return out, nil
}

// JobRecord is what one job saw: its samples, and the ticks it skipped
// because it was late (seconds since the run's start).
type JobRecord struct {
	Job     int
	Samples []results.Sample
	Missed  []float64
}

// MissedKind is the sample kind a job's skipped tick is stored as when
// the jobs of a run ran on several nodes: the stages count a job that
// skipped ticks as not sustained.
const MissedKind = "missed"

// Samples returns recs' samples and skipped ticks as stored samples of
// node.
func Samples(recs []JobRecord, node string) []results.Sample {
	var out []results.Sample
	for _, r := range recs {
		for _, s := range r.Samples {
			s.Node = node
			out = append(out, s)
		}
		for _, t := range r.Missed {
			out = append(out, results.Sample{T: t, Kind: MissedKind, Job: r.Job, Node: node})
		}
	}
	return out
}

// Finish makes the result of p's run from the samples of every job
// (Samples, from every node) — its stages and summary — as a run on one
// node does.
func (p *PacedTest) Finish(res *Result, samples []results.Sample) {
	recs := make([]jobRecord, p.Jobs())
	for _, s := range samples {
		if s.Job < 0 || s.Job >= len(recs) {
			continue
		}
		if s.Kind == MissedKind {
			recs[s.Job].missed = append(recs[s.Job].missed, s.T)
			continue
		}
		recs[s.Job].samples = append(recs[s.Job].samples, s)
	}
	p.finish(res, recs)
	res.Samples = slices.DeleteFunc(slices.Clone(samples), func(s results.Sample) bool { return s.Kind == MissedKind })
}

// finish fills res's stages, samples and summary from recs.
func (p *PacedTest) finish(res *Result, recs []jobRecord) {
	plan := p.plan()
	switch p.Kind {
	case "open":
		res.Steps = aggregateSteps(plan, recs, p.Period, func(jobs int) float64 {
			return float64(jobs) / p.Period.Seconds()
		}, false)
		res.Samples = flatten(recs)
		o := res.Params.(OpenOptions)
		res.Summary = summarizeOpen(res, o.speed())
	case "read":
		res.Steps = aggregateSteps(plan, recs, p.Period, func(jobs int) float64 {
			return float64(jobs) * float64(p.Block) / p.Period.Seconds()
		}, true)
		res.Samples = flatten(recs)
		o := res.Params.(ReadOptions)
		res.Summary = summarizeRead(res, &o)
	}
}
