package bench

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/config"
	"github.com/lakefed/lakefed/internal/server/servertest"
)

// TestFederator runs every benchmark, short, through a federator in front
// of two storage sites (a federation in a box, servertest: site-a
// priority 1, site-b priority 2, both writable): unpinned (writes placed by the federator, reads
// redirected) and pinned to one site with --site, as the AAA tests pinned
// one site through the redirectors.
func TestFederator(t *testing.T) {
	ctx := context.Background()
	fed := servertest.Start(t, servertest.Options{Sites: 2, Configure: func(c *config.Config) {
		c.Federation.Health.Interval = config.Duration(time.Hour)
	}})
	rootA, rootB := fed.Sites[0].Dir, fed.Sites[1].Dir

	for _, tc := range []struct {
		site string
		root string // where the files must land
	}{
		{"", rootA},       // placement: the writable site of best priority
		{"site-b", rootB}, // pinned
	} {
		t.Run("site="+tc.site, func(t *testing.T) {
			tg, err := NewTarget(ctx, TargetConfig{URL: fed.URL + "/", Site: tc.site, Timeout: 10 * time.Second,
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
