package bench

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"go-hep.org/x/hep/groot/riofs"
	"go-hep.org/x/hep/groot/rtree"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/httpx"
	"github.com/lakefed/lakefed/internal/results"
)

// ROOTOptions shape the ROOT read test.
type ROOTOptions struct {
	Common
	// File is the ROOT file's path under the target (""): the prepared
	// sample, Root/root/sample.root).
	File string `json:"file"`
	// Tree and Branch name what to read ("": SampleTree, SampleBranch).
	Tree   string `json:"tree"`
	Branch string `json:"branch"`
	// Prefetch gathers the branch's baskets into multi-range requests
	// before they are needed, as ROOT's TTreeCache does.
	Prefetch bool `json:"prefetch"`
	// PrefetchBytes bounds one multi-range request (0: 4 MiB), and
	// PrefetchRanges its ranges (0: 64; servers limit them, lakefed's
	// storage role to 100).
	PrefetchBytes  int64 `json:"prefetch_bytes"`
	PrefetchRanges int   `json:"prefetch_ranges"`
}

// SamplePath is where prepare puts the sample ROOT file.
const SamplePath = Root + "/root/sample.root"

// ROOTSummary is the ROOT test's result: times and the I/O pattern.
type ROOTSummary struct {
	File     string `json:"file"`
	Branch   string `json:"branch"`
	Prefetch bool   `json:"prefetch"`
	// OpenTime is the time to open the file and find the tree (s);
	// ReadTime the time to read the branch through (s).
	OpenTime float64 `json:"open_time"`
	ReadTime float64 `json:"read_time"`
	// Entries read and Values (jet_pt values) seen; Sum is their sum, a
	// check that two runs read the same data.
	Entries int64   `json:"entries"`
	Values  int64   `json:"values"`
	Sum     float64 `json:"sum"`
	// Calls is the number of requests sent to the server; MedianSize and
	// MeanSize their sizes in bytes; BytesRead their total; FileSize the
	// file's; ReadFraction BytesRead / FileSize.
	Calls        int     `json:"calls"`
	MedianSize   float64 `json:"median_size"`
	MeanSize     float64 `json:"mean_size"`
	BytesRead    int64   `json:"bytes_read"`
	FileSize     int64   `json:"file_size"`
	ReadFraction float64 `json:"read_fraction"`
	// ReaderCalls is how many reads groot made of the file;
	// PrefetchRequests and PrefetchRanges the multi-range requests and the
	// baskets they carried (0 without Prefetch).
	ReaderCalls      int `json:"reader_calls"`
	PrefetchRequests int `json:"prefetch_requests"`
	PrefetchRanges   int `json:"prefetch_ranges"`
	// Cache is how the server saw the run's reads when it is a lakefed
	// cache (its /api/cache/files); nil for any other server.
	Cache *CacheSaw `json:"cache,omitempty"`
}

// ROOT opens a ROOT file on t through a ranged reader that counts every
// request, and reads one branch through, with or without a TTreeCache-like
// prefetch.
func ROOT(ctx context.Context, t *Target, o ROOTOptions) (*Result, error) {
	if o.File == "" {
		o.File = SamplePath
	}
	if o.Tree == "" {
		o.Tree = SampleTree
	}
	if o.Branch == "" {
		o.Branch = SampleBranch
	}
	if o.PrefetchBytes <= 0 {
		o.PrefetchBytes = 4 << 20
	}
	if o.PrefetchRanges <= 0 {
		o.PrefetchRanges = 64
	}
	res := &Result{Kind: "root", Target: t.raw, Site: t.site, Params: o, Started: time.Now()}
	t.served.reset()
	s := &ROOTSummary{File: o.File, Branch: o.Branch, Prefetch: o.Prefetch}
	res.Summary = s
	var stage = "open"
	var mu sync.Mutex
	stop := showProgress(o.Progress, func() string {
		mu.Lock()
		defer mu.Unlock()
		return fmt.Sprintf("root: %s %s", stage, o.File)
	})
	defer stop()

	// A cache in front of the file counts every read; what it counted
	// before the run is taken off after it.
	var cacheBefore cachePattern
	cached := false
	if t.base != nil {
		cacheBefore, cached = t.cachePattern(ctx, t.fileURL(o.File))
	}

	t0 := time.Now()
	size, err := t.stat(ctx, o.File)
	if err != nil {
		return nil, fmt.Errorf("bench: root: %w", err)
	}
	rr := &rangeReader{ctx: ctx, t: t, p: o.File, size: size, start: res.Started}
	if t.base != nil {
		rr.u = t.fileURL(o.File)
	}
	f, err := riofs.NewReader(rr)
	if err != nil {
		return nil, fmt.Errorf("bench: root: open %s: %w", o.File, err)
	}
	defer f.Close()
	obj, err := riofs.Dir(f).Get(o.Tree)
	if err != nil {
		return nil, fmt.Errorf("bench: root: %s: %w", o.File, err)
	}
	tree, ok := obj.(rtree.Tree)
	if !ok {
		return nil, fmt.Errorf("bench: root: %s in %s is a %T, not a tree", o.Tree, o.File, obj)
	}
	br := tree.Branch(o.Branch)
	if br == nil {
		return nil, fmt.Errorf("bench: root: no branch %q in %s", o.Branch, o.Tree)
	}
	s.OpenTime = time.Since(t0).Seconds()
	res.Samples = append(res.Samples, results.Sample{T: t0.Sub(res.Started).Seconds(), Kind: "root-open",
		Value: s.OpenTime, OK: true})

	mu.Lock()
	stage = "read " + o.Branch
	mu.Unlock()
	t1 := time.Now()
	if o.Prefetch {
		spans := basketSpans(br)
		if lc := leafCountBranch(br); lc != nil {
			spans = append(spans, basketSpans(lc)...)
		}
		rr.plan(spans, o.PrefetchBytes, o.PrefetchRanges)
		s.PrefetchRequests, s.PrefetchRanges = len(rr.batches), len(spans)
	}
	if err := readBranch(tree, br, s); err != nil {
		return nil, fmt.Errorf("bench: root: read %s: %w", o.Branch, err)
	}
	s.ReadTime = time.Since(t1).Seconds()
	res.Samples = append(res.Samples, results.Sample{T: t1.Sub(res.Started).Seconds(), Kind: "root-read",
		Value: s.ReadTime, OK: true})

	rr.mu.Lock()
	sizes := slices.Clone(rr.sizes)
	s.ReaderCalls = rr.readerCalls
	res.Samples = append(res.Samples, rr.samples...)
	rr.mu.Unlock()
	s.Calls = len(sizes)
	fs := make([]float64, len(sizes))
	for i, n := range sizes {
		fs[i] = float64(n)
		s.BytesRead += n
	}
	slices.Sort(fs)
	s.MedianSize, s.MeanSize = percentile(fs, 0.5), mean(fs)
	s.FileSize = size
	if size > 0 {
		s.ReadFraction = float64(s.BytesRead) / float64(size)
	}
	res.Ended = time.Now()
	if cached {
		if after, ok := t.cachePattern(ctx, t.fileURL(o.File)); ok {
			s.Cache = cacheSaw(cacheBefore, after)
		}
	}
	res.Site = t.servedSite(context.WithoutCancel(ctx))
	return res, nil
}

// readBranch reads br of tree through, summing its float values.
func readBranch(tree rtree.Tree, br rtree.Branch, s *ROOTSummary) error {
	leaves := br.Leaves()
	if len(leaves) != 1 {
		return fmt.Errorf("branch %q has %d leaves, want 1", br.Name(), len(leaves))
	}
	rv := rtree.ReadVar{Name: br.Name()}
	var (
		sl32 []float32
		sl64 []float64
		f32  float32
		f64  float64
	)
	leaf := leaves[0]
	tn := leaf.TypeName()
	is32, is64 := tn == "float" || tn == "float32", tn == "double" || tn == "float64"
	switch {
	case leaf.LeafCount() != nil && is32:
		rv.Value = &sl32
	case leaf.LeafCount() != nil && is64:
		rv.Value = &sl64
	case is32:
		rv.Value = &f32
	case is64:
		rv.Value = &f64
	default:
		return fmt.Errorf("branch %q holds %s; the test reads float and double branches", br.Name(), tn)
	}
	r, err := rtree.NewReader(tree, []rtree.ReadVar{rv})
	if err != nil {
		return err
	}
	defer r.Close()
	return r.Read(func(rtree.RCtx) error {
		s.Entries++
		switch {
		case rv.Value == &sl32:
			for _, v := range sl32 {
				s.Sum += float64(v)
			}
			s.Values += int64(len(sl32))
		case rv.Value == &sl64:
			for _, v := range sl64 {
				s.Sum += v
			}
			s.Values += int64(len(sl64))
		case rv.Value == &f32:
			s.Sum += float64(f32)
			s.Values++
		default:
			s.Sum += f64
			s.Values++
		}
		return nil
	})
}

// leafCountBranch returns the branch holding the counts of a jagged
// branch (njet for jet_pt), which reading the branch reads too, or nil.
func leafCountBranch(br rtree.Branch) rtree.Branch {
	for _, l := range br.Leaves() {
		if lc := l.LeafCount(); lc != nil && lc.Branch() != nil && lc.Branch() != br {
			return lc.Branch()
		}
	}
	return nil
}

// basketSpans returns where br's baskets are in the file. groot keeps
// the basket table (TBranch's fBasketSeek and fBasketBytes) unexported,
// so it is read by reflection; a future groot that renames the fields
// makes the prefetch find no baskets (the test then reads without it)
// rather than fail.
func basketSpans(br rtree.Branch) []httpx.Range {
	v := reflect.ValueOf(br)
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return nil
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return nil
	}
	seek, bytes := v.FieldByName("basketSeek"), v.FieldByName("basketBytes")
	if !seek.IsValid() || !bytes.IsValid() || seek.Kind() != reflect.Slice || bytes.Kind() != reflect.Slice {
		return nil
	}
	var out []httpx.Range
	for i := range min(seek.Len(), bytes.Len()) {
		off, n := seek.Index(i).Int(), bytes.Index(i).Int()
		if off > 0 && n > 0 {
			out = append(out, httpx.Range{Start: off, Length: n})
		}
	}
	return out
}

// rangeReader is the io.Reader+io.ReaderAt+io.Closer groot reads the file
// through: every ReadAt is a ranged GET (or endpoint Open), counted,
// unless a prefetched batch holds its bytes. Safe for concurrent ReadAt
// (groot reads baskets ahead in goroutines).
type rangeReader struct {
	ctx   context.Context // the run's: the reader lives only as long as the run
	t     *Target
	p     string
	u     *url.URL
	size  int64
	start time.Time

	// batches are the planned multi-range requests, spans the ranges
	// they hold sorted by offset with the batch each belongs to.
	batches []*batch
	spans   []plannedSpan

	mu          sync.Mutex // guards the fields below
	pos         int64      // for Read
	readerCalls int
	sizes       []int64 // bytes of each request sent
	samples     []results.Sample
}

type plannedSpan struct {
	httpx.Range
	b *batch
}

// batch is one multi-range request, fetched once on first need.
type batch struct {
	ranges []httpx.Range
	once   sync.Once
	bufs   map[int64][]byte // by range offset
	err    error
}

// plan groups spans (sorted, merged when they touch) into batches of at
// most maxBytes and maxRanges.
func (r *rangeReader) plan(spans []httpx.Range, maxBytes int64, maxRanges int) {
	slices.SortFunc(spans, func(a, b httpx.Range) int {
		switch {
		case a.Start < b.Start:
			return -1
		case a.Start > b.Start:
			return 1
		}
		return 0
	})
	spans = dedupe(spans)
	var cur *batch
	var curBytes int64
	for _, sp := range spans {
		if cur == nil || len(cur.ranges) >= maxRanges || curBytes+sp.Length > maxBytes {
			cur = &batch{}
			curBytes = 0
			r.batches = append(r.batches, cur)
		}
		cur.ranges = append(cur.ranges, sp)
		curBytes += sp.Length
		r.spans = append(r.spans, plannedSpan{Range: sp, b: cur})
	}
}

func (b *batch) fetch(r *rangeReader) {
	b.bufs = make(map[int64][]byte, len(b.ranges))
	t0 := time.Now()
	var total int64
	err := r.t.readRanges(r.ctx, r.p, r.u, b.ranges, func(off int64, body io.Reader) error {
		i := sort.Search(len(b.ranges), func(i int) bool { return b.ranges[i].Start >= off })
		if i == len(b.ranges) || b.ranges[i].Start != off {
			return fmt.Errorf("bench: %s: unasked range at %d: %w", r.p, off, endpoint.ErrUnavailable)
		}
		buf := make([]byte, b.ranges[i].Length)
		if _, err := io.ReadFull(body, buf); err != nil {
			return fmt.Errorf("bench: %s: short range at %d: %w", r.p, off, endpoint.ErrUnavailable)
		}
		b.bufs[off] = buf
		total += int64(len(buf))
		return nil
	})
	r.record(t0, "root-prefetch", total, err)
	b.err = err
}

func (r *rangeReader) record(t0 time.Time, kind string, n int64, err error) {
	s := results.Sample{T: t0.Sub(r.start).Seconds(), Kind: kind, Value: time.Since(t0).Seconds(), Bytes: n, OK: err == nil}
	if err != nil {
		s.Err = err.Error()
	}
	r.mu.Lock()
	r.sizes = append(r.sizes, n)
	r.samples = append(r.samples, s)
	r.mu.Unlock()
}

// ReadAt reads len(p) bytes at off, from a prefetched batch when one
// holds them, else with a ranged request.
func (r *rangeReader) ReadAt(p []byte, off int64) (int, error) {
	r.mu.Lock()
	r.readerCalls++
	r.mu.Unlock()
	if off >= r.size {
		return 0, io.EOF
	}
	want := int64(len(p))
	short := off+want > r.size
	if short {
		want = r.size - off
	}
	if n, ok := r.fromBatch(p[:want], off); ok {
		if short {
			return n, io.EOF
		}
		return n, nil
	}
	t0 := time.Now()
	var n int
	var err error
	if r.t.base == nil {
		var rc io.ReadCloser
		rc, err = r.t.ep.Open(r.ctx, r.p, off, want)
		if err == nil {
			n, err = io.ReadFull(rc, p[:want])
			rc.Close()
		}
	} else {
		var rc io.ReadCloser
		rc, err = r.t.getRange(r.ctx, r.p, r.u, off, want)
		if err == nil {
			n, err = io.ReadFull(rc, p[:want])
			rc.Close()
		}
	}
	r.record(t0, "root-read-call", int64(n), err)
	if err != nil {
		return n, fmt.Errorf("bench: read %s at %d: %w", r.p, off, err)
	}
	if short {
		return n, io.EOF
	}
	return n, nil
}

// fromBatch serves p from the batch planned for [off, off+len(p)), if
// any, fetching the batch on first use.
func (r *rangeReader) fromBatch(p []byte, off int64) (int, bool) {
	if len(r.spans) == 0 {
		return 0, false
	}
	i := sort.Search(len(r.spans), func(i int) bool { return r.spans[i].Start > off }) - 1
	if i < 0 {
		return 0, false
	}
	sp := r.spans[i]
	if off+int64(len(p)) > sp.Start+sp.Length {
		return 0, false
	}
	sp.b.once.Do(func() { sp.b.fetch(r) })
	if sp.b.err != nil {
		return 0, false // the plain read says what is wrong
	}
	buf := sp.b.bufs[sp.Start]
	return copy(p, buf[off-sp.Start:]), true
}

// Read reads from the current position (groot reads the header this way).
func (r *rangeReader) Read(p []byte) (int, error) {
	r.mu.Lock()
	pos := r.pos
	r.mu.Unlock()
	n, err := r.ReadAt(p, pos)
	r.mu.Lock()
	r.pos += int64(n)
	r.mu.Unlock()
	return n, err
}

// Close does nothing: requests hold no state between calls.
func (r *rangeReader) Close() error { return nil }

// prefetchNote describes the prefetch for the summary table.
func prefetchNote(s *ROOTSummary) string {
	if !s.Prefetch {
		return "off"
	}
	return strings.TrimSpace(fmt.Sprintf("%d multi-range requests, %d baskets", s.PrefetchRequests, s.PrefetchRanges))
}
