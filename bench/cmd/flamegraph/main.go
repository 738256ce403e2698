// Command flamegraph draws a pprof CPU profile as a flame graph: one SVG
// file, self-contained (no script, no external font), that any browser
// shows. The bench scripts run it on the profiles PROFILE=1 takes.
//
//	go run ./bench/cmd/flamegraph -o OUT.svg IN.pprof
//
// Every sample's stack is merged into a tree from the root (the outermost
// caller) up, inlined calls as frames of their own. Each frame is a
// rectangle as wide as its share of the samples, over its caller, labelled
// with its function's name (the import path's directories dropped, cut to
// fit) and titled with the full name, its samples and their percentage; a
// browser shows the title on hover. Frames narrower than -min of the
// whole (0.1 %) are left out, with everything they called. The line on top
// gives the CPU time the profile holds, the wall time it covers and its
// sample count.
package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/google/pprof/profile"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "flamegraph:", err)
		os.Exit(1)
	}
}

// run is the command: flags, the profile read, the SVG written to -o or
// to stdout; usage goes to stderr.
func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("flamegraph", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "", "write the SVG to `FILE` (default: standard output)")
	opt := defaults()
	fs.Float64Var(&opt.min, "min", opt.min, "leave out frames narrower than this `fraction` of all samples")
	fs.Float64Var(&opt.width, "width", opt.width, "the graph's width in `pixels`")
	fs.StringVar(&opt.title, "title", "", "the title line's first words (default: the input's file name)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: flamegraph [-o OUT.svg] [-min F] [-width PX] [-title T] IN.pprof")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("one profile, please")
	}
	f, err := os.Open(fs.Arg(0))
	if err != nil {
		return err
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		return fmt.Errorf("%s: %w", fs.Arg(0), err)
	}
	if opt.title == "" {
		opt.title = fs.Arg(0)
	}
	var buf bytes.Buffer
	if err := render(&buf, p, opt); err != nil {
		return err
	}
	if *out == "" {
		_, err = stdout.Write(buf.Bytes())
		return err
	}
	return os.WriteFile(*out, buf.Bytes(), 0o644)
}

// options shape the drawing.
type options struct {
	min   float64 // frames narrower than this fraction of the root are left out
	width float64 // pixels from the root's left edge to its right edge
	title string  // the title line's first words
}

func defaults() options { return options{min: 0.001, width: 1200} }

// Pixel geometry: rows of frames, a margin round the graph, a title band.
const (
	rowHeight = 16.0
	margin    = 10.0
	titleBand = 30.0
	fontSize  = 11.0
	charWidth = 6.6 // a generous average advance of the 11 px sans-serif font
)

// frame is a node of the merged stacks: a function called from the path
// of frames below it.
type frame struct {
	name     string
	samples  int64
	children []*frame // sorted by name, so a graph is the same for the same profile
}

// child returns f's child called name, added when missing.
func (f *frame) child(name string) *frame {
	i, found := slices.BinarySearchFunc(f.children, name, func(c *frame, n string) int { return strings.Compare(c.name, n) })
	if !found {
		f.children = slices.Insert(f.children, i, &frame{name: name})
	}
	return f.children[i]
}

// depth is the number of rows f and its callees take.
func (f *frame) depth() int {
	d := 0
	for _, c := range f.children {
		d = max(d, c.depth())
	}
	return d + 1
}

// merge builds the tree of p's stacks, counted by the sample value at
// index vi; the root ("all") holds every sample.
func merge(p *profile.Profile, vi int) *frame {
	root := &frame{name: "all"}
	for _, s := range p.Sample {
		n := s.Value[vi]
		if n <= 0 {
			continue
		}
		root.samples += n
		f := root
		// Locations go from the leaf to the root; a location's lines
		// from the innermost inlined call to the function it was
		// inlined into.
		for i := len(s.Location) - 1; i >= 0; i-- {
			loc := s.Location[i]
			if len(loc.Line) == 0 {
				f = f.child(fmt.Sprintf("0x%x", loc.Address))
				f.samples += n
				continue
			}
			for j := len(loc.Line) - 1; j >= 0; j-- {
				name := "?"
				if fn := loc.Line[j].Function; fn != nil && fn.Name != "" {
					name = fn.Name
				}
				f = f.child(name)
				f.samples += n
			}
		}
	}
	return root
}

// valueIndex returns the index of the sample value a flame graph counts:
// the sample count of a CPU profile, else the first value.
func valueIndex(p *profile.Profile) int {
	for i, st := range p.SampleType {
		if st.Type == "samples" && st.Unit == "count" {
			return i
		}
	}
	return 0
}

// cpuSeconds returns the CPU time p holds: the sum of its "cpu" values in
// nanoseconds, else its sample count times its sampling period.
func cpuSeconds(p *profile.Profile, samples int64) float64 {
	for i, st := range p.SampleType {
		if st.Type == "cpu" && st.Unit == "nanoseconds" {
			var ns int64
			for _, s := range p.Sample {
				ns += s.Value[i]
			}
			return float64(ns) / 1e9
		}
	}
	if p.PeriodType != nil && p.PeriodType.Unit == "nanoseconds" {
		return float64(samples*p.Period) / 1e9
	}
	return 0
}

// render writes p's flame graph as an SVG document.
func render(w io.Writer, p *profile.Profile, opt options) error {
	if len(p.SampleType) == 0 {
		return errors.New("the profile has no sample types")
	}
	root := merge(p, valueIndex(p))
	prune(root, opt.min*float64(root.samples))
	rows := root.depth()
	width := opt.width + 2*margin
	height := titleBand + float64(rows)*rowHeight + 2*margin

	var b bytes.Buffer
	fmt.Fprintf(&b, `<?xml version="1.0" encoding="UTF-8"?>`+"\n")
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="Verdana, DejaVu Sans, sans-serif" font-size="%.0f">`+"\n",
		width, height, width, height, fontSize)
	fmt.Fprintf(&b, `<rect x="0" y="0" width="%.0f" height="%.0f" fill="#fdfdf8"/>`+"\n", width, height)
	head := fmt.Sprintf("%s: %.2f s of CPU", opt.title, cpuSeconds(p, root.samples))
	if p.DurationNanos > 0 {
		head += fmt.Sprintf(" in %.2f s", float64(p.DurationNanos)/1e9)
	}
	head += fmt.Sprintf(", %d samples; frames under %.1f %% left out", root.samples, 100*opt.min)
	if root.samples == 0 {
		head += ": the process used no CPU while profiled"
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-size="14">%s</text>`+"\n", margin, margin+14, esc(head))
	if root.samples > 0 {
		// Row 0, the root, at the bottom; callees above their callers.
		bottom := height - margin
		var draw func(f *frame, x float64, row int)
		draw = func(f *frame, x float64, row int) {
			wd := opt.width * float64(f.samples) / float64(root.samples)
			y := bottom - float64(row+1)*rowHeight
			pct := 100 * float64(f.samples) / float64(root.samples)
			fmt.Fprintf(&b, `<g><title>%s&#10;%d samples (%.2f%%)</title>`, esc(f.name), f.samples, pct)
			fmt.Fprintf(&b, `<rect x="%.2f" y="%.2f" width="%.2f" height="%.2f" rx="2" fill="%s" stroke="#fdfdf8" stroke-width="0.5"/>`,
				margin+x, y, wd, rowHeight-1, colour(f.name))
			if label := fit(short(f.name), wd); label != "" {
				fmt.Fprintf(&b, `<text x="%.2f" y="%.2f" fill="#000">%s</text>`, margin+x+3, y+rowHeight-4.5, esc(label))
			}
			b.WriteString("</g>\n")
			for _, c := range f.children {
				draw(c, x, row+1)
				x += opt.width * float64(c.samples) / float64(root.samples)
			}
		}
		draw(root, 0, 0)
	}
	b.WriteString("</svg>\n")
	_, err := w.Write(b.Bytes())
	return err
}

// prune drops, under f, every frame with fewer than least samples (and so
// all it called).
func prune(f *frame, least float64) {
	f.children = slices.DeleteFunc(f.children, func(c *frame) bool { return float64(c.samples) < least })
	for _, c := range f.children {
		prune(c, least)
	}
}

// short drops the directories of a Go function's import path:
// "github.com/a/b/pkg.(*T).M" is "pkg.(*T).M".
func short(name string) string {
	// A '/' inside brackets belongs to a type argument, not the path.
	end := len(name)
	if i := strings.IndexAny(name, "[("); i >= 0 {
		end = i
	}
	if i := strings.LastIndex(name[:end], "/"); i >= 0 {
		return name[i+1:]
	}
	return name
}

// fit returns as much of s as a frame wd pixels wide shows, ".." marking
// a cut; "" when not even three characters fit.
func fit(s string, wd float64) string {
	n := int((wd - 6) / charWidth)
	if n < 3 {
		return ""
	}
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-2]) + ".."
}

// colour gives a function a warm colour of its own, the same in every
// graph: hues from red through orange to yellow, light enough for black
// text; the root is grey.
func colour(name string) string {
	if name == "all" {
		return "#c8c8c8"
	}
	h := fnv.New32a()
	h.Write([]byte(name))
	v := h.Sum32()
	r := 215 + v%41       // 215..255
	g := 110 + (v>>8)%121 // 110..230
	bl := 40 + (v>>16)%61 // 40..100
	return fmt.Sprintf("#%02x%02x%02x", r, g, bl)
}

// esc escapes s for XML character data.
func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s)) // a strings.Builder never fails
	return b.String()
}
