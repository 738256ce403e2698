package bench

import (
	"strings"
	"testing"
	"time"
)

// TestPlan: the cost printed before a run is the defaults' real cost —
// the AAA open test about 5½ minutes, the read test 13 minutes and 66 GiB,
// the IO test 1 GiB each way — and --speed shortens the time, not the
// work.
func TestPlan(t *testing.T) {
	tests := []struct {
		name     string
		plan     Plan
		duration time.Duration
		ops      int64
		write    int64
		read     int64
		text     string
	}{
		{"open defaults", OpenDefaults().Plan(), 330 * time.Second, 19500, 1000 * 4096, 19500,
			"open: 50 jobs (5 more every 30s), hold 1m0s: about 5m30s, 19500 opens; writes 3.91 MiB, reads 19 KiB"},
		{"open at speed 10", withCommon(Common{Speed: 10}).Plan(), 33 * time.Second, 19500, 1000 * 4096, 19500,
			"about 33s"},
		{"open reusing files", withCommon(Common{Reuse: true}).Plan(), 330 * time.Second, 19500, 0, 19500,
			"about 5m30s, 19500 opens; reads 19 KiB"},
		{"read defaults", ReadDefaults().Plan(), 780 * time.Second, 27000, 100 * 8 * (5 << 19), 27000 * (5 << 19),
			"read: 600 jobs (50 more every 1m0s), hold 2m0s, 2.5 MiB every 10s per job: about 13m0s, 27000 block reads; writes 1.95 GiB, reads 65.9 GiB"},
		{"io defaults", IOOptions{}.Plan(), 0, 0, 1 << 30, 1 << 30, "io: one file of 1 GiB: writes 1 GiB, reads 1 GiB"},
		{"all jobs at once", OpenOptions{Ramp: Ramp{Jobs: 4, Hold: time.Minute}}.Plan(), time.Minute, 480, 1000 * 4096, 480,
			"open: 4 jobs at once, hold 1m0s: about 1m0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.plan
			if p.Duration != tt.duration || p.Ops != tt.ops || p.Write != tt.write || p.Read != tt.read {
				t.Errorf("Plan = %+v, want duration %v, %d ops, write %d, read %d", p, tt.duration, tt.ops, tt.write, tt.read)
			}
			if s := p.String(); !strings.Contains(s, tt.text) {
				t.Errorf("Plan.String() = %q, want it to contain %q", s, tt.text)
			}
		})
	}
}

func withCommon(c Common) OpenOptions {
	o := OpenDefaults()
	o.Common = c
	return o
}
