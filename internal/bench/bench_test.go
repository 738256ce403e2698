package bench

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"hash/adler32"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/results"
)

// memServer is a small storage server for the tests: GET/HEAD with
// ranges and multi-ranges (http.ServeContent), PUT, DELETE, an adler32
// Digest on request. It counts requests and can fail every n-th open.
type memServer struct {
	mu    sync.Mutex
	files map[string][]byte

	reqs     atomic.Int64
	failEach int64 // every failEach-th GET answers 503 (0: never)
	gets     atomic.Int64
	sites    sync.Map // lakefed.site values seen
}

func newMemServer(t *testing.T) (*memServer, *httptest.Server) {
	m := &memServer{files: map[string][]byte{}}
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	return m, srv
}

func (m *memServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.reqs.Add(1)
	if s := r.URL.Query().Get(SiteParam); s != "" {
		m.sites.Store(s, true)
	}
	p := r.URL.Path
	switch r.Method {
	case http.MethodPut:
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		m.mu.Lock()
		m.files[p] = b
		m.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	case http.MethodDelete:
		m.mu.Lock()
		_, ok := m.files[p]
		delete(m.files, p)
		m.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case http.MethodGet, http.MethodHead:
		if r.Method == http.MethodGet && m.failEach > 0 && m.gets.Add(1)%m.failEach == 0 {
			http.Error(w, "injected failure", http.StatusServiceUnavailable)
			return
		}
		m.mu.Lock()
		b, ok := m.files[p]
		m.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		if r.Header.Get("Want-Digest") != "" {
			w.Header().Set("Digest", fmt.Sprintf("adler32=%08x", adler32.Checksum(b)))
		}
		http.ServeContent(w, r, p, time.Time{}, bytes.NewReader(b))
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}

func (m *memServer) count(prefix string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for p := range m.files {
		if strings.HasPrefix(p, prefix) {
			n++
		}
	}
	return n
}

func newTarget(t testing.TB, url, site string) *Target {
	t.Helper()
	tg, err := NewTarget(context.Background(), TargetConfig{URL: url, Site: site, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("NewTarget(%q) = %v", url, err)
	}
	t.Cleanup(tg.Close)
	return tg
}

// fast are test options that run a ramp in well under a second.
func fastOpen() OpenOptions {
	return OpenOptions{
		Common: Common{Speed: 100, Seed: 1},
		Ramp:   Ramp{Jobs: 8, Step: 2, Every: 10 * time.Second, Hold: 20 * time.Second},
		Files:  40,
	}
}

func TestOpen(t *testing.T) {
	m, srv := newMemServer(t)
	tg := newTarget(t, srv.URL+"/data/", "site-a")
	res, err := Open(context.Background(), tg, fastOpen())
	if err != nil {
		t.Fatalf("Open = %v", err)
	}
	s := res.Summary.(*OpenSummary)
	if s.Opens == 0 || s.Failures != 0 {
		t.Fatalf("opens %d failures %d (%s), want some and none", s.Opens, s.Failures, s.FirstErr)
	}
	if got := len(res.Steps); got != 4 {
		t.Errorf("steps = %d, want 4 (2, 4, 6, 8 jobs)", got)
	}
	for i, st := range res.Steps {
		if want := 2 * (i + 1); st.Jobs != want {
			t.Errorf("step %d jobs = %d, want %d", i, st.Jobs, want)
		}
		// 2 Hz per job at speed 100.
		if want := float64(st.Jobs) * 200; st.Expected != want {
			t.Errorf("step %d expected = %g, want %g", i, st.Expected, want)
		}
	}
	if int64(len(res.Samples)) != s.Opens {
		t.Errorf("samples = %d, want %d", len(res.Samples), s.Opens)
	}
	if _, ok := m.sites.Load("site-a"); !ok {
		t.Errorf("no request carried %s=site-a", SiteParam)
	}
	if n := m.count("/data" + Root + "/runs/"); n != 0 {
		t.Errorf("%d fresh files left after the run, want 0", n)
	}
	if v := Classify(res, DefaultThresholds()); v.Class != OK {
		t.Errorf("Classify = %+v, want ok", v)
	}
}

func TestOpenFailures(t *testing.T) {
	m, srv := newMemServer(t)
	m.failEach = 4
	tg := newTarget(t, srv.URL+"/", "")
	res, err := Open(context.Background(), tg, fastOpen())
	if err != nil {
		t.Fatalf("Open = %v", err)
	}
	s := res.Summary.(*OpenSummary)
	if s.FailFrac < 0.15 || s.FailFrac > 0.35 {
		t.Errorf("fail fraction = %.3f, want about 0.25", s.FailFrac)
	}
	v := Classify(res, DefaultThresholds())
	if v.Class != ToDebug || !strings.Contains(strings.Join(v.Reasons, ";"), "failed") {
		t.Errorf("Classify = %+v, want to debug for failures", v)
	}
}

func TestOpenReuse(t *testing.T) {
	_, srv := newMemServer(t)
	tg := newTarget(t, srv.URL+"/", "")
	o := fastOpen()
	o.Reuse = true
	if _, err := Open(context.Background(), tg, o); err == nil {
		t.Fatal("Open with Reuse before prepare succeeded, want an error")
	}
	if _, err := Prepare(context.Background(), tg, PrepareOptions{OpenFiles: 30, ReadFiles: -1, ROOTEvents: -1}); err != nil {
		t.Fatalf("Prepare = %v", err)
	}
	res, err := Open(context.Background(), tg, o)
	if err != nil {
		t.Fatalf("Open = %v", err)
	}
	if got := res.Params.(OpenOptions).Files; got != 30 {
		t.Errorf("files used = %d, want the 30 prepared", got)
	}
	for _, sm := range res.Samples[:5] {
		if !sm.OK {
			t.Errorf("sample %+v failed", sm)
		}
	}
}

func TestRead(t *testing.T) {
	for _, vector := range []int{1, 4} {
		t.Run(fmt.Sprintf("vector=%d", vector), func(t *testing.T) {
			m, srv := newMemServer(t)
			tg := newTarget(t, srv.URL+"/", "")
			o := ReadOptions{
				Common: Common{Speed: 200, Seed: 2},
				Ramp:   Ramp{Jobs: 6, Step: 3, Every: 60 * time.Second, Hold: 60 * time.Second},
				Block:  64 << 10,
				Vector: vector,
				Files:  3,
			}
			res, err := Read(context.Background(), tg, o)
			if err != nil {
				t.Fatalf("Read = %v", err)
			}
			s := res.Summary.(*ReadSummary)
			if s.Reads == 0 || s.Failures != 0 {
				t.Fatalf("reads %d failures %d (%s)", s.Reads, s.Failures, s.FirstErr)
			}
			if s.Bytes != s.Reads*o.Block {
				t.Errorf("bytes = %d, want %d reads of %d", s.Bytes, s.Reads, o.Block)
			}
			if len(res.Steps) != 2 || res.Steps[1].Jobs != 6 {
				t.Errorf("steps = %+v, want 2 stages ending at 6 jobs", res.Steps)
			}
			if s.IOWait <= 0 || s.IOWait >= 1 {
				t.Errorf("io wait = %g, want in (0, 1)", s.IOWait)
			}
			if n := m.count(Root + "/runs/"); n != 0 {
				t.Errorf("%d fresh files left, want 0", n)
			}
		})
	}
}

func TestIO(t *testing.T) {
	m, srv := newMemServer(t)
	tg := newTarget(t, srv.URL+"/", "")
	res, err := IO(context.Background(), tg, IOOptions{Size: 3<<20 + 17, Common: Common{Seed: 3}})
	if err != nil {
		t.Fatalf("IO = %v", err)
	}
	s := res.Summary.(*IOSummary)
	if !s.Verified || s.Adler32 != s.ReadAdler32 || s.ServerAdler32 != s.Adler32 {
		t.Errorf("summary = %+v, want verified with matching sums", s)
	}
	if v := Classify(res, DefaultThresholds()); v.Class != OK {
		t.Errorf("Classify = %+v, want ok", v)
	}
	if n := m.count(Root); n != 0 {
		t.Errorf("%d files left, want 0", n)
	}
}

// corruptServer flips a byte of every GET body.
type corruptServer struct{ *memServer }

func (c corruptServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		c.memServer.ServeHTTP(w, r)
		return
	}
	rec := httptest.NewRecorder()
	c.memServer.ServeHTTP(rec, r)
	b := rec.Body.Bytes()
	if len(b) > 0 {
		b[len(b)/2] ^= 0xff
	}
	w.WriteHeader(rec.Code)
	w.Write(b)
}

func TestIOCorrupt(t *testing.T) {
	m := &memServer{files: map[string][]byte{}}
	srv := httptest.NewServer(corruptServer{m})
	defer srv.Close()
	tg := newTarget(t, srv.URL+"/", "")
	res, err := IO(context.Background(), tg, IOOptions{Size: 1 << 20})
	if err != nil {
		t.Fatalf("IO = %v", err)
	}
	if s := res.Summary.(*IOSummary); s.Verified {
		t.Errorf("Verified = true for a corrupted read back: %+v", s)
	}
	if v := Classify(res, DefaultThresholds()); v.Class != ToDebug {
		t.Errorf("Classify = %+v, want to debug", v)
	}
}

func TestROOT(t *testing.T) {
	m, srv := newMemServer(t)
	tg := newTarget(t, srv.URL+"/", "")
	man, err := Prepare(context.Background(), tg, PrepareOptions{OpenFiles: -1, ReadFiles: -1, ROOTEvents: 20000,
		Common: Common{Seed: 4}})
	if err != nil {
		t.Fatalf("Prepare = %v", err)
	}
	if man.ROOTFile != SamplePath || m.count(SamplePath) != 1 {
		t.Fatalf("manifest %+v, want the sample at %s", man, SamplePath)
	}
	var sums [2]*ROOTSummary
	for i, pf := range []bool{false, true} {
		res, err := ROOT(context.Background(), tg, ROOTOptions{Prefetch: pf})
		if err != nil {
			t.Fatalf("ROOT(prefetch=%v) = %v", pf, err)
		}
		sums[i] = res.Summary.(*ROOTSummary)
		if sums[i].Entries != 20000 || sums[i].Values == 0 {
			t.Errorf("prefetch=%v: %d entries, %d values, want 20000 and some", pf, sums[i].Entries, sums[i].Values)
		}
	}
	plain, pf := sums[0], sums[1]
	if plain.Sum != pf.Sum || plain.Values != pf.Values {
		t.Errorf("prefetch read other data: sum %g vs %g, values %d vs %d", plain.Sum, pf.Sum, plain.Values, pf.Values)
	}
	if pf.PrefetchRequests == 0 || pf.PrefetchRanges < 2 {
		t.Errorf("prefetch planned %d requests of %d ranges, want some", pf.PrefetchRequests, pf.PrefetchRanges)
	}
	if pf.Calls >= plain.Calls || pf.MeanSize <= plain.MeanSize {
		t.Errorf("prefetch: %d calls of mean %g, without: %d of mean %g; want fewer, larger",
			pf.Calls, pf.MeanSize, plain.Calls, plain.MeanSize)
	}
	t.Logf("without prefetch: %d calls, median %.0f B; with: %d calls, median %.0f B",
		plain.Calls, plain.MedianSize, pf.Calls, pf.MedianSize)
}

func TestNewTarget(t *testing.T) {
	for _, tc := range []struct {
		name, url, site string
		ok              bool
	}{
		{"http", "http://127.0.0.1:1/x", "", true},
		{"dav", "dav://127.0.0.1:1/x/", "s", true},
		{"no host", "http:///x", "", false},
		{"file without endpoint layer", "file:///tmp", "", false},
		{"site on file", "file:///tmp", "s", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewTarget(context.Background(), TargetConfig{URL: tc.url, Site: tc.site})
			if (err == nil) != tc.ok {
				t.Errorf("NewTarget(%q, site %q) = %v, want ok=%v", tc.url, tc.site, err, tc.ok)
			}
		})
	}
}

func TestStoreRoundTrip(t *testing.T) {
	ctx := context.Background()
	_, srv := newMemServer(t)
	tg := newTarget(t, srv.URL+"/", "")
	st, err := results.Open(ctx, t.TempDir()+"/bench.db")
	if err != nil {
		t.Fatalf("results.Open = %v", err)
	}
	defer st.Close()

	var ids []int64
	for range 2 {
		res, err := Open(ctx, tg, fastOpen())
		if err != nil {
			t.Fatalf("Open = %v", err)
		}
		v := Classify(res, DefaultThresholds())
		id, err := Save(ctx, st, res, v, "round trip")
		if err != nil {
			t.Fatalf("Save = %v", err)
		}
		ids = append(ids, id)
		got, err := st.Get(ctx, id)
		if err != nil {
			t.Fatalf("Get(%d) = %v", id, err)
		}
		if got.Kind != "open" || got.Classification != v.Class || got.Status != results.StatusDone || got.Label != "round trip" {
			t.Errorf("Get(%d) = %+v", id, got)
		}
		n, _ := st.Samples(ctx, id, results.SampleFilter{})
		if len(n) != len(res.Samples) {
			t.Errorf("stored %d samples, want %d", len(n), len(res.Samples))
		}
		steps, _ := st.Steps(ctx, id)
		if len(steps) != len(res.Steps) {
			t.Errorf("stored %d steps, want %d", len(steps), len(res.Steps))
		}
	}

	runs, err := st.List(ctx, results.Filter{Kind: "open"})
	if err != nil || len(runs) != 2 || runs[0].ID != ids[1] {
		t.Fatalf("List = %v, %v; want both runs, newest first", runs, err)
	}
	var out bytes.Buffer
	if err := WriteList(&out, runs); err != nil || !strings.Contains(out.String(), "Hz") {
		t.Errorf("WriteList = %v:\n%s", err, out.String())
	}
	out.Reset()
	steps, _ := st.Steps(ctx, ids[0])
	if err := WriteRun(&out, runs[1], steps); err != nil || !strings.Contains(out.String(), "open rate") {
		t.Errorf("WriteRun = %v:\n%s", err, out.String())
	}
	out.Reset()
	if err := WriteCompare(&out, runs); err != nil || !strings.Contains(out.String(), "observed_rate") {
		t.Errorf("WriteCompare = %v:\n%s", err, out.String())
	}

	out.Reset()
	if err := Export(ctx, st, ids[0], "json", &out); err != nil {
		t.Fatalf("Export json = %v", err)
	}
	var doc struct {
		Run     results.Run      `json:"run"`
		Steps   []results.Step   `json:"steps"`
		Samples []results.Sample `json:"samples"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("export json does not parse: %v", err)
	}
	if doc.Run.ID != ids[0] || len(doc.Steps) == 0 || len(doc.Samples) == 0 {
		t.Errorf("export json: run %d, %d steps, %d samples", doc.Run.ID, len(doc.Steps), len(doc.Samples))
	}
	out.Reset()
	if err := Export(ctx, st, ids[0], "csv", &out); err != nil {
		t.Fatalf("Export csv = %v", err)
	}
	rows, err := csv.NewReader(&out).ReadAll()
	if err != nil || len(rows) != len(doc.Samples)+1 || rows[0][0] != "run_id" {
		t.Errorf("export csv: %d rows, %v; want header + %d", len(rows), err, len(doc.Samples))
	}
	if err := Export(ctx, st, ids[0], "xml", io.Discard); err == nil {
		t.Error("Export xml succeeded, want an error")
	}

	sites, err := st.Sites(ctx)
	if err != nil || len(sites) != 1 || sites[0].Kind != "open" || sites[0].OK+sites[0].ToDebug != 2 {
		t.Errorf("Sites = %+v, %v", sites, err)
	}
	hist, err := st.SiteHistory(ctx, sites[0].Site, "open", 10)
	if err != nil || len(hist) != 2 || hist[0].ID != ids[0] {
		t.Errorf("SiteHistory = %v, %v; want both, oldest first", hist, err)
	}
	ts, vs, err := st.SampleSeries(ctx, ids[0], "open", "", 10)
	if err != nil || len(ts) == 0 || len(ts) > 10 || len(ts) != len(vs) {
		t.Errorf("SampleSeries = %d/%d points, %v; want 1..10", len(ts), len(vs), err)
	}
	if err := st.Delete(ctx, ids[0]); err != nil {
		t.Fatalf("Delete = %v", err)
	}
	if _, err := st.Get(ctx, ids[0]); err == nil {
		t.Error("Get after Delete succeeded")
	}
}
