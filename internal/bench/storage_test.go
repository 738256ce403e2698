package bench

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/endpoint/kinds"
	"github.com/lakefed/lakefed/internal/storage"
	"github.com/lakefed/lakefed/internal/storage/storagetest"
)

// startStorage runs lakefed's storage role on a loopback port and returns
// its base URL and directory.
func startStorage(t *testing.T) (string, string) {
	t.Helper()
	site := storagetest.Start(t, storage.Config{})
	return site.URL, site.Dir
}

func newEndpoint(ctx context.Context, cfg endpoint.Config) (endpoint.Endpoint, error) {
	return kinds.New(ctx, cfg, slog.New(slog.DiscardHandler))
}

// TestStorageRole runs every benchmark, short, against the storage role:
// over HTTP with writes through the endpoint layer, and the open and io
// tests through the posix kind (file://) as well.
func TestStorageRole(t *testing.T) {
	ctx := context.Background()
	url, root := startStorage(t)
	tg, err := NewTarget(ctx, TargetConfig{URL: url, NewEndpoint: newEndpoint})
	if err != nil {
		t.Fatalf("NewTarget = %v", err)
	}
	defer tg.Close()

	man, err := Prepare(ctx, tg, PrepareOptions{OpenFiles: 20, ReadFiles: 4, ReadSize: 1 << 20, ROOTEvents: 5000,
		Common: Common{Seed: 5}})
	if err != nil {
		t.Fatalf("Prepare = %v", err)
	}
	for _, p := range []string{"open/f00019", "read/r00003", "root/sample.root", "manifest.json"} {
		if _, err := os.Stat(filepath.Join(root, "lakefed-bench", p)); err != nil {
			t.Errorf("prepare left no %s: %v", p, err)
		}
	}
	if man.ReadFiles != 4 || man.ReadSize != 1<<20 {
		t.Errorf("manifest = %+v", man)
	}

	t.Run("io", func(t *testing.T) {
		res, err := IO(ctx, tg, IOOptions{Size: 5<<20 + 3})
		if err != nil {
			t.Fatalf("IO = %v", err)
		}
		s := res.Summary.(*IOSummary)
		if !s.Verified {
			t.Errorf("IO not verified: %+v", s)
		}
	})
	t.Run("open", func(t *testing.T) {
		res, err := Open(ctx, tg, fastOpen())
		if err != nil {
			t.Fatalf("Open = %v", err)
		}
		if s := res.Summary.(*OpenSummary); s.Opens == 0 || s.Failures != 0 {
			t.Errorf("opens %d failures %d (%s)", s.Opens, s.Failures, s.FirstErr)
		}
	})
	t.Run("read reuse vector", func(t *testing.T) {
		res, err := Read(ctx, tg, ReadOptions{Common: Common{Speed: 200, Reuse: true},
			Ramp: Ramp{Jobs: 4, Every: 60 * time.Second}, Block: 128 << 10, Vector: 8})
		if err != nil {
			t.Fatalf("Read = %v", err)
		}
		s := res.Summary.(*ReadSummary)
		if s.Reads == 0 || s.Failures != 0 || s.Bytes != s.Reads*(128<<10) {
			t.Errorf("reads %d failures %d bytes %d (%s)", s.Reads, s.Failures, s.Bytes, s.FirstErr)
		}
	})
	t.Run("root", func(t *testing.T) {
		var calls [2]int
		var sums [2]float64
		for i, pf := range []bool{false, true} {
			res, err := ROOT(ctx, tg, ROOTOptions{Prefetch: pf})
			if err != nil {
				t.Fatalf("ROOT(prefetch=%v) = %v", pf, err)
			}
			s := res.Summary.(*ROOTSummary)
			if s.Entries != 5000 {
				t.Errorf("entries = %d, want 5000", s.Entries)
			}
			calls[i], sums[i] = s.Calls, s.Sum
		}
		if calls[1] >= calls[0] || sums[0] != sums[1] {
			t.Errorf("calls %v sums %v: want fewer calls with prefetch and the same sum", calls, sums)
		}
	})
	t.Run("posix", func(t *testing.T) {
		ft, err := NewTarget(ctx, TargetConfig{URL: "file://" + root + "/", NewEndpoint: newEndpoint})
		if err != nil {
			t.Fatalf("NewTarget(file) = %v", err)
		}
		res, err := Open(ctx, ft, fastOpen())
		if err != nil {
			t.Fatalf("Open = %v", err)
		}
		if s := res.Summary.(*OpenSummary); s.Opens == 0 || s.Failures != 0 {
			t.Errorf("opens %d failures %d (%s)", s.Opens, s.Failures, s.FirstErr)
		}
		io, err := IO(ctx, ft, IOOptions{Size: 1 << 20})
		if err != nil || !io.Summary.(*IOSummary).Verified {
			t.Errorf("IO over file:// = %v, %+v", err, io)
		}
	})
	if left, _ := filepath.Glob(filepath.Join(root, "lakefed-bench", "runs", "*", "*")); len(left) != 0 {
		t.Errorf("fresh files left behind: %v", left)
	}
}
