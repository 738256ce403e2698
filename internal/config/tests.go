package config

import (
	"time"

	"github.com/lakefed/lakefed/internal/httpx"
)

// Tests configures the scheduled functional tests (package
// internal/sitetest): every Interval, each federated endpoint is
// asked to stat and read a small probe file (and, when WriteTest is set and
// the endpoint is writable, to write, read back and delete a file), under
// a load budget per site so testing never hammers a site. Results go to
// the bench results store and feed the dashboard. With ExcludeFailing,
// endpoints that fail FailAfter rounds in a row are marked down in the
// federator — but never more than MaxExcludedFraction of them at once, so
// a broken tester cannot empty the federation (HammerCloud's
// mass-exclusion problem).
//
//	tests:
//	  interval: 60s
//	  probe_path: /lakefed-probe
//	  write_test: true
//	  max_requests_per_second: 5
//	  exclude_failing: true
//	  fail_after: 3
//	  max_excluded_fraction: 0.5
type Tests struct {
	// Interval between two rounds of tests. Default 60s.
	Interval Duration `yaml:"interval"`
	// Timeout bounds one endpoint's whole test (every operation of it).
	// Default 10s.
	Timeout Duration `yaml:"timeout"`
	// ProbePath is the probe file, relative to each endpoint's path (the
	// federated prefix's directory on the endpoint). Writable endpoints
	// get it written when missing; on read-only endpoints a missing probe
	// file makes the test stat the directory instead. Default
	// "/lakefed-probe".
	ProbePath string `yaml:"probe_path"`
	// ProbeSize is the size of a probe file the tester writes, and the
	// most bytes the small read reads. Default "4KiB".
	ProbeSize Size `yaml:"probe_size"`
	// WriteTest adds a write, read-back and delete round trip on writable
	// endpoints. Default false.
	WriteTest bool `yaml:"write_test"`
	// MaxConcurrentPerSite is how many endpoint tests of one site may run
	// at once (a site is an endpoint URL's host:port). Default 1.
	MaxConcurrentPerSite int `yaml:"max_concurrent_per_site"`
	// MaxRequestsPerSecond bounds the tester's operations on one site
	// (stat, read, write, delete each count one). Default 5; zero means
	// the default.
	MaxRequestsPerSecond float64 `yaml:"max_requests_per_second"`
	// ExcludeFailing marks endpoints that failed FailAfter rounds in a
	// row down in the federator until a test passes again. Default false.
	ExcludeFailing bool `yaml:"exclude_failing"`
	// FailAfter is how many consecutive failed rounds exclude an
	// endpoint. Default 3.
	FailAfter int `yaml:"fail_after"`
	// MaxExcludedFraction is the most endpoints (as a fraction of all)
	// the tester may have excluded at once. When more would be, it
	// excludes none more and reports itself suspect (log and metric).
	// Default 0.5; must be in (0, 1].
	MaxExcludedFraction float64 `yaml:"max_excluded_fraction"`
	// Retention is how long the results store keeps the tests' runs
	// (kind "functional", about 1,440 a day per endpoint at the default
	// interval) and their samples; older ones are deleted hourly. Runs of
	// lakefed bench are kept. Default 168h (7 days).
	Retention Duration `yaml:"retention"`
	// DB is the results store, as the top-level results says (which
	// wins when both are set); kept for configs written before it.
	DB string `yaml:"db"`
}

// Defaults of the scheduled tests.
const (
	DefaultTestsInterval       = 60 * time.Second
	DefaultTestsTimeout        = 10 * time.Second
	DefaultProbePath           = "/lakefed-probe"
	DefaultProbeSize           = 4 << 10
	DefaultTestsConcurrent     = 1
	DefaultTestsRate           = 5
	DefaultTestsFailAfter      = 3
	DefaultMaxExcludedFraction = 0.5
	DefaultTestsRetention      = 7 * 24 * time.Hour
)

// setDefaults fills the zero fields of t; nil t is left alone.
func (t *Tests) setDefaults() {
	if t == nil {
		return
	}
	if t.Interval == 0 {
		t.Interval = Duration(DefaultTestsInterval)
	}
	if t.Timeout == 0 {
		t.Timeout = Duration(DefaultTestsTimeout)
	}
	if t.ProbePath == "" {
		t.ProbePath = DefaultProbePath
	}
	if t.ProbeSize == 0 {
		t.ProbeSize = DefaultProbeSize
	}
	if t.MaxConcurrentPerSite == 0 {
		t.MaxConcurrentPerSite = DefaultTestsConcurrent
	}
	if t.MaxRequestsPerSecond == 0 {
		t.MaxRequestsPerSecond = DefaultTestsRate
	}
	if t.FailAfter == 0 {
		t.FailAfter = DefaultTestsFailAfter
	}
	if t.MaxExcludedFraction == 0 {
		t.MaxExcludedFraction = DefaultMaxExcludedFraction
	}
	if t.Retention == 0 {
		t.Retention = Duration(DefaultTestsRetention)
	}
}

// SetDefaults fills the zero fields of t with their defaults, for a Tests
// built in code. It is idempotent.
func (t *Tests) SetDefaults() { t.setDefaults() }

func (t *Tests) validate(v *validator, path string, haveFederation bool) {
	if t == nil {
		return
	}
	if !haveFederation {
		v.errorf(path, "scheduled tests need a federation section (they test its endpoints)")
	}
	if t.Interval <= 0 {
		v.errorf(path+".interval", "must be positive")
	}
	if t.Timeout <= 0 {
		v.errorf(path+".timeout", "must be positive")
	}
	if c, err := httpx.CleanPath(t.ProbePath); err != nil {
		v.errorf(path+".probe_path", "%v", err)
	} else if c != t.ProbePath || c == "/" {
		v.errorf(path+".probe_path", "%q is not a clean file path such as \"/lakefed-probe\"", t.ProbePath)
	}
	if t.ProbeSize < 1 {
		v.errorf(path+".probe_size", "must be at least 1 byte")
	}
	if t.MaxConcurrentPerSite < 1 {
		v.errorf(path+".max_concurrent_per_site", "must be at least 1")
	}
	if t.MaxRequestsPerSecond < 0 {
		v.errorf(path+".max_requests_per_second", "must not be negative")
	}
	if t.FailAfter < 1 {
		v.errorf(path+".fail_after", "must be at least 1")
	}
	if t.MaxExcludedFraction <= 0 || t.MaxExcludedFraction > 1 {
		v.errorf(path+".max_excluded_fraction", "%v is not in (0, 1]", t.MaxExcludedFraction)
	}
	if t.Retention < t.Interval {
		v.errorf(path+".retention", "%v is shorter than the interval (%v)", t.Retention, t.Interval)
	}
}
