package bench

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/lakefed/lakefed/internal/results"
)

// formatBytes renders n bytes with a binary unit ("2.5 MiB").
func formatBytes(n float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for n >= 1024 && i < len(units)-1 {
		n /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0f B", n)
	}
	return fmt.Sprintf("%.3g %s", n, units[i])
}

func ms(s float64) string { return fmt.Sprintf("%.3g ms", s*1000) }

// Save stores res and its verdict in st as a finished run and returns
// the run's ID.
func Save(ctx context.Context, st *results.Store, res *Result, v Verdict, label string) (int64, error) {
	id, err := Begin(ctx, st, res.Kind, res.Target, res.Site, res.Params, res.Started, label)
	if err != nil {
		return 0, err
	}
	return id, Record(ctx, st, id, res, v)
}

// Begin records the start of a run (status running), so that it can be
// listed, shown and exported while it runs, and returns its ID for
// Record or RecordFailure. site "" means the target's host.
func Begin(ctx context.Context, st *results.Store, kind, target, site string, params any, started time.Time,
	label string) (int64, error) {
	if site == "" {
		site = hostOf(target)
	}
	return st.CreateRun(ctx, &results.Run{Kind: kind, Target: target, Site: site, Label: label,
		Params: marshalParams(params), Started: started})
}

// Record finishes run id (from Begin) with res and its verdict: done, or
// interrupted when res was, with the samples it has either way.
func Record(ctx context.Context, st *results.Store, id int64, res *Result, v Verdict) error {
	if err := st.SetSteps(ctx, id, res.Steps); err != nil {
		return err
	}
	if !res.samplesStored {
		if err := st.AddSamples(ctx, id, res.Samples); err != nil {
			return err
		}
	}
	status := results.StatusDone
	if res.Canceled || res.Incomplete != "" {
		status = results.StatusInterrupted
	}
	return st.FinishRun(ctx, id, results.Finish{Status: status, Classification: v.Class, Reasons: v.Reasons,
		Summary: res.Summary, Ended: res.Ended, Params: marshalParams(res.Params), Site: res.Site, Error: res.Incomplete})
}

// RecordFailure finishes run id (from Begin) as a run that could not
// complete, so the site's history shows it: failed ("to debug") when the
// target did not answer, interrupted when interrupted is set (the error
// is then the interruption, not the site's).
func RecordFailure(ctx context.Context, st *results.Store, id int64, runErr error, interrupted bool) error {
	f := results.Finish{Status: results.StatusFailed, Classification: ToDebug, Reasons: []string{runErr.Error()}, Error: runErr.Error()}
	if interrupted {
		f = results.Finish{Status: results.StatusInterrupted, Error: runErr.Error()}
	}
	return st.FinishRun(ctx, id, f)
}

func hostOf(target string) string {
	t := &Target{raw: target}
	return t.Host()
}

// WriteSummary prints res as a table: the run's figures, then its stages.
func WriteSummary(w io.Writer, res *Result, v Verdict) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k string, f string, a ...any) { fmt.Fprintf(tw, "%s\t%s\n", k, fmt.Sprintf(f, a...)) }
	row("test", "%s", res.Kind)
	row("target", "%s", res.Target)
	if res.Site != "" {
		row("site", "%s", res.Site)
	}
	row("duration", "%.2fs", res.Ended.Sub(res.Started).Seconds())
	writeSummaryRows(row, res.Summary)
	if v.Class != "" {
		row("classification", "%s", v.Class)
		for _, r := range v.Reasons {
			row("", "- %s", r)
		}
	}
	var fleet *FleetReport
	switch s := res.Summary.(type) {
	case *OpenSummary:
		fleet = s.Fleet
	case *ReadSummary:
		fleet = s.Fleet
	}
	if fleet != nil {
		nodes := make([]string, 0, len(fleet.Nodes))
		for n, jobs := range fleet.Nodes {
			nodes = append(nodes, fmt.Sprintf("%s %d", n, jobs))
		}
		slices.Sort(nodes)
		row("agents", "%s (jobs run)", strings.Join(nodes, ", "))
		row("jobs handed out", "%d chunks; %d jobs reclaimed from agents that stopped, %d lost", fleet.Chunks, fleet.Reclaimed, fleet.Lost)
		row("samples missing", "%d", fleet.MissingSamples)
	}
	if res.Canceled {
		row("note", "interrupted before the end")
	}
	if res.Incomplete != "" {
		row("note", "incomplete: %s", res.Incomplete)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(res.Steps) > 0 {
		fmt.Fprintln(w)
		return WriteSteps(w, res.Kind, res.Steps)
	}
	return nil
}

func writeSummaryRows(row func(k, f string, a ...any), summary any) {
	switch s := summary.(type) {
	case *OpenSummary:
		row("speed", "%g", s.Speed)
		row("jobs", "%d", s.Jobs)
		row("open rate", "%.1f Hz observed, %.1f Hz expected (best stage %.1f Hz)", s.ObservedRate, s.ExpectedRate, s.MaxObservedRate)
		if s.SlopeValid {
			row("trend", "slope %.2f (observed / expected)", s.Slope)
		}
		row("opens", "%d, %d failed (%.2f %%)", s.Opens, s.Failures, 100*s.FailFrac)
		row("open time", "mean %s  p50 %s  p90 %s  p99 %s  max %s", ms(s.Mean), ms(s.P50), ms(s.P90), ms(s.P99), ms(s.Max))
		if s.FirstErr != "" {
			row("first error", "%s", s.FirstErr)
		}
	case *ReadSummary:
		row("speed", "%g", s.Speed)
		shape := formatBytes(float64(s.Block))
		if s.Vector > 1 {
			shape += fmt.Sprintf(" as %d ranges", s.Vector)
		}
		row("block", "%s", shape)
		row("jobs", "%d sustained of %d target at full load (best stage %d)", s.SustainedLast, s.TargetJobs, s.Sustained)
		row("read rate", "%s/s observed, %s/s expected", formatBytes(s.ObservedRate), formatBytes(s.ExpectedRate))
		row("block time", "mean %s  p50 %s  p90 %s  p99 %s", ms(s.MeanBlockTime), ms(s.P50), ms(s.P90), ms(s.P99))
		row("waiting for I/O", "%.1f %% of the jobs' time", 100*s.IOWait)
		row("reads", "%d, %d failed (%.2f %%), %s", s.Reads, s.Failures, 100*s.FailFrac, formatBytes(float64(s.Bytes)))
		if s.FirstErr != "" {
			row("first error", "%s", s.FirstErr)
		}
	case *IOSummary:
		row("size", "%s", formatBytes(float64(s.Size)))
		row("write", "%.3fs  %s/s", s.WriteTime, formatBytes(s.WriteRate))
		row("read", "%.3fs  %s/s", s.ReadTime, formatBytes(s.ReadRate))
		row("adler32", "written %s, read %s, server %s", s.Adler32, s.ReadAdler32, orDash(s.ServerAdler32))
		row("verified", "%v", s.Verified)
	case *ROOTSummary:
		row("file", "%s (%s)", s.File, formatBytes(float64(s.FileSize)))
		row("branch", "%s: %d entries, %d values, sum %.6g", s.Branch, s.Entries, s.Values, s.Sum)
		row("prefetch", "%s", prefetchNote(s))
		row("time", "open %s, read %s", ms(s.OpenTime), ms(s.ReadTime))
		row("requests", "%d, median %s, mean %s", s.Calls, formatBytes(s.MedianSize), formatBytes(s.MeanSize))
		row("bytes read", "%s of %s (%.1f %%)", formatBytes(float64(s.BytesRead)), formatBytes(float64(s.FileSize)), 100*s.ReadFraction)
		row("reads by groot", "%d", s.ReaderCalls)
		if s.Cache != nil {
			row("cache saw", "%s", s.Cache)
		}
	case map[string]any: // a stored summary of an unknown kind
		for k, v := range s {
			row(k, "%v", v)
		}
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// WriteSteps prints the stages of a ramped test as a table.
func WriteSteps(w io.Writer, kind string, steps []results.Step) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	if kind == "read" {
		fmt.Fprintln(tw, "step\tt (s)\tjobs\texpected\tobserved\treads\tfailed\tmean\tp90\tio wait\tsustained\t")
		for _, s := range steps {
			fmt.Fprintf(tw, "%d\t%.1f\t%d\t%s/s\t%s/s\t%d\t%d\t%s\t%s\t%.1f%%\t%d\t\n", s.Index, s.Start, s.Jobs,
				formatBytes(s.Expected), formatBytes(s.Observed), s.Ops, s.Failures, ms(s.Mean), ms(s.P90),
				100*s.IOWait, s.Sustained)
		}
	} else {
		fmt.Fprintln(tw, "step\tt (s)\tjobs\texpected Hz\tobserved Hz\topens\tfailed\tp50\tp90\tp99\t")
		for _, s := range steps {
			fmt.Fprintf(tw, "%d\t%.1f\t%d\t%.1f\t%.1f\t%d\t%d\t%s\t%s\t%s\t\n", s.Index, s.Start, s.Jobs,
				s.Expected, s.Observed, s.Ops, s.Failures, ms(s.P50), ms(s.P90), ms(s.P99))
		}
	}
	return tw.Flush()
}

// DecodeSummary turns a stored summary back into the kind's type, so
// show and compare print it as the run did.
func DecodeSummary(kind string, raw json.RawMessage) any {
	var v any
	switch kind {
	case "open":
		v = &OpenSummary{}
	case "read":
		v = &ReadSummary{}
	case "io":
		v = &IOSummary{}
	case "root":
		v = &ROOTSummary{}
	default:
		m := map[string]any{}
		_ = json.Unmarshal(raw, &m)
		return m
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return map[string]any{"summary": string(raw)}
	}
	return v
}

// WriteRun prints a stored run: what WriteSummary printed when it ran,
// plus its ID, label, status and parameters.
func WriteRun(w io.Writer, run results.Run, steps []results.Step) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k string, f string, a ...any) { fmt.Fprintf(tw, "%s\t%s\n", k, fmt.Sprintf(f, a...)) }
	row("run", "%d", run.ID)
	row("test", "%s", run.Kind)
	row("target", "%s", run.Target)
	row("site", "%s", run.Site)
	if run.Label != "" {
		row("label", "%s", run.Label)
	}
	row("started", "%s", run.Started.Format(time.RFC3339))
	if !run.Ended.IsZero() {
		row("duration", "%.2fs", run.Ended.Sub(run.Started).Seconds())
	}
	row("status", "%s", run.Status)
	if run.Error != "" {
		row("error", "%s", run.Error)
	}
	row("params", "%s", string(run.Params))
	writeSummaryRows(row, DecodeSummary(run.Kind, run.Summary))
	if run.Classification != "" {
		row("classification", "%s", run.Classification)
		for _, r := range run.Reasons {
			row("", "- %s", r)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(steps) > 0 {
		fmt.Fprintln(w)
		return WriteSteps(w, run.Kind, steps)
	}
	return nil
}

// WriteList prints runs one a line.
func WriteList(w io.Writer, runs []results.Run) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTARTED\tKIND\tSITE\tSTATUS\tCLASS\tHEADLINE\tTARGET")
	for _, r := range runs {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Started.Local().Format("2006-01-02 15:04:05"),
			r.Kind, r.Site, r.Status, orDash(r.Classification), headline(r), r.Target)
	}
	return tw.Flush()
}

// headline is a run's main figure in a few words.
func headline(r results.Run) string {
	switch s := DecodeSummary(r.Kind, r.Summary).(type) {
	case *OpenSummary:
		return fmt.Sprintf("%.1f/%.1f Hz, %.1f%% failed", s.ObservedRate, s.ExpectedRate, 100*s.FailFrac)
	case *ReadSummary:
		return fmt.Sprintf("%d/%d jobs, %s/s, block %s", s.SustainedLast, s.TargetJobs, formatBytes(s.ObservedRate), ms(s.MeanBlockTime))
	case *IOSummary:
		return fmt.Sprintf("w %s/s r %s/s ok=%v", formatBytes(s.WriteRate), formatBytes(s.ReadRate), s.Verified)
	case *ROOTSummary:
		return fmt.Sprintf("%d calls, read %s", s.Calls, ms(s.ReadTime))
	}
	return "-"
}

// compareFields are the figures compare lines up, per kind.
var compareFields = map[string][]string{
	"open": {"speed", "jobs", "expected_rate", "observed_rate", "max_observed_rate", "slope", "opens", "fail_frac", "p50", "p90", "p99"},
	"read": {"speed", "jobs", "target_jobs", "sustained_last", "block", "vector", "expected_rate", "observed_rate", "mean_block_time", "p90", "io_wait", "fail_frac"},
	"io":   {"size", "write_time", "write_rate", "read_time", "read_rate", "verified"},
	"root": {"prefetch", "open_time", "read_time", "calls", "median_size", "mean_size", "bytes_read", "file_size", "read_fraction"},
}

// WriteCompare prints runs side by side: one column per run, one row per
// figure (the union of the runs' kinds' figures).
func WriteCompare(w io.Writer, runs []results.Run) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	cells := func(k string, f func(results.Run) string) {
		fmt.Fprint(tw, k)
		for _, r := range runs {
			fmt.Fprint(tw, "\t", f(r))
		}
		fmt.Fprintln(tw)
	}
	cells("run", func(r results.Run) string { return strconv.FormatInt(r.ID, 10) })
	cells("test", func(r results.Run) string { return r.Kind })
	cells("site", func(r results.Run) string { return r.Site })
	cells("started", func(r results.Run) string { return r.Started.Local().Format("01-02 15:04:05") })
	cells("class", func(r results.Run) string { return orDash(r.Classification) })
	sums := make([]map[string]any, len(runs))
	seen := map[string]bool{}
	var fields []string
	for i, r := range runs {
		sums[i] = map[string]any{}
		_ = json.Unmarshal(r.Summary, &sums[i])
		for _, f := range compareFields[r.Kind] {
			if !seen[f] {
				seen[f] = true
				fields = append(fields, f)
			}
		}
	}
	for _, f := range fields {
		fmt.Fprint(tw, f)
		for i := range runs {
			v, ok := sums[i][f]
			s := "-"
			if ok {
				s = formatValue(v)
			}
			fmt.Fprint(tw, "\t", s)
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

func formatValue(v any) string {
	switch x := v.(type) {
	case float64:
		return strconv.FormatFloat(x, 'g', 5, 64)
	default:
		return fmt.Sprint(x)
	}
}

// Export writes run id of st as JSON (the run, its steps and samples in
// one document) or CSV (one row per sample, with a header; steps are in
// the JSON form only).
func Export(ctx context.Context, st *results.Store, id int64, format string, w io.Writer) error {
	run, err := st.Get(ctx, id)
	if err != nil {
		return err
	}
	switch strings.ToLower(format) {
	case "json":
		steps, err := st.Steps(ctx, id)
		if err != nil {
			return err
		}
		// Written piece by piece so long runs do not need their samples
		// in memory at once.
		rb, _ := json.Marshal(run)
		sb, _ := json.Marshal(steps)
		if steps == nil {
			sb = []byte("[]")
		}
		if _, err := fmt.Fprintf(w, "{\"run\":%s,\"steps\":%s,\"samples\":[", rb, sb); err != nil {
			return err
		}
		first := true
		err = st.EachSample(ctx, id, results.SampleFilter{}, func(s results.Sample) error {
			b, _ := json.Marshal(s)
			if !first {
				if _, err := io.WriteString(w, ","); err != nil {
					return err
				}
			}
			first = false
			_, err := w.Write(b)
			return err
		})
		if err != nil {
			return err
		}
		_, err = io.WriteString(w, "]}\n")
		return err
	case "csv":
		cw := csv.NewWriter(w)
		cw.Write([]string{"run_id", "t", "kind", "job", "value", "bytes", "ok", "err"})
		idStr := strconv.FormatInt(id, 10)
		err := st.EachSample(ctx, id, results.SampleFilter{}, func(s results.Sample) error {
			return cw.Write([]string{idStr, strconv.FormatFloat(s.T, 'f', -1, 64), s.Kind, strconv.Itoa(s.Job),
				strconv.FormatFloat(s.Value, 'g', -1, 64), strconv.FormatInt(s.Bytes, 10), strconv.FormatBool(s.OK), s.Err})
		})
		if err != nil {
			return err
		}
		cw.Flush()
		return cw.Error()
	}
	return fmt.Errorf("bench: unknown export format %q (csv, json)", format)
}
