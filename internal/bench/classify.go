package bench

import (
	"fmt"
	"time"
)

// Classifications of a run.
const (
	// OK: the site met every threshold.
	OK = "ok"
	// ToDebug: the site missed at least one threshold; Verdict.Reasons
	// says which.
	ToDebug = "to debug"
)

// Thresholds are the limits that make a run "to debug", the AAA scale
// tests' numbers by default. Rates and times are in unscaled units (a
// real-time AAA run); a run with Speed s is judged against rates s times
// higher and times s times shorter. A config file can hold this struct.
type Thresholds struct {
	// MinOpenRate: an open test whose best stage stays under this rate
	// (opens/s) is "to debug". Default 10.
	MinOpenRate float64 `yaml:"min_open_rate" json:"min_open_rate"`
	// MaxOpenFailFrac: more failed opens than this fraction is "to
	// debug". Default 0.06.
	MaxOpenFailFrac float64 `yaml:"max_open_fail_frac" json:"max_open_fail_frac"`
	// MinOpenSlope: "the trend is flat" when the slope of observed
	// against expected rate over the ramp's stages (least squares) is
	// below this: the site does not answer faster when asked more often.
	// Only judged with at least MinSlopeSteps stages of distinct expected
	// rate. Default 0.5 (a site that keeps up has slope 1).
	MinOpenSlope float64 `yaml:"min_open_slope" json:"min_open_slope"`
	// MinSlopeSteps is how many stages a ramp needs before its trend is
	// judged. Default 3.
	MinSlopeSteps int `yaml:"min_slope_steps" json:"min_slope_steps"`
	// MaxBlockTime: a read test whose mean block read time exceeds this is
	// "to debug". Default 5s.
	MaxBlockTime time.Duration `yaml:"max_block_time" json:"max_block_time"`
	// MaxReadFailFrac: more failed reads than this fraction is "to
	// debug". Default 0.06 (the open test's figure; the AAA read test
	// counted failures as jobs not sustained).
	MaxReadFailFrac float64 `yaml:"max_read_fail_frac" json:"max_read_fail_frac"`
}

// DefaultThresholds returns the AAA thresholds.
func DefaultThresholds() Thresholds {
	return Thresholds{
		MinOpenRate:     10,
		MaxOpenFailFrac: 0.06,
		MinOpenSlope:    0.5,
		MinSlopeSteps:   3,
		MaxBlockTime:    5 * time.Second,
		MaxReadFailFrac: 0.06,
	}
}

// Verdict is a run's classification and why.
type Verdict struct {
	// Class is OK, ToDebug, or "" for kinds that are not classified.
	Class   string   `json:"class"`
	Reasons []string `json:"reasons,omitempty"`
}

// Classify judges res against th:
//
//   - open: "to debug" when the best stage's rate stays under
//     MinOpenRate, the trend is flat (slope below MinOpenSlope over at
//     least MinSlopeSteps stages of distinct expected rate) or more than
//     MaxOpenFailFrac of the opens failed;
//   - read: "to debug" when fewer than the target jobs are sustained in
//     the full-load stage or the mean block read time exceeds MaxBlockTime
//     (or too many reads failed);
//   - io: "to debug" when the bytes read back are not the bytes written;
//   - root: not classified.
//
// A canceled run is judged on what it measured.
func Classify(res *Result, th Thresholds) Verdict {
	var v Verdict
	add := func(format string, a ...any) { v.Reasons = append(v.Reasons, fmt.Sprintf(format, a...)) }
	switch s := res.Summary.(type) {
	case *OpenSummary:
		sp := speedOr1(s.Speed)
		if s.MaxObservedRate < th.MinOpenRate*sp {
			add("open rate stays under %.4g Hz (best stage %.4g Hz%s)", th.MinOpenRate*sp, s.MaxObservedRate, speedNote(sp))
		}
		if s.FailFrac > th.MaxOpenFailFrac {
			add("%.2f %% of opens failed (limit %.2f %%)", 100*s.FailFrac, 100*th.MaxOpenFailFrac)
		}
		if distinctExpected(res) >= max(th.MinSlopeSteps, 2) && s.SlopeValid && s.Slope < th.MinOpenSlope {
			add("trend is flat: observed rate grows %.2f per unit of expected rate (limit %.2f)", s.Slope, th.MinOpenSlope)
		}
	case *ReadSummary:
		sp := speedOr1(s.Speed)
		if s.SustainedLast < s.TargetJobs {
			add("%d of %d target jobs sustained at full load", s.SustainedLast, s.TargetJobs)
		}
		limit := th.MaxBlockTime.Seconds() / sp
		if s.MeanBlockTime > limit {
			add("mean block read time %.3gs over %.3gs%s", s.MeanBlockTime, limit, speedNote(sp))
		}
		if s.FailFrac > th.MaxReadFailFrac {
			add("%.2f %% of reads failed (limit %.2f %%)", 100*s.FailFrac, 100*th.MaxReadFailFrac)
		}
	case *IOSummary:
		if !s.Verified {
			add("io: %s", s.Error)
		}
	default:
		return v
	}
	v.Class = OK
	if len(v.Reasons) > 0 {
		v.Class = ToDebug
	}
	return v
}

func speedOr1(s float64) float64 {
	if s <= 0 {
		return 1
	}
	return s
}

func speedNote(sp float64) string {
	if sp == 1 {
		return ""
	}
	return fmt.Sprintf(", --speed %g", sp)
}

// distinctExpected counts the stages of distinct expected rate.
func distinctExpected(res *Result) int {
	seen := map[float64]bool{}
	for _, s := range res.Steps {
		seen[s.Expected] = true
	}
	return len(seen)
}
