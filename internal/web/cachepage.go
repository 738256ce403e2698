package web

import (
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/lakefed/lakefed/internal/cache"
	"github.com/lakefed/lakefed/internal/httpx"
)

// The cache page (/ui/cache) shows how jobs read through the cache (issue
// 12, item 7): per file, the number of reads, their median and mean size,
// the bytes asked for against the file's size, how sequential the reads
// are and the multi-range requests. This is the view that showed
// TTreeCache turning 15,471 reads of median 2.6 KiB into 2,311 reads of
// median 90 KiB, so the first plot puts median read size against reads on
// log axes: a job reading without TTreeCache is a point far right and low,
// one with it far left and high. The second shows how much of each file
// jobs asked for: far below 100 % a job reads a few branches, above it
// the same bytes again.

// The cache role's *cache.Cache is what server wires in as Options.Cache.
var _ CacheSource = (*cache.Cache)(nil)

// Bounds of the cache page's work per request.
const (
	// cacheTableRows is how many files (the most recently read) the
	// table lists; all of them are at /ui/api/cache/files.
	cacheTableRows = 200
	// cachePlotFiles is how many files (the most recently read) the
	// plots draw.
	cachePlotFiles = 5000
)

// usageRow is one line of the usage table: what is used of a bound.
type usageRow struct {
	Name, Used, Bound, Frac string
	// Bar is the width of the usage bar; "" when there is no bound.
	Bar template.CSS
	// Full marks usage at or above 90 % of the bound (the default low
	// watermark: the purge is about to run, or running).
	Full bool
}

// fileRow is one line of the files table, every number with its unit.
type fileRow struct {
	Path, Size, Cached, Reads, Median, Mean, Requested, Sequential, MultiRange string
	Verified                                                                   bool
	Last                                                                       time.Time
}

type cachePage struct {
	Now     time.Time
	Status  cache.Status
	Block   string
	Usage   []usageRow
	Files   []fileRow
	Total   int
	Reads   string
	Asked   string
	Plots   []namedPlot
	HasData bool
}

// cacheSource returns the cache, or a 404 error when there is none.
func (d *Dashboard) cacheSource() (CacheSource, error) {
	if d.o.Cache == nil {
		return nil, httpx.NewError(http.StatusNotFound, "web: this process runs no cache", nil)
	}
	return d.o.Cache, nil
}

func (d *Dashboard) serveCache(w http.ResponseWriter, r *http.Request) {
	c, err := d.cacheSource()
	if err != nil {
		d.fail(w, r, err)
		return
	}
	st, files := c.Status(), d.cacheFiles(r, c)
	page := cachePage{Now: time.Now(), Status: st, Block: fmtBytes(st.BlockSize), Usage: usageRows(st.Usage),
		Total: len(files)}
	var reads, asked int64
	for _, f := range files {
		reads += f.Reads
		asked += f.Requested
	}
	page.Reads, page.Asked = countOf(reads, "reads"), fmtBytes(asked)
	for _, f := range files[:min(len(files), cacheTableRows)] {
		page.Files = append(page.Files, fileRowOf(f))
	}
	if page.Plots, err = cachePlots(files); err != nil {
		d.fail(w, r, err)
		return
	}
	page.HasData = len(files) > 0
	d.render(w, r, "cache.html", page)
}

// serveCachePlot serves one plot of the cache page as an SVG file:
// /ui/plot/cache/{name}.svg, name as the page's plot IDs.
func (d *Dashboard) serveCachePlot(w http.ResponseWriter, r *http.Request) {
	c, err := d.cacheSource()
	if err != nil {
		d.fail(w, r, err)
		return
	}
	name, ok := strings.CutSuffix(r.PathValue("name"), ".svg")
	if !ok {
		d.fail(w, r, badRequest("plot names end in .svg"))
		return
	}
	plots, err := cachePlots(d.cacheFiles(r, c))
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
	httpx.WriteError(w, http.StatusNotFound, fmt.Sprintf("web: the cache page has no plot %q", name))
}

// cacheFiles is c.Files(), less the files Options.MayList does not let
// r's caller list.
func (d *Dashboard) cacheFiles(r *http.Request, c CacheSource) []cache.FilePattern {
	files := c.Files()
	if d.o.MayList == nil {
		return files
	}
	return slices.DeleteFunc(files, func(f cache.FilePattern) bool { return !d.o.MayList(r, f.Path) })
}

// apiCache is /ui/api/cache: the cache's usage and group, as the cache's
// own /api/cache shows them.
func (d *Dashboard) apiCache(w http.ResponseWriter, r *http.Request) {
	c, err := d.cacheSource()
	if err != nil {
		d.fail(w, r, err)
		return
	}
	writeJSON(w, c.Status())
}

// apiCacheFiles is /ui/api/cache/files: the access pattern of every
// file, as the cache's own /api/cache/files shows it.
func (d *Dashboard) apiCacheFiles(w http.ResponseWriter, r *http.Request) {
	c, err := d.cacheSource()
	if err != nil {
		d.fail(w, r, err)
		return
	}
	files := d.cacheFiles(r, c)
	if files == nil {
		files = []cache.FilePattern{}
	}
	writeJSON(w, files)
}

// usageRows shows the cache's bytes and inodes against their bounds, and
// its files.
func usageRows(u cache.Usage) []usageRow {
	row := func(name string, used, bound int64, show func(int64) string) usageRow {
		r := usageRow{Name: name, Used: show(used), Bound: "no bound", Frac: "—"}
		if bound > 0 {
			f := float64(used) / float64(bound)
			r.Bound, r.Frac, r.Full = show(bound), fmtPct(f), f >= 0.9
			r.Bar = template.CSS(fmt.Sprintf("width: %.1f%%", 100*min(max(f, 0), 1)))
		}
		return r
	}
	return []usageRow{
		row("disk space", u.Bytes, u.MaxBytes, fmtBytes),
		row("inodes", u.Inodes, u.MaxInodes, func(n int64) string { return countOf(n, "inodes") }),
		{Name: "files", Used: countOf(u.Files, "files"), Bound: "—", Frac: "—"},
	}
}

// countOf shows a count with the noun it counts.
func countOf(n int64, noun string) string { return fmt.Sprintf("%d %s", n, noun) }

func fileRowOf(f cache.FilePattern) fileRow {
	r := fileRow{Path: f.Path, Size: fmtBytes(f.Size), Reads: countOf(f.Reads, "reads"),
		Median: "—", Mean: "—", Requested: "—", Sequential: "—", Verified: f.Verified, Last: f.Last,
		MultiRange: fmt.Sprintf("%d of %d requests", f.MultiRange, f.Requests)}
	r.Cached = fmtBytes(f.Cached)
	if f.Size > 0 {
		r.Cached += " (" + fmtPct(float64(f.Cached)/float64(f.Size)) + ")"
		r.Requested = fmtPct(f.RequestedOfSize)
	}
	if f.Reads > 0 {
		r.Median, r.Mean = fmtBytes(f.MedianRead), fmtBytes(int64(f.MeanRead+0.5))
	}
	if f.Reads > 1 {
		r.Sequential = fmtPct(f.Sequential)
	}
	return r
}

// Plot IDs of the cache page.
const (
	plotReadSize  = "cache-read-size"
	plotRequested = "cache-requested"
)

// cachePlots draws the cache page's plots of the most recently read
// files, one point per file, its path in the point's tooltip. Files
// whose reads are mostly sequential (at least half start where the one
// before ended) are one series, the others another: a streaming copy and
// a job hopping between baskets look different at a glance.
func cachePlots(files []cache.FilePattern) ([]namedPlot, error) {
	files = files[:min(len(files), cachePlotFiles)]
	seqName, rndName := "≥ 50 % of reads sequential", "< 50 % of reads sequential"
	var size, req [2]series
	for i := range 2 {
		name := seqName
		if i == 1 {
			name = rndName
		}
		size[i], req[i] = series{Name: name}, series{Name: name}
	}
	for _, f := range files {
		if f.Reads == 0 {
			continue
		}
		i := 1
		if f.Reads > 1 && f.Sequential >= 0.5 {
			i = 0
		}
		s := &size[i]
		s.X, s.Y, s.Labels = append(s.X, float64(f.Reads)), append(s.Y, float64(f.MedianRead)), append(s.Labels, f.Path)
		q := &req[i]
		q.X, q.Y, q.Labels = append(q.X, float64(f.Size)), append(q.Y, 100*f.RequestedOfSize), append(q.Labels, f.Path)
	}
	specs := []plotSpec{
		{ID: plotReadSize, Title: "Median read size against reads, per file", XLabel: "reads of the file (log scale)",
			YLabel: "median read size (bytes, log scale)", XUnit: "reads", YUnit: "B", LogX: true, LogY: true,
			Series: size[:]},
		{ID: plotRequested, Title: "Bytes requested against file size, per file", XLabel: "file size (bytes, log scale)",
			YLabel: "requested / file size (%, log scale)", XUnit: "B", YUnit: "%", LogX: true, LogY: true,
			RefY: 100, RefName: "whole file read once", Series: req[:]},
	}
	var out []namedPlot
	for _, sp := range specs {
		svg, err := renderSVG(sp)
		if err != nil {
			return nil, err
		}
		if svg != "" {
			out = append(out, namedPlot{ID: sp.ID, Title: sp.Title, SVG: svg})
		}
	}
	return out, nil
}
