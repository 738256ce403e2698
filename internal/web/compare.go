package web

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/lakefed/lakefed/internal/results"
)

type compareRow struct {
	Key    string
	Values []string
	Differ bool
}

type comparePage struct {
	Runs  []results.Run
	Rows  []compareRow
	Plots []namedPlot
	IDs   string
}

func (d *Dashboard) serveCompare(w http.ResponseWriter, r *http.Request) {
	ids, err := parseIDs(r.URL.Query()["ids"])
	if err != nil {
		d.fail(w, r, err)
		return
	}
	var (
		runs  []results.Run
		steps [][]results.Step
		sums  []map[string]any
		keys  []string
	)
	for _, id := range ids {
		run, err := d.o.Store.Get(r.Context(), id)
		if err != nil {
			d.fail(w, r, err)
			return
		}
		st, err := d.o.Store.Steps(r.Context(), id)
		if err != nil {
			d.fail(w, r, err)
			return
		}
		runs, steps = append(runs, run), append(steps, st)
		m := decodeJSON(run.Summary)
		sums = append(sums, m)
		for k := range m {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	slices.Sort(keys)
	page := comparePage{Runs: runs}
	fixed := []struct {
		key string
		val func(results.Run) string
	}{
		{"kind", func(r results.Run) string { return r.Kind }},
		{"site", func(r results.Run) string { return r.Site }},
		{"route", protoLabel},
		{"started", func(r results.Run) string { return r.Started.Local().Format("2006-01-02 15:04:05") }},
		{"classification", func(r results.Run) string { return r.Classification }},
	}
	for _, f := range fixed {
		row := compareRow{Key: f.key}
		for _, run := range runs {
			row.Values = append(row.Values, f.val(run))
		}
		page.Rows = append(page.Rows, row.mark())
	}
	for _, k := range keys {
		row := compareRow{Key: k}
		for i, m := range sums {
			row.Values = append(row.Values, fmtKeyed(runs[i].Kind, k, m[k]))
		}
		page.Rows = append(page.Rows, row.mark())
	}
	page.Rows = append(page.Rows, paramRows(runs)...)
	if page.Plots, err = d.runPlots(r.Context(), runs, steps); err != nil {
		d.fail(w, r, err)
		return
	}
	var s []string
	for _, id := range ids {
		s = append(s, fmt.Sprint(id))
	}
	page.IDs = strings.Join(s, ",")
	d.render(w, r, "compare.html", page)
}

// paramRows are the compare rows of the runs' parameters, each key
// marked as one.
func paramRows(runs []results.Run) []compareRow {
	var (
		ps   []map[string]any
		keys []string
	)
	for _, run := range runs {
		m := decodeJSON(run.Params)
		ps = append(ps, m)
		for k := range m {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	slices.Sort(keys)
	var rows []compareRow
	for _, k := range keys {
		row := compareRow{Key: k + " (parameter)"}
		for i, m := range ps {
			row.Values = append(row.Values, fmtKeyed(runs[i].Kind, k, m[k]))
		}
		rows = append(rows, row.mark())
	}
	return rows
}

func (c compareRow) mark() compareRow {
	for _, v := range c.Values[1:] {
		if v != c.Values[0] {
			c.Differ = true
		}
	}
	return c
}
