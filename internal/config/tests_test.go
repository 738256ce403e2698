package config

import (
	"strings"
	"testing"
	"time"
)

const testsBase = `
federation:
  endpoints:
    - name: a
      url: http://127.0.0.1:9001/
`

func TestTestsSection(t *testing.T) {
	c, err := Parse([]byte(testsBase + "tests:\n  exclude_failing: true\n"))
	if err != nil {
		t.Fatalf("Parse = %v", err)
	}
	ts := c.Tests
	if ts == nil || ts.Interval.D() != time.Minute || ts.FailAfter != 3 || ts.MaxExcludedFraction != 0.5 ||
		ts.ProbePath != "/lakefed-probe" || ts.ProbeSize != 4096 || ts.MaxRequestsPerSecond != 5 || !ts.ExcludeFailing ||
		ts.Retention.D() != 7*24*time.Hour {
		t.Errorf("tests defaults = %+v", ts)
	}
	cases := []struct{ name, yaml, want string }{
		{"fraction above 1", testsBase + "tests:\n  max_excluded_fraction: 1.5\n", "line 7: tests.max_excluded_fraction: 1.5 is not in (0, 1]"},
		{"negative fraction", testsBase + "tests:\n  max_excluded_fraction: -0.1\n", "tests.max_excluded_fraction"},
		{"probe path root", testsBase + "tests:\n  probe_path: /\n", "tests.probe_path"},
		{"unclean probe path", testsBase + "tests:\n  probe_path: a/../b\n", "tests.probe_path"},
		{"retention under the interval", testsBase + "tests:\n  interval: 10m\n  retention: 5m\n", "tests.retention: 5m0s is shorter than the interval (10m0s)"},
		{"bad interval", testsBase + "tests:\n  interval: soon\n", "tests.interval"},
		{"unknown key", testsBase + "tests:\n  every: 5s\n", "tests.every: unknown field"},
		{"no federation", "storage:\n  - listen: 127.0.0.1:9001\n    root: /tmp\ntests:\n  interval: 5s\n", "tests: scheduled tests need a federation"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
