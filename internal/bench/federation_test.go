package bench

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/config"
	"github.com/lakefed/lakefed/internal/federation"
)

// TestFederator runs every benchmark, short, through a federator in front
// of two storage sites: unpinned (writes placed by the federator, reads
// redirected) and pinned to one site with --site, as the AAA tests pinned
// one site through the redirectors.
func TestFederator(t *testing.T) {
	ctx := context.Background()
	urlA, rootA := startStorage(t)
	urlB, rootB := startStorage(t)
	cfg, err := config.Parse([]byte("listen: 127.0.0.1:0\nfederation:\n  health: {interval: 1h}\n  endpoints:\n" +
		"    - {name: site-a, url: '" + urlA + "', writable: true, priority: 1}\n" +
		"    - {name: site-b, url: '" + urlB + "', writable: true, priority: 2}\n"))
	if err != nil {
		t.Fatal(err)
	}
	fed, err := federation.New(ctx, *cfg.Federation, federation.Options{Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fed.Close() })
	front := httptest.NewServer(fed.Handler())
	t.Cleanup(front.Close)

	for _, tc := range []struct {
		site string
		root string // where the files must land
	}{
		{"", rootA},       // placement: the writable site of best priority
		{"site-b", rootB}, // pinned
	} {
		t.Run("site="+tc.site, func(t *testing.T) {
			tg, err := NewTarget(ctx, TargetConfig{URL: front.URL + "/", Site: tc.site, Timeout: 10 * time.Second,
				NewEndpoint: newEndpoint})
			if err != nil {
				t.Fatalf("NewTarget = %v", err)
			}
			defer tg.Close()
			if _, err := Prepare(ctx, tg, PrepareOptions{OpenFiles: 20, ReadFiles: 4, ReadSize: 1 << 20,
				ROOTEvents: 3000, Common: Common{Seed: 9}}); err != nil {
				t.Fatalf("Prepare = %v", err)
			}
			if _, err := os.Stat(filepath.Join(tc.root, "lakefed-bench", "root", "sample.root")); err != nil {
				t.Errorf("prepare through the federator did not land on the expected site: %v", err)
			}
			io, err := IO(ctx, tg, IOOptions{Size: 3<<20 + 1})
			if err != nil || !io.Summary.(*IOSummary).Verified {
				t.Errorf("IO = %v, %+v; want a verified round trip", err, io)
			}
			open, err := Open(ctx, tg, fastOpen())
			if err != nil {
				t.Fatalf("Open = %v", err)
			}
			if s := open.Summary.(*OpenSummary); s.Opens == 0 || s.Failures != 0 {
				t.Errorf("open: opens %d failures %d (%s)", s.Opens, s.Failures, s.FirstErr)
			}
			read, err := Read(ctx, tg, ReadOptions{Common: Common{Speed: 200, Reuse: true},
				Ramp: Ramp{Jobs: 4, Every: 60 * time.Second}, Block: 128 << 10, Vector: 4})
			if err != nil {
				t.Fatalf("Read = %v", err)
			}
			if s := read.Summary.(*ReadSummary); s.Reads == 0 || s.Failures != 0 || s.Bytes != s.Reads*(128<<10) {
				t.Errorf("read: reads %d failures %d bytes %d (%s)", s.Reads, s.Failures, s.Bytes, s.FirstErr)
			}
			for _, pf := range []bool{false, true} {
				res, err := ROOT(ctx, tg, ROOTOptions{Prefetch: pf})
				if err != nil {
					t.Fatalf("ROOT(prefetch=%v) = %v", pf, err)
				}
				if s := res.Summary.(*ROOTSummary); s.Entries != 3000 {
					t.Errorf("ROOT(prefetch=%v) entries = %d, want 3000", pf, s.Entries)
				}
			}
		})
	}
}
