package bench

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// TestRunDirRemoved: a run's fresh files go in Root/runs/<tag>/, and the
// directory goes with them at the end of the run, interrupted or not,
// over every way a target is reached.
func TestRunDirRemoved(t *testing.T) {
	url, root := startStorage(t)
	targets := []struct {
		name string
		cfg  TargetConfig
	}{
		{"http with endpoint", TargetConfig{URL: url, NewEndpoint: newEndpoint}},
		{"plain http", TargetConfig{URL: url}},
		{"posix", TargetConfig{URL: "file://" + root, NewEndpoint: newEndpoint}},
	}
	runs := []struct {
		name string
		run  func(ctx context.Context, tg *Target) error
	}{
		{"open", func(ctx context.Context, tg *Target) error {
			_, err := Open(ctx, tg, OpenOptions{Ramp: Ramp{Jobs: 2, Every: time.Second, Hold: time.Second},
				Files: 5, Common: Common{Speed: 20}})
			return err
		}},
		{"open interrupted", func(ctx context.Context, tg *Target) error {
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			var p cancelAfter
			p.cancel = cancel
			res, err := Open(ctx, tg, OpenOptions{Ramp: Ramp{Jobs: 2, Every: time.Hour, Hold: time.Hour},
				Files: 5, Common: Common{Speed: 20, Progress: &p}})
			if err == nil && !res.Canceled {
				t.Error("Open was not interrupted")
			}
			return err
		}},
		{"io", func(ctx context.Context, tg *Target) error {
			_, err := IO(ctx, tg, IOOptions{Size: 4096})
			return err
		}},
	}
	for _, tgc := range targets {
		for _, r := range runs {
			t.Run(tgc.name+"/"+r.name, func(t *testing.T) {
				ctx := t.Context()
				tg, err := NewTarget(ctx, tgc.cfg)
				if err != nil {
					t.Fatal(err)
				}
				defer tg.Close()
				if err := r.run(ctx, tg); err != nil {
					t.Fatal(err)
				}
				ents, err := os.ReadDir(filepath.Join(root, "lakefed-bench", "runs"))
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range ents {
					t.Errorf("the run left %s in %s/runs", e.Name(), Root)
				}
			})
		}
	}
}

// cancelAfter is a Progress that cancels the run at its first update that
// shows operations done: a run interrupted mid-way.
type cancelAfter struct {
	cancel context.CancelFunc
	n      atomic.Int32
}

func (p *cancelAfter) Update(line string) {
	if p.n.Add(1) >= 2 {
		p.cancel()
	}
}

func (p *cancelAfter) Done() {}
