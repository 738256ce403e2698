package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// The dashboard shows one unit per quantity: latencies
// in ms, data rates in MB/s (10^6 bytes), open rates in Hz, durations as
// Go durations ("30s"), sizes in bytes with a binary prefix, fractions in
// per cent, counts with the noun they count. The bench and the scheduled
// tests store seconds, bytes/s and time.Duration nanoseconds; the key of a
// summary or parameter says which.

// unitOf is how a summary or parameter key is shown.
type unitOf int

const (
	uNone     unitOf = iota // an identifier or a plain value (seed, sum)
	uSeconds                // float seconds, shown in ms
	uDuration               // time.Duration nanoseconds, shown as "30s"
	uRate                   // bytes/s for read/io runs, Hz for open runs
	uBytesPS                // bytes/s, shown in MB/s
	uHz                     // operations per second
	uFraction               // 0..1, shown in per cent
	uBytes                  // a size in bytes
	uFactor                 // a speed-up factor, shown as "100×"
	uSlope                  // observed per expected rate
	uCount                  // a count; countNoun names it
)

// keyUnits maps the keys of the bench summaries and parameters (and of the
// functional runs) to their unit. Keys not listed are shown as they are;
// the dashboard tests fail when a known run shows a number without a unit.
var keyUnits = []struct {
	unit unitOf
	keys []string
}{
	{uSeconds, []string{"mean", "p50", "p90", "p99", "max", "mean_block_time", "open_time", "read_time",
		"write_time", "latency"}},
	{uDuration, []string{"every", "hold", "period", "max_block_time", "offset", "duration", "timeout"}},
	{uRate, []string{"expected_rate", "observed_rate", "max_observed_rate"}},
	{uBytesPS, []string{"write_rate", "read_rate"}},
	{uHz, []string{"min_open_rate"}},
	{uFraction, []string{"fail_frac", "io_wait", "read_fraction", "max_open_fail_frac", "max_read_fail_frac"}},
	{uBytes, []string{"size", "file_size", "open_size", "read_size", "io_size", "block", "bytes", "bytes_read",
		"prefetch_bytes", "median_size", "mean_size"}},
	{uFactor, []string{"speed"}},
	{uSlope, []string{"slope", "min_open_slope"}},
}

// countNoun names what a count key counts.
var countNoun = map[string]string{
	"jobs": "jobs", "target_jobs": "jobs", "sustained": "jobs", "sustained_last": "jobs", "step": "jobs",
	"files": "files", "open_files": "files", "read_files": "files",
	"opens": "opens", "failures": "failed", "reads": "reads", "calls": "calls", "reader_calls": "calls",
	"entries": "entries", "values": "values", "vector": "ranges", "prefetch_ranges": "ranges",
	"prefetch_requests": "requests", "min_slope_steps": "stages", "max_samples": "samples",
	"root_events": "events", "ops": "ops",
}

func unitFor(key string) unitOf {
	for _, ku := range keyUnits {
		if slices.Contains(ku.keys, key) {
			return ku.unit
		}
	}
	if _, ok := countNoun[key]; ok {
		return uCount
	}
	return uNone
}

// decodeJSON decodes a run's summary or parameters keeping numbers exact
// (a 64-bit seed does not survive a float64: 4.847e+18).
func decodeJSON(b []byte) map[string]any {
	var m map[string]any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	_ = d.Decode(&m)
	return m
}

// fmtKeyed shows the value of key of a run of kind with its unit.
func fmtKeyed(kind, key string, v any) string {
	n, ok := v.(json.Number)
	if !ok {
		if f, isF := v.(float64); isF {
			n, ok = json.Number(fmt.Sprint(f)), true
		}
	}
	if !ok {
		return fmtValue(v)
	}
	u := unitFor(key)
	if u == uNone || u == uCount || u == uDuration || u == uBytes {
		if i, err := n.Int64(); err == nil {
			return fmtInt(key, u, i)
		}
	}
	f, err := n.Float64()
	if err != nil {
		return n.String()
	}
	switch u {
	case uSeconds:
		return fmtMS(f)
	case uRate:
		if kind == "open" {
			return fmtHz(f)
		}
		return fmtMBps(f)
	case uBytesPS:
		return fmtMBps(f)
	case uHz:
		return fmtHz(f)
	case uFraction:
		return fmtPct(f)
	case uFactor:
		return fmt.Sprintf("%.3g×", f)
	case uSlope:
		return fmt.Sprintf("%.2f Hz/Hz", f)
	case uDuration:
		return time.Duration(f).String()
	case uBytes:
		return fmtBytes(int64(f))
	case uCount:
		return fmt.Sprintf("%.0f %s", f, countNoun[key])
	}
	return fmtValue(f)
}

func fmtInt(key string, u unitOf, i int64) string {
	switch u {
	case uCount:
		return fmt.Sprintf("%d %s", i, countNoun[key])
	case uDuration:
		return time.Duration(i).String()
	case uBytes:
		return fmtBytes(i)
	}
	return fmt.Sprint(i)
}

// fmtMS shows seconds in ms, with three significant digits.
func fmtMS(s float64) string {
	if !finite(s) {
		return "—"
	}
	return sig3(s*1000) + " ms"
}

func fmtHz(f float64) string {
	if !finite(f) {
		return "—"
	}
	return sig3(f) + " Hz"
}

func fmtMBps(bps float64) string {
	if !finite(bps) {
		return "—"
	}
	return sig3(bps/1e6) + " MB/s"
}

func fmtPct(f float64) string {
	if !finite(f) {
		return "—"
	}
	return sig3(f*100) + " %"
}

// sig3 prints f with about three significant digits and never in
// exponent notation.
func sig3(f float64) string {
	a := math.Abs(f)
	switch {
	case a == 0:
		return "0"
	case a >= 100:
		return fmt.Sprintf("%.0f", f)
	case a >= 10:
		return fmt.Sprintf("%.1f", f)
	case a >= 1:
		return fmt.Sprintf("%.2f", f)
	case a >= 0.001:
		return fmt.Sprintf("%.3g", f) // 0.293, 0.00412: never an exponent here
	}
	return "<0.001"
}

// fmtBytes shows a size with a binary prefix (64 KiB, 1 GiB).
func fmtBytes(b int64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%d B", b)
	}
	f, i := float64(b), -1
	for f >= unit && i < 5 {
		f /= unit
		i++
	}
	s := fmt.Sprintf("%.1f", f)
	s = strings.TrimSuffix(s, ".0")
	return s + " " + string("KMGTPE"[i]) + "iB"
}

// fmtDur shows a duration the way Go writes it, rounded to what a person
// reads: "850ms", "12.3s", "6m0s".
func fmtDur(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}
