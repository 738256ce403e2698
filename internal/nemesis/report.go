package nemesis

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
)

// Summary writes the run's table: the operations by kind (answered,
// failed, and the failures by kind), the faults by kind, and the
// violations by kind with the first few of each.
func Summary(w io.Writer, seed uint64, ops []Op, vs []Violation) error {
	type row struct {
		ok, failed int
		errs       map[string]int
	}
	byKind := map[Kind]*row{}
	faults := map[string]int{}
	for _, op := range ops {
		switch op.Kind {
		case FaultOp:
			if op.Target != "heal" {
				faults[op.Fault]++
			}
			continue
		case Inspect:
			continue
		}
		r := byKind[op.Kind]
		if r == nil {
			r = &row{errs: map[string]int{}}
			byKind[op.Kind] = r
		}
		if op.OK {
			r.ok++
		} else {
			r.failed++
			r.errs[op.ErrKind]++
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "seed %d: %d operations, %d violations\n\n", seed, len(ops), len(vs))
	fmt.Fprintln(tw, "operation\tok\terror\terrors by kind")
	for _, k := range sortedKeys(byKind) {
		r := byKind[k]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", k, r.ok, r.failed, counts(r.errs))
	}
	fmt.Fprintln(tw, "\nfault\tcount")
	for _, k := range sortedKeys(faults) {
		fmt.Fprintf(tw, "%s\t%d\n", k, faults[k])
	}
	byViolation := map[string][]Violation{}
	for _, v := range vs {
		byViolation[v.Kind] = append(byViolation[v.Kind], v)
	}
	fmt.Fprintln(tw, "\nviolation\tcount")
	if len(vs) == 0 {
		fmt.Fprintln(tw, "(none)\t0")
	}
	for _, k := range sortedKeys(byViolation) {
		fmt.Fprintf(tw, "%s\t%d\n", k, len(byViolation[k]))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, k := range sortedKeys(byViolation) {
		for _, v := range first(byViolation[k], 5) {
			if _, err := fmt.Fprintf(w, "  %s\n", v); err != nil {
				return err
			}
		}
	}
	return nil
}

func sortedKeys[K ~string, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys
}

func counts(m map[string]int) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s:%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}
