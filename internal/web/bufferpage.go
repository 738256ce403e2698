package web

import (
	"fmt"
	"html/template"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/lakefed/lakefed/internal/buffer"
	"github.com/lakefed/lakefed/internal/httpx"
)

// The buffer page (/ui/buffer) shows the write buffer at a glance (issue
// 13, item 6): what waits to migrate and since when, how full the disk
// is, how fast each target takes its copies, which files fail and why,
// and the pending bytes over the last hour. That plot is the one that
// tells a healthy buffer (a sawtooth: writes pile up, the mover drains
// them) from one whose target is down (a ramp) — the prototype's 10 % of
// never-migrated files would have been a line that never came back down.

// BufferSource is what the dashboard reads of a write buffer
// (*buffer.Buffer implements it): its state now and the pending figures
// it sampled over the last hour, oldest first. Both are called on every
// request of /ui/buffer, concurrently.
type BufferSource interface {
	Status() buffer.Status
	History() []buffer.Sample
}

// The buffer role's *buffer.Buffer is what server wires in as
// Options.Buffer.
var _ BufferSource = (*buffer.Buffer)(nil)

// plotPending is the ID of the buffer page's plot.
const plotPending = "buffer-pending"

// figure is one tile of the buffer page's headline figures: the value
// large, what it counts below it.
type figure struct {
	ID, Label, Value, Note string
	// Bad marks a figure that needs a look (failing files, a full disk).
	Bad bool
	// Bar, when set, draws a usage bar under the value.
	Bar template.CSS
}

// targetRow is one line of the targets table, every number with its unit.
type targetRow struct {
	Name, Files, Bytes, Time, Rate, Failures, LastError string
	// DownUntil is when the mover tries the target again; zero: not held
	// off.
	DownUntil time.Time
	// Failing counts the pending files whose last copy to the target
	// failed (a target that answers but corrupts is never held off).
	Failing string
}

// failureRow is one line of the failures table.
type failureRow struct {
	Path, Target, Reason, Error, Attempts, NextTry string
	At                                             time.Time
}

type bufferPage struct {
	Now      time.Time
	Figures  []figure
	Plots    []namedPlot
	Samples  int
	Targets  []targetRow
	Failures []failureRow
	// FailuresCapped says the buffer listed only the first failures.
	FailuresCapped bool
	FailuresMax    int
}

// bufferSource returns the buffer, or a 404 error when there is none.
func (d *Dashboard) bufferSource() (BufferSource, error) {
	if d.o.Buffer == nil {
		return nil, httpx.NewError(http.StatusNotFound, "web: this process runs no write buffer", nil)
	}
	return d.o.Buffer, nil
}

func (d *Dashboard) serveBuffer(w http.ResponseWriter, r *http.Request) {
	b, err := d.bufferSource()
	if err != nil {
		d.fail(w, r, err)
		return
	}
	now := time.Now()
	st, hist := d.bufferStatus(r, b), b.History()
	page := bufferPage{Now: now, Figures: bufferFigures(st), Samples: len(hist),
		FailuresCapped: len(st.Failures) >= bufferFailuresShown, FailuresMax: bufferFailuresShown}
	failing := map[string]int64{}
	for _, f := range st.Failures {
		failing[f.Target]++
	}
	for _, t := range st.Targets {
		page.Targets = append(page.Targets, targetRowOf(t, failing[t.Name]))
	}
	for _, f := range st.Failures {
		page.Failures = append(page.Failures, failureRowOf(f, now))
	}
	if page.Plots, err = bufferPlots(st, hist, now); err != nil {
		d.fail(w, r, err)
		return
	}
	d.render(w, r, "buffer.html", page)
}

// bufferFailuresShown is how many failures the buffer's Status lists at
// most (buffer.maxFailures): a page listing that many says it may hold
// only the oldest.
const bufferFailuresShown = 100

// serveBufferPlot serves the buffer page's plot as an SVG file:
// /ui/plot/buffer/buffer-pending.svg.
func (d *Dashboard) serveBufferPlot(w http.ResponseWriter, r *http.Request) {
	b, err := d.bufferSource()
	if err != nil {
		d.fail(w, r, err)
		return
	}
	name, ok := strings.CutSuffix(r.PathValue("name"), ".svg")
	if !ok {
		d.fail(w, r, badRequest("plot names end in .svg"))
		return
	}
	plots, err := bufferPlots(d.bufferStatus(r, b), b.History(), time.Now())
	if err != nil {
		d.fail(w, r, err)
		return
	}
	for _, p := range plots {
		if p.ID == name {
			writeSVGFile(w, p)
			return
		}
	}
	httpx.WriteError(w, http.StatusNotFound, fmt.Sprintf("web: the buffer page has no plot %q", name))
}

// bufferStatus is b.Status(), less the failures of files Options.MayList
// does not let r's caller list.
func (d *Dashboard) bufferStatus(r *http.Request, b BufferSource) buffer.Status {
	st := b.Status()
	if d.o.MayList != nil {
		st.Failures = slices.DeleteFunc(st.Failures, func(f buffer.Failure) bool { return !d.o.MayList(r, f.Path) })
	}
	return st
}

// bufferJSON is /ui/api/buffer: the buffer's own /api/buffer, the
// Status with the history of pending figures.
type bufferJSON struct {
	buffer.Status
	History []buffer.Sample `json:"history"`
}

func (d *Dashboard) apiBuffer(w http.ResponseWriter, r *http.Request) {
	b, err := d.bufferSource()
	if err != nil {
		d.fail(w, r, err)
		return
	}
	out := bufferJSON{Status: d.bufferStatus(r, b), History: b.History()}
	if out.History == nil {
		out.History = []buffer.Sample{}
	}
	if out.Failures == nil {
		out.Failures = []buffer.Failure{}
	}
	writeJSON(w, out)
}

// bufferFigures are the headline tiles: pending, its age, the disk,
// migrated and failing files.
func bufferFigures(st buffer.Status) []figure {
	oldest := figure{ID: "oldest", Label: "oldest pending file", Value: "none pending",
		Note: "age of the oldest acknowledged file not yet on every target"}
	if st.PendingFiles > 0 {
		oldest.Value = fmtDur(time.Duration(st.OldestPendingSeconds * float64(time.Second)))
	}
	disk := figure{ID: "disk", Label: "disk used", Value: fmtBytes(st.UsedBytes),
		Note: "no bound (max_bytes unset): the file system's free space bounds it"}
	if st.MaxBytes > 0 {
		f := float64(st.UsedBytes) / float64(st.MaxBytes)
		disk.Note = "of " + fmtBytes(st.MaxBytes) + " (max_bytes): " + fmtPct(f)
		disk.Bar = template.CSS(fmt.Sprintf("width: %.1f%%", 100*min(max(f, 0), 1)))
		disk.Bad = f >= 0.9
	}
	failing := figure{ID: "failing", Label: "failing files", Value: plural(int64(len(st.Failures)), "file", "files"),
		Note: "pending files whose last copy failed; they are retried", Bad: len(st.Failures) > 0}
	return []figure{
		{ID: "pending", Label: "pending", Value: fmtBytes(st.PendingBytes),
			Note: plural(int64(st.PendingFiles), "file", "files") + " acknowledged, not yet verified on every target"},
		oldest,
		disk,
		{ID: "migrated", Label: "migrated since start", Value: plural(st.Migrated, "file", "files"),
			Note: "verified (size and adler32) on every target; " + plural(int64(st.HeldFiles), "file", "files") + ", " +
				fmtBytes(st.HeldBytes) + " held on disk, pending ones included"},
		failing,
	}
}

func targetRowOf(t buffer.TargetStatus, failing int64) targetRow {
	r := targetRow{Name: t.Name, Files: plural(t.Files, "file", "files"), Bytes: fmtBytes(t.Bytes),
		Time: fmtDur(time.Duration(t.Seconds * float64(time.Second))), Rate: "—",
		Failures: plural(t.Failures, "copy", "copies"), LastError: t.LastError, DownUntil: t.DownUntil}
	if failing > 0 {
		r.Failing = "failing for " + plural(failing, "file", "files")
	}
	if t.Seconds > 0 {
		r.Rate = fmtMBps(t.BytesPerSecond)
	}
	return r
}

func failureRowOf(f buffer.Failure, now time.Time) failureRow {
	r := failureRow{Path: f.Path, Target: f.Target, Reason: f.Reason, Error: f.Error, At: f.At,
		Attempts: plural(int64(f.Attempts), "attempt", "attempts"), NextTry: "due now"}
	if f.Reason == "" {
		r.Reason = "error"
	}
	if d := f.NextTry.Sub(now); d > 0 {
		r.NextTry = "in " + fmtDur(d)
	}
	return r
}

// byteUnit picks the binary unit in which the largest of values reads
// best (at least 1 of it), and its size in bytes.
func byteUnit(largest float64) (string, float64) {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	i, size := 0, 1.0
	for i < len(units)-1 && largest >= 1024*size {
		i++
		size *= 1024
	}
	return units[i], size
}

// bufferPlots draws the pending bytes over the samples of the history,
// and the buffer's state now as the last point, so the line ends where
// the figures above it stand. The y axis is in one binary unit chosen
// for the largest value; each point's tooltip gives the pending files
// too. The buffer's bound is drawn only when the line comes within a
// quarter of it: a 500 GiB line would flatten 2 GiB of pending files
// into the axis. No history (the buffer has not sampled yet): no plot.
func bufferPlots(st buffer.Status, hist []buffer.Sample, now time.Time) ([]namedPlot, error) {
	if len(hist) == 0 {
		return nil, nil
	}
	pts := append(hist[:len(hist):len(hist)], buffer.Sample{Time: now, PendingBytes: st.PendingBytes,
		PendingFiles: st.PendingFiles})
	var peak float64
	for _, s := range pts {
		peak = math.Max(peak, float64(s.PendingBytes))
	}
	showMax := st.MaxBytes > 0 && peak >= float64(st.MaxBytes)/4
	if showMax {
		peak = math.Max(peak, float64(st.MaxBytes))
	}
	unit, size := byteUnit(peak)
	s := series{Name: "pending bytes", Line: true}
	for i, p := range pts {
		s.X = append(s.X, p.Time.Sub(now).Seconds())
		s.Y = append(s.Y, float64(p.PendingBytes)/size)
		label := plural(int64(p.PendingFiles), "file", "files") + " pending"
		if i == len(pts)-1 {
			label = "now: " + label
		}
		s.Labels = append(s.Labels, label)
	}
	spec := plotSpec{ID: plotPending, Title: "Pending bytes over the last hour (sampled every 10 s)",
		YLabel: "pending (" + unit + ")", YUnit: unit, Series: []series{s}, YMin0: true, Ago: true, W: 1000, H: 240}
	if showMax {
		spec.RefY, spec.RefName = float64(st.MaxBytes)/size, "buffer bound (max_bytes, "+fmtBytes(st.MaxBytes)+")"
	}
	svg, err := renderSVG(spec)
	if err != nil || svg == "" {
		return nil, err
	}
	return []namedPlot{{ID: spec.ID, Title: spec.Title, SVG: svg}}, nil
}

// plural shows a count with the noun it counts, in the singular for one.
func plural(n int64, one, many string) string {
	if n == 1 {
		return countOf(n, one)
	}
	return countOf(n, many)
}
