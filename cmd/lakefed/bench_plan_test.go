package main

import (
	"strings"
	"testing"
)

// TestBenchTellsCost: each test's -h names what a run with the defaults
// costs (time, operations, bytes) and its defaults in units, and a run
// prints its own plan on stderr before it starts.
func TestBenchTellsCost(t *testing.T) {
	url, _, _ := startStorage(t, nil)
	tests := []struct {
		name string
		args []string
		want []string // in stderr
	}{
		{"open help", []string{"bench", "open", "-h"}, []string{
			"With the defaults: open: 50 jobs (5 more every 30s), hold 1m0s: about 5m30s, 19500 opens; writes 3.91 MiB",
			"-file-size size", "(default 4KiB)"}},
		{"read help", []string{"bench", "read", "-h"}, []string{
			"With the defaults: read: 600 jobs (50 more every 1m0s), hold 2m0s, 2.5 MiB every 10s per job: about 13m0s",
			"reads 65.9 GiB", "(default 2.5MiB)"}},
		{"io help", []string{"bench", "io", "-h"}, []string{
			"With the defaults: io: one file of 1 GiB: writes 1 GiB, reads 1 GiB", "(default 1GiB)"}},
		{"io run", []string{"bench", "io", "--no-store", "--size", "64KiB", url}, []string{
			"bench io: one file of 64 KiB: writes 64 KiB, reads 64 KiB\n"}},
		{"open run", []string{"bench", "open", "--no-store", "--speed", "100", "--jobs", "2", "--ramp-step", "0", "--ramp-every", "10s",
			"--hold", "10s", "--files", "4", url}, []string{
			"bench open: 2 jobs at once, hold 10s: about 100ms, 40 opens; writes 16 KiB, reads 40 B\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustRun(t, tt.args...)
			for _, w := range tt.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("lakefed %q stderr lacks %q:\n%s", tt.args, w, r.stderr)
				}
			}
		})
	}
}
