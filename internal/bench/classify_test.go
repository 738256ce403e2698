package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/results"
)

// ramp returns stages with the given expected and observed rates.
func ramp(exp, obs []float64) []results.Step {
	out := make([]results.Step, len(exp))
	for i := range exp {
		out[i] = results.Step{Index: i, Expected: exp[i], Observed: obs[i]}
	}
	return out
}

func openResult(speed, maxRate, fail float64, steps []results.Step) *Result {
	s := &OpenSummary{Speed: speed, MaxObservedRate: maxRate, FailFrac: fail}
	var xs, ys []float64
	for _, st := range steps {
		xs, ys = append(xs, st.Expected), append(ys, st.Observed)
	}
	s.Slope, s.SlopeValid = slope(xs, ys)
	return &Result{Kind: "open", Steps: steps, Summary: s}
}

func TestClassifyOpen(t *testing.T) {
	good := ramp([]float64{20, 40, 60, 80, 100}, []float64{20, 40, 60, 80, 100})
	flat := ramp([]float64{20, 40, 60, 80, 100}, []float64{30, 31, 30, 32, 31})
	twoSteps := ramp([]float64{20, 40}, []float64{30, 30})
	for _, tc := range []struct {
		name   string
		res    *Result
		want   string
		reason string
	}{
		{"keeps up", openResult(1, 100, 0, good), OK, ""},
		{"rate exactly 10 Hz", openResult(1, 10, 0, nil), OK, ""},
		{"rate under 10 Hz", openResult(1, 9.99, 0, nil), ToDebug, "under 10"},
		{"scaled rate: 500 Hz at speed 100 is 5 Hz", openResult(100, 500, 0, nil), ToDebug, "under 1000"},
		{"scaled rate: 1000 Hz at speed 100", openResult(100, 1000, 0, nil), OK, ""},
		{"failures at 6 %", openResult(1, 100, 0.06, good), OK, ""},
		{"failures over 6 %", openResult(1, 100, 0.0601, good), ToDebug, "failed"},
		{"flat trend", openResult(1, 32, 0, flat), ToDebug, "flat"},
		{"two stages are not a trend", openResult(1, 30, 0, twoSteps), OK, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := Classify(tc.res, DefaultThresholds())
			if v.Class != tc.want || (tc.reason != "" && !strings.Contains(strings.Join(v.Reasons, ";"), tc.reason)) {
				t.Errorf("Classify = %+v, want %q with a reason containing %q", v, tc.want, tc.reason)
			}
		})
	}
}

func TestClassifyRead(t *testing.T) {
	for _, tc := range []struct {
		name      string
		sustained int
		target    int
		blockTime float64
		speed     float64
		fail      float64
		want      string
		reason    string
	}{
		{"all sustained, 5 s blocks", 600, 600, 5, 1, 0, OK, ""},
		{"one job short", 599, 600, 1, 1, 0, ToDebug, "599 of 600"},
		{"block time over 5 s", 600, 600, 5.01, 1, 0, ToDebug, "block read time"},
		{"scaled block time: 0.06 s at speed 100", 600, 600, 0.06, 100, 0, ToDebug, "block read time"},
		{"scaled block time: 0.04 s at speed 100", 600, 600, 0.04, 100, 0, OK, ""},
		{"failures", 600, 600, 1, 1, 0.1, ToDebug, "reads failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := &Result{Kind: "read", Summary: &ReadSummary{Speed: tc.speed, SustainedLast: tc.sustained,
				TargetJobs: tc.target, MeanBlockTime: tc.blockTime, FailFrac: tc.fail}}
			v := Classify(res, DefaultThresholds())
			if v.Class != tc.want || (tc.reason != "" && !strings.Contains(strings.Join(v.Reasons, ";"), tc.reason)) {
				t.Errorf("Classify = %+v, want %q with a reason containing %q", v, tc.want, tc.reason)
			}
		})
	}
}

func TestClassifyCustomThresholds(t *testing.T) {
	th := DefaultThresholds()
	th.MinOpenRate = 200
	th.MaxBlockTime = time.Second
	if v := Classify(openResult(1, 150, 0, nil), th); v.Class != ToDebug {
		t.Errorf("150 Hz against a 200 Hz floor = %+v, want to debug", v)
	}
	res := &Result{Kind: "read", Summary: &ReadSummary{Speed: 1, SustainedLast: 1, TargetJobs: 1, MeanBlockTime: 2}}
	if v := Classify(res, th); v.Class != ToDebug {
		t.Errorf("2 s blocks against a 1 s limit = %+v, want to debug", v)
	}
	if v := Classify(&Result{Kind: "root", Summary: &ROOTSummary{}}, th); v.Class != "" {
		t.Errorf("root run classified %+v, want unclassified", v)
	}
}

func TestRampPlan(t *testing.T) {
	c := &Common{Speed: 10}
	plan := Ramp{Jobs: 7, Step: 3, Every: 10 * time.Second, Hold: 30 * time.Second}.plan(c)
	want := []stepPlan{{0, time.Second, 3}, {time.Second, 2 * time.Second, 6}, {2 * time.Second, 5 * time.Second, 7}}
	if len(plan) != len(want) {
		t.Fatalf("plan = %+v, want %+v", plan, want)
	}
	for i := range want {
		if plan[i] != want[i] {
			t.Errorf("stage %d = %+v, want %+v", i, plan[i], want[i])
		}
	}
	// Job 4 is the second of the 3 jobs added at 1 s: a third of a period in.
	if got := jobStart(plan, 4, 300*time.Millisecond); got != time.Second+100*time.Millisecond {
		t.Errorf("jobStart(4) = %v, want 1.1s", got)
	}
}

func TestAggregateSustained(t *testing.T) {
	plan := []stepPlan{{0, 10 * time.Second, 2}}
	period := time.Second
	recs := []jobRecord{
		{samples: []results.Sample{{T: 0, OK: true, Value: 0.1, Bytes: 10}, {T: 1, OK: true, Value: 0.1, Bytes: 10}}},
		{samples: []results.Sample{{T: 0, OK: true, Value: 2, Bytes: 10}}, missed: []float64{1}}, // overran
	}
	st := aggregateSteps(plan, recs, period, func(j int) float64 { return float64(j) * 10 }, true)[0]
	if st.Sustained != 1 || st.Ops != 3 || st.Observed != 3 {
		t.Errorf("step = %+v, want 1 sustained, 3 ops, 3 B/s", st)
	}
	if want := 2.2 / 20; st.IOWait < want-1e-9 || st.IOWait > want+1e-9 {
		t.Errorf("io wait = %g, want %g", st.IOWait, want)
	}
}
