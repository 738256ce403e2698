package bench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/url"
	"slices"
	"time"

	"github.com/lakefed/lakefed/internal/httpx"
)

// ReadOptions shape the read-rate test (the CMS AAA read scale test).
type ReadOptions struct {
	Common
	Ramp
	// Period is how often each job reads a block (0: 10s).
	Period time.Duration `json:"period"`
	// Block is how many bytes each read moves (0: 2.5 MiB).
	Block int64 `json:"block"`
	// Vector splits each block into this many ranges spread over the
	// file, fetched in one multi-range request (0 or 1: one plain range).
	Vector int `json:"vector"`
	// Files is the size of the fresh file set (0: one per job, at most
	// 100); job j reads file j mod Files, from its own starting offset.
	Files int `json:"files"`
	// FileSize is the size of each fresh file (0: 8 blocks).
	FileSize int64 `json:"file_size"`
	// TargetJobs is how many jobs must be sustained for "ok" (0: Jobs).
	TargetJobs int `json:"target_jobs"`
}

// ReadDefaults are the AAA read test's numbers: 600 jobs each reading
// 2.5 MiB every 10 s (150 MB/s in all), 50 jobs added every 60 s, the
// full load held for 120 s.
func ReadDefaults() ReadOptions {
	return ReadOptions{
		Ramp:   Ramp{Jobs: 600, Step: 50, Every: 60 * time.Second, Hold: 120 * time.Second},
		Period: 10 * time.Second,
		Block:  5 << 19, // 2.5 MiB
	}
}

func (o *ReadOptions) fill() {
	d := ReadDefaults()
	if o.Jobs <= 0 {
		o.Jobs = d.Jobs
	}
	if o.Every <= 0 {
		o.Every = d.Every
	}
	if o.Period <= 0 {
		o.Period = d.Period
	}
	if o.Block <= 0 {
		o.Block = d.Block
	}
	if o.Vector < 1 {
		o.Vector = 1
	}
	if o.Files <= 0 {
		o.Files = min(o.Jobs, 100)
	}
	if o.FileSize <= 0 {
		o.FileSize = 8 * o.Block
	}
	if o.TargetJobs <= 0 {
		o.TargetJobs = o.Jobs
	}
}

// ReadSummary is the read test's result.
type ReadSummary struct {
	Speed float64 `json:"speed"`
	// Jobs is the job count at the end of the ramp; TargetJobs how many
	// must be sustained.
	Jobs       int `json:"jobs"`
	TargetJobs int `json:"target_jobs"`
	// Sustained is the most jobs that kept their pace (no missed tick,
	// no failure, no read longer than the period) in one stage, and
	// SustainedLast the count in the last (full-load) stage.
	Sustained     int `json:"sustained"`
	SustainedLast int `json:"sustained_last"`
	// Block and Vector are the read shape.
	Block  int64 `json:"block"`
	Vector int   `json:"vector"`
	// MeanBlockTime is the mean time to read one block (s), over all
	// successful reads; P50/P90/P99 its percentiles.
	MeanBlockTime float64 `json:"mean_block_time"`
	P50           float64 `json:"p50"`
	P90           float64 `json:"p90"`
	P99           float64 `json:"p99"`
	// ExpectedRate and ObservedRate are bytes/s in the last stage.
	ExpectedRate float64 `json:"expected_rate"`
	ObservedRate float64 `json:"observed_rate"`
	// IOWait is the fraction of the jobs' time spent waiting for reads
	// in the last stage.
	IOWait float64 `json:"io_wait"`
	// Reads, Failures and FailFrac count every read.
	Reads    int64   `json:"reads"`
	Failures int64   `json:"failures"`
	FailFrac float64 `json:"fail_frac"`
	Bytes    int64   `json:"bytes"`
	FirstErr string  `json:"first_err,omitempty"`
	// Fleet is what each node did, for a run handed out to agents.
	Fleet *FleetReport `json:"fleet,omitempty"`
}

// Read runs the read-rate test against t: jobs that each read Block
// bytes every Period from their own file (as one range, or as Vector
// ranges in one multi-range request), ramped.
func Read(ctx context.Context, t *Target, o ReadOptions) (*Result, error) {
	p, cleanup, err := PrepareRead(ctx, t, &o)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	return p.runHere(ctx, t, o.Progress, o)
}

// PrepareRead makes the read test of o ready to run on t (its files
// written; o's defaults filled) and returns it with the function that
// removes its fresh files.
func PrepareRead(ctx context.Context, t *Target, o *ReadOptions) (*PacedTest, func(), error) {
	o.fill()
	if o.Vector > 1 && o.Block/int64(o.Vector) < 1 {
		return nil, nil, fmt.Errorf("bench: block %d too small for %d ranges", o.Block, o.Vector)
	}
	rng := o.rng()
	fs, err := t.openFiles(ctx, &o.Common, o.Files, o.FileSize, rng, "read")
	if err != nil {
		return nil, nil, err
	}
	o.Files, o.FileSize = len(fs.paths), fs.size
	cleanup := t.cleanup(ctx, fs, o.Keep)
	if o.Block > fs.size {
		cleanup()
		return nil, nil, fmt.Errorf("bench: block %d larger than the files (%d bytes)", o.Block, fs.size)
	}
	plan := o.Ramp.plan(&o.Common)
	p := &PacedTest{Kind: "read", Stages: stagesOf(plan), Period: o.scale(o.Period), Paths: fs.paths, Size: fs.size,
		Starts: make([]int64, o.Jobs), Block: o.Block, Vector: o.Vector, PerJob: perJob(&o.Common, plan)}
	// Each job starts at its own offset so jobs sharing a file do not
	// read the same bytes at once.
	nblocks := fs.size / o.Block
	for j := range p.Starts {
		p.Starts[j] = rng.Int64N(max(nblocks, 1))
	}
	return p, cleanup, nil
}

// vectorRead reads block bytes as k equal ranges spread evenly over the
// file from off on (wrapping), in one multi-range request, as a job
// reading scattered baskets does.
func (t *Target) vectorRead(ctx context.Context, p string, u *url.URL, size, off, block int64, k int) (int64, error) {
	each := block / int64(k)
	stride := size / int64(k)
	rs := make([]httpx.Range, 0, k)
	for i := range int64(k) {
		o := (off + i*stride) % size
		if o+each > size {
			o = size - each
		}
		rs = append(rs, httpx.Range{Start: o, Length: each})
	}
	// Spread ranges of one stride never overlap; sort them for servers
	// that want ascending ranges.
	slices.SortFunc(rs, func(a, b httpx.Range) int { return cmp.Compare(a.Start, b.Start) })
	rs = dedupe(rs)
	var got int64
	err := t.readRanges(ctx, p, u, rs, func(_ int64, r io.Reader) error {
		n, err := drain(r)
		got += n
		return err
	})
	if err == nil {
		var want int64
		for _, r := range rs {
			want += r.Length
		}
		if got != want {
			err = fmt.Errorf("bench: vector read %s: %d bytes, want %d", p, got, want)
		}
	}
	return got, err
}

// dedupe drops ranges that overlap the one before (sorted input).
func dedupe(rs []httpx.Range) []httpx.Range {
	out := rs[:0]
	for _, r := range rs {
		if n := len(out); n > 0 && r.Start < out[n-1].Start+out[n-1].Length {
			continue
		}
		out = append(out, r)
	}
	return out
}

func summarizeRead(res *Result, o *ReadOptions) *ReadSummary {
	s := &ReadSummary{Speed: o.speed(), Jobs: o.Jobs, TargetJobs: o.TargetJobs, Block: o.Block, Vector: o.Vector}
	for _, st := range res.Steps {
		s.Reads += st.Ops
		s.Failures += st.Failures
		s.Sustained = max(s.Sustained, st.Sustained)
	}
	if n := len(res.Steps); n > 0 {
		last := res.Steps[n-1]
		s.SustainedLast, s.ExpectedRate, s.ObservedRate, s.IOWait = last.Sustained, last.Expected, last.Observed, last.IOWait
	}
	if s.Reads > 0 {
		s.FailFrac = float64(s.Failures) / float64(s.Reads)
	}
	var d []float64
	for _, sm := range res.Samples {
		s.Bytes += sm.Bytes
		if sm.OK {
			d = append(d, sm.Value)
		} else if s.FirstErr == "" {
			s.FirstErr = sm.Err
		}
	}
	slices.Sort(d)
	s.MeanBlockTime = mean(d)
	s.P50, s.P90, s.P99 = percentile(d, 0.5), percentile(d, 0.9), percentile(d, 0.99)
	return s
}
