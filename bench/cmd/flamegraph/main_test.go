package main

import (
	"bytes"
	"encoding/xml"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
)

// testProfile is a CPU profile of 1,000 samples of 10 ms (10 s of CPU in
// 5 s) over these stacks, root first:
//
//	main → serve → handle → lookup   600
//	main → serve → handle → write    300 (write inlined into handle)
//	main → gc                         99
//	main → tiny                        1 (0.1 %: left out at -min 0.002)
func testProfile() *profile.Profile {
	p := &profile.Profile{
		SampleType:    []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		PeriodType:    &profile.ValueType{Type: "cpu", Unit: "nanoseconds"},
		Period:        int64(10 * time.Millisecond),
		DurationNanos: int64(5 * time.Second),
	}
	fns := map[string]*profile.Function{}
	fn := func(name string) *profile.Function {
		if f, ok := fns[name]; ok {
			return f
		}
		f := &profile.Function{ID: uint64(len(fns) + 1), Name: name}
		fns[name] = f
		p.Function = append(p.Function, f)
		return f
	}
	// loc: one location; names innermost first, as pprof lists inlined calls.
	loc := func(names ...string) *profile.Location {
		l := &profile.Location{ID: uint64(len(p.Location) + 1), Address: uint64(0x1000 * (len(p.Location) + 1))}
		for _, n := range names {
			l.Line = append(l.Line, profile.Line{Function: fn(n)})
		}
		p.Location = append(p.Location, l)
		return l
	}
	mainL := loc("main.main")
	serve := loc("github.com/lakefed/lakefed/internal/server.(*Server).serve")
	lookup := loc("github.com/lakefed/lakefed/internal/federation.(*Federator).lookup")
	handleWrite := loc("net/http.(*response).write", "github.com/lakefed/lakefed/internal/federation.(*Federator).handle")
	handle := loc("github.com/lakefed/lakefed/internal/federation.(*Federator).handle")
	gc := loc("runtime.gcBgMarkWorker")
	tiny := loc("main.tiny")
	add := func(n int64, stack ...*profile.Location) { // stack leaf first, as in a profile
		p.Sample = append(p.Sample, &profile.Sample{Location: stack, Value: []int64{n, n * p.Period}})
	}
	add(600, lookup, handle, serve, mainL)
	add(300, handleWrite, serve, mainL)
	add(99, gc, mainL)
	add(1, tiny, mainL)
	if err := p.CheckValid(); err != nil {
		panic(err)
	}
	return p
}

// drawn is what the SVG says of one frame.
type drawn struct {
	title   string
	label   string
	x, y, w float64
}

// parseSVG decodes doc as XML (failing the test on malformed XML) and
// returns its title line and every frame (a <g> holding a <title> and a
// <rect>), by full function name.
func parseSVG(t *testing.T, doc []byte) (string, map[string]drawn) {
	t.Helper()
	var svg struct {
		XMLName xml.Name `xml:"svg"`
		ViewBox string   `xml:"viewBox,attr"`
		Text    []string `xml:"text"`
		G       []struct {
			Title string `xml:"title"`
			Rect  struct {
				X     string `xml:"x,attr"`
				Y     string `xml:"y,attr"`
				Width string `xml:"width,attr"`
			} `xml:"rect"`
			Text string `xml:"text"`
		} `xml:"g"`
	}
	if err := xml.Unmarshal(doc, &svg); err != nil {
		t.Fatalf("the SVG is not well-formed XML: %v\n%s", err, doc)
	}
	if svg.ViewBox == "" {
		t.Error("the SVG has no viewBox")
	}
	if len(svg.Text) != 1 {
		t.Fatalf("%d title lines, want 1", len(svg.Text))
	}
	num := func(s string) float64 {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("attribute %q: %v", s, err)
		}
		return v
	}
	frames := map[string]drawn{}
	for _, g := range svg.G {
		name, _, _ := strings.Cut(g.Title, "\n")
		if _, dup := frames[name]; dup {
			t.Errorf("frame %s drawn twice at one depth or more", name)
		}
		frames[name] = drawn{title: g.Title, label: g.Text, x: num(g.Rect.X), y: num(g.Rect.Y), w: num(g.Rect.Width)}
	}
	return svg.Text[0], frames
}

// TestRenderWidths: each frame is as wide as its share of the samples,
// sits over its caller, and its title gives its samples and percentage;
// inlined calls are frames of their own; the title line gives the CPU
// time, wall time and samples; frames under -min are left out.
func TestRenderWidths(t *testing.T) {
	opt := options{min: 0.002, width: 1000, title: "test"}
	var b bytes.Buffer
	if err := render(&b, testProfile(), opt); err != nil {
		t.Fatal(err)
	}
	head, frames := parseSVG(t, b.Bytes())
	if want := "test: 10.00 s of CPU in 5.00 s, 1000 samples"; !strings.HasPrefix(head, want) {
		t.Errorf("title line %q, want it to start %q", head, want)
	}
	const fed = "github.com/lakefed/lakefed/internal/federation.(*Federator)."
	tests := []struct {
		name    string
		samples int
		pct     string
		row     int // 0: the root
	}{
		{"all", 1000, "100.00%", 0},
		{"main.main", 1000, "100.00%", 1},
		{"github.com/lakefed/lakefed/internal/server.(*Server).serve", 900, "90.00%", 2},
		{fed + "handle", 900, "90.00%", 3},
		{fed + "lookup", 600, "60.00%", 4},
		{"net/http.(*response).write", 300, "30.00%", 4},
		{"runtime.gcBgMarkWorker", 99, "9.90%", 2},
	}
	root := frames["all"]
	for _, tt := range tests {
		f, ok := frames[tt.name]
		if !ok {
			t.Errorf("no frame %s; frames: %v", tt.name, frames)
			continue
		}
		if want := opt.width * float64(tt.samples) / 1000; math.Abs(f.w-want) > 0.01 {
			t.Errorf("%s: width %.2f, want %.2f", tt.name, f.w, want)
		}
		if want := tt.name + "\n" + strconv.Itoa(tt.samples) + " samples (" + tt.pct + ")"; f.title != want {
			t.Errorf("%s: title %q, want %q", tt.name, f.title, want)
		}
		if want := root.y - float64(tt.row)*rowHeight; math.Abs(f.y-want) > 0.01 {
			t.Errorf("%s: y %.2f, want %.2f (row %d)", tt.name, f.y, want, tt.row)
		}
	}
	// Callees side by side over their caller, in name order.
	h, l, wr := frames[fed+"handle"], frames[fed+"lookup"], frames["net/http.(*response).write"]
	if math.Abs(l.x-h.x) > 0.01 || math.Abs(wr.x-(l.x+l.w)) > 0.01 {
		t.Errorf("lookup at x=%.2f and write at x=%.2f, want %.2f and %.2f", l.x, wr.x, h.x, h.x+l.w)
	}
	if _, ok := frames["main.tiny"]; ok {
		t.Error("main.tiny (0.1 %) drawn, want it left out at -min 0.002")
	}
	if got := frames[fed+"lookup"].label; got != "federation.(*Federator).lookup" {
		t.Errorf("lookup's label %q, want the name without its import path's directories", got)
	}
	if got := frames["runtime.gcBgMarkWorker"].label; got != "runtime.gcBg.." {
		t.Errorf("gcBgMarkWorker's label (99 px) %q, want it cut to fit", got)
	}
}

// TestRenderKeepsSmallFrames: at the default -min (0.1 %) a frame of
// exactly 0.1 % is drawn.
func TestRenderKeepsSmallFrames(t *testing.T) {
	var b bytes.Buffer
	if err := render(&b, testProfile(), defaults()); err != nil {
		t.Fatal(err)
	}
	_, frames := parseSVG(t, b.Bytes())
	if f, ok := frames["main.tiny"]; !ok || math.Abs(f.w-1.2) > 0.01 {
		t.Errorf("main.tiny: %+v (drawn %v), want 1.2 px wide", f, ok)
	}
	if strings.Contains(b.String(), "<script") {
		t.Error("the SVG holds a script")
	}
}

// TestRenderEmpty: a profile without samples (an idle process) is a
// graph without frames whose title line says so.
func TestRenderEmpty(t *testing.T) {
	p := testProfile()
	p.Sample = nil
	var b bytes.Buffer
	if err := render(&b, p, defaults()); err != nil {
		t.Fatal(err)
	}
	head, frames := parseSVG(t, b.Bytes())
	if len(frames) != 0 || !strings.Contains(head, "0 samples") || !strings.Contains(head, "no CPU") {
		t.Errorf("title line %q and %d frames, want 0 samples said and no frame", head, len(frames))
	}
}

// TestRun: the command reads a gzipped profile file, as pprof writes
// them, and writes the SVG where -o says; it escapes names XML would
// choke on.
func TestRun(t *testing.T) {
	p := testProfile()
	p.Function[0].Name = "main.F[go.shape.*uint8]<&>"
	dir := t.TempDir()
	in, out := filepath.Join(dir, "cpu.pprof"), filepath.Join(dir, "cpu.svg")
	f, err := os.Create(in)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Write(f); err != nil { // gzipped
		t.Fatal(err)
	}
	f.Close()
	if err := run([]string{"-o", out, in}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	head, frames := parseSVG(t, doc)
	if !strings.HasPrefix(head, in+": 10.00 s of CPU") {
		t.Errorf("title line %q, want the file's name and its CPU time", head)
	}
	if _, ok := frames["main.F[go.shape.*uint8]<&>"]; !ok {
		t.Errorf("no frame for the renamed main.main; frames: %v", frames)
	}
	if err := run([]string{in, in}, io.Discard, io.Discard); err == nil {
		t.Error("two profiles: no error")
	}
}

func TestShort(t *testing.T) {
	for in, want := range map[string]string{
		"github.com/a/b/pkg.(*T).M":          "pkg.(*T).M",
		"runtime.mallocgc":                   "runtime.mallocgc",
		"example.org/x/y.F[example.org/z.T]": "y.F[example.org/z.T]",
		"net/http.(*conn).serve.func1":       "http.(*conn).serve.func1",
	} {
		if got := short(in); got != want {
			t.Errorf("short(%q) = %q, want %q", in, got, want)
		}
	}
}
