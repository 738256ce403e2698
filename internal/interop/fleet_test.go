package interop

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/results"
	"github.com/lakefed/lakefed/internal/testenv"
)

// TestFleetTestsOncePerPeriod: three federators (separate processes)
// sharing PostgreSQL and Redis, each with the scheduled tests on, test
// each site once per period between them: the store holds one run per
// site and period, not three.
func TestFleetTestsOncePerPeriod(t *testing.T) {
	bin := lakefedBinary(t)
	pg := testenv.StartPostgres(t)
	db := pg.NewDatabase(t)
	redis := testenv.StartRedis(t)
	dir := t.TempDir()
	var eps strings.Builder
	sites := []string{"site-a", "site-b", "site-c"}
	var procs []*proc
	for _, name := range sites {
		root := filepath.Join(dir, name)
		os.MkdirAll(root, 0o755)
		port := testenv.FreePort(t)
		procs = append(procs, &proc{bin: bin, port: port, log: root + ".log",
			args: []string{"storage", "--root", root, "--listen", "127.0.0.1:" + strconv.Itoa(port)}})
		fmt.Fprintf(&eps, "    - {name: %s, url: \"http://127.0.0.1:%d/\", writable: true}\n", name, port)
	}
	const interval = 2 * time.Second
	for i := range 3 {
		port := testenv.FreePort(t)
		cfg := fmt.Sprintf(`listen: 127.0.0.1:%d
results: %q
shared: {redis: %q, node: fed-%d}
tests: {interval: %s, timeout: 5s}
federation:
  endpoints:
%s`, port, db, redis.URL, i, interval, eps.String())
		f := filepath.Join(dir, fmt.Sprintf("fed-%d.yaml", i))
		if err := os.WriteFile(f, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		procs = append(procs, &proc{bin: bin, port: port, log: filepath.Join(dir, fmt.Sprintf("fed-%d.log", i)), args: []string{"serve", f}})
	}
	for _, p := range procs {
		p.start(t)
		t.Cleanup(p.kill)
	}
	ctx := context.Background()
	st, err := results.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	runs := func(site string) []results.Run {
		rs, err := st.List(ctx, results.Filter{Kind: results.KindFunctional, Site: site, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	testenv.Eventually(t, 20*interval, "5 periods of tests at every site", func() bool {
		for _, s := range sites {
			if len(runs(s)) < 6 {
				return false
			}
		}
		return true
	})
	for _, p := range procs[len(sites):] {
		p.kill()
	}
	for _, s := range sites {
		rs := runs(s)
		periods := map[int64]int{}
		for _, r := range rs {
			periods[r.Started.UnixNano()/int64(interval)]++
		}
		for p, n := range periods {
			if n != 1 {
				t.Errorf("%s: %d runs in the period starting %v, want 1 (3 federators sharing the store)",
					s, n, time.Unix(0, p*int64(interval)).Format(time.TimeOnly))
			}
		}
		if len(rs) != len(periods) {
			t.Errorf("%s: %d runs in %d periods, want one per period", s, len(rs), len(periods))
		}
	}
}
