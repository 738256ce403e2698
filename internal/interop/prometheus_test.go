package interop

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/lakefed/lakefed/internal/testenv"
)

// rulesDir holds the Prometheus rules lakefed ships and their unit tests.
const rulesDir = "../../deploy/prometheus"

// TestPrometheusRules runs promtool on the shipped rules: they parse
// (check rules), and every alert fires when it should and stays quiet
// when it should not (test rules, lakefed.rules.test.yml).
func TestPrometheusRules(t *testing.T) {
	promtool := testenv.Require(t, "promtool")
	for _, args := range [][]string{
		{"check", "rules", "lakefed.rules.yml"},
		{"test", "rules", "lakefed.rules.test.yml"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, promtool, args...)
		cmd.Dir = rulesDir
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestPrometheusAlertsOnLake runs a real Prometheus on the shipped rules
// against a real lake: three storage sites, each its own process, and one
// process with the federator, a cache on its own listener, a write buffer,
// the scheduled site tests and an auth section. Prometheus scrapes every
// listener each second.
//
// Before anything fails, every lakefed_* series the alerts use is
// exported and no alert is pending or firing. Then site-c, the only site
// under /scratch, is killed (kill -9): its own target goes down
// (LakefedDown), the federator marks it down (LakefedSiteDown for site-c
// alone), /scratch has no live endpoint left (LakefedPrefixUnavailable),
// and its next scheduled test is "to debug" (LakefedSiteToDebug).
//
// The rules are the shipped file with only the for: durations shortened
// to a second: the expressions, labels and annotations run as shipped,
// and promtool's unit tests (TestPrometheusRules) hold the durations. A
// minute or more of for: would make this test wait minutes for nothing
// it does not already show.
func TestPrometheusAlertsOnLake(t *testing.T) {
	promBin := testenv.Require(t, "prometheus")
	bin := lakefedBinary(t)
	dir := t.TempDir()
	start := time.Now()

	// The sites, each its own process, so that one can die alone.
	sites := map[string]*testenv.Proc{}
	addrs := map[string]string{}
	for _, name := range []string{"site-a", "site-b", "site-c"} {
		root := filepath.Join(dir, name)
		if err := os.MkdirAll(root, 0o755); err != nil {
			t.Fatal(err)
		}
		port := testenv.FreePort(t)
		addrs[name] = "127.0.0.1:" + strconv.Itoa(port)
		p := &testenv.Proc{Bin: bin, Port: port, Log: root + ".log",
			Args: []string{"storage", "--root", root, "--listen", addrs[name]}}
		p.Start(t)
		t.Cleanup(p.Kill)
		sites[name] = p
	}

	fedPort, cachePort := testenv.FreePort(t), testenv.FreePort(t)
	cfg := fmt.Sprintf(`listen: 127.0.0.1:%d
results: %s
federation:
  health: {interval: 500ms, timeout: 2s, fail_after: 2, recover_after: 1}
  endpoints:
    - {name: site-a, url: "http://%s/", prefix: /data, writable: true, priority: 1}
    - {name: site-b, url: "http://%s/", prefix: /data, writable: true, priority: 2}
    - {name: site-c, url: "http://%s/", prefix: /scratch, writable: true}
cache: {listen: "127.0.0.1:%d", dir: %s, origin: federation}
buffer:
  dir: %s
  prefixes: [{prefix: /data/incoming, targets: [site-a, site-b]}]
tests: {interval: 2s, timeout: 2s}
auth:
  rules:
    - {prefix: /data, anonymous: [read, list, create, modify, delete]}
    - {prefix: /scratch, anonymous: [read, list, create, modify, delete]}
`, fedPort, filepath.Join(dir, "results.db"), addrs["site-a"], addrs["site-b"], addrs["site-c"],
		cachePort, filepath.Join(dir, "cache"), filepath.Join(dir, "buffer"))
	cfgPath := filepath.Join(dir, "lake.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	lake := &testenv.Proc{Bin: bin, Port: fedPort, Log: filepath.Join(dir, "lake.log"), Args: []string{"serve", cfgPath}}
	lake.Start(t)
	t.Cleanup(lake.Kill)
	fedURL := "http://127.0.0.1:" + strconv.Itoa(fedPort)
	cacheURL := "http://127.0.0.1:" + strconv.Itoa(cachePort)
	if err := testenv.WaitPort(cachePort, 30*time.Second); err != nil {
		t.Fatal(err)
	}

	// Some traffic, so that the series that appear on first use exist:
	// a file through the buffer, read twice through the cache, and a
	// request the auth rules refuse.
	if resp, msg := do(t, http.MethodPut, fedURL+"/data/incoming/f", []byte("some bytes")); resp.StatusCode/100 != 2 {
		t.Fatalf("PUT through the buffer = %d %s", resp.StatusCode, msg)
	}
	for range 2 {
		if resp, msg := doWith(t, http.DefaultClient, http.MethodGet, cacheURL+"/data/incoming/f", nil); resp.StatusCode != http.StatusOK {
			t.Fatalf("GET through the cache = %d %s", resp.StatusCode, msg)
		}
	}
	if resp, _ := do(t, http.MethodGet, fedURL+"/elsewhere/f", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET outside the rules = %d, want 401", resp.StatusCode)
	}

	// Prometheus, on the shipped rules with short for: durations.
	rules := shortFor(t, filepath.Join(rulesDir, "lakefed.rules.yml"), filepath.Join(dir, "lakefed.rules.yml"))
	promPort := testenv.FreePort(t)
	var storageTargets []string
	for _, name := range []string{"site-a", "site-b", "site-c"} {
		storageTargets = append(storageTargets, strconv.Quote(addrs[name]))
	}
	promCfg := fmt.Sprintf(`global: {scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}
rule_files: [%q]
scrape_configs:
  - job_name: lakefed
    static_configs: [{targets: ["127.0.0.1:%d", "127.0.0.1:%d"]}]
  - job_name: lakefed-storage
    static_configs: [{targets: [%s]}]
`, rules, fedPort, cachePort, strings.Join(storageTargets, ", "))
	promCfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(promCfgPath, []byte(promCfg), 0o644); err != nil {
		t.Fatal(err)
	}
	prom := &testenv.Proc{Bin: promBin, Port: promPort, Log: filepath.Join(dir, "prometheus.log"), Args: []string{
		"--config.file=" + promCfgPath, "--storage.tsdb.path=" + filepath.Join(dir, "tsdb"),
		"--web.listen-address=127.0.0.1:" + strconv.Itoa(promPort), "--log.level=warn"}}
	prom.Start(t)
	t.Cleanup(prom.Kill)
	t.Cleanup(func() {
		if t.Failed() {
			for _, f := range []string{"lake.log", "prometheus.log"} {
				b, _ := os.ReadFile(filepath.Join(dir, f))
				t.Logf("%s:\n%s", f, b)
			}
		}
	})
	api := &promAPI{base: "http://127.0.0.1:" + strconv.Itoa(promPort)}

	// Every target up and every series the alerts use there, then one
	// evaluation of the rules on it: only then does "no alert" mean the
	// rules were quiet on a healthy lake.
	want := ruleMetrics(t, filepath.Join(rulesDir, "lakefed.rules.yml"))
	var missing []string
	if !testenv.Within(time.Minute, throttle(func() bool {
		up, err := api.query(`count(up{job=~"lakefed.*"} == 1)`)
		if err != nil || len(up) != 1 || up[0].Value[1] != "5" {
			missing = []string{"up of 5 targets"}
			return false
		}
		names, err := api.names()
		if err != nil {
			missing = []string{err.Error()}
			return false
		}
		missing = slices.DeleteFunc(slices.Clone(want), func(n string) bool { return slices.Contains(names, n) })
		return len(missing) == 0
	})) {
		t.Fatalf("not within a minute: every target up and every lakefed_* series the rules use exported; missing %v", missing)
	}
	ready := time.Now()
	testenv.Eventually(t, 30*time.Second, "an evaluation of the alerts after every series was there", throttle(func() bool {
		at, err := api.lastEvaluation("lakefed.alerts")
		return err == nil && at.After(ready)
	}))
	alerts, err := api.alerts()
	if err != nil {
		t.Fatal(err)
	}
	if len(alerts) != 0 {
		t.Fatalf("alerts on a healthy lake: %+v", alerts)
	}
	t.Logf("healthy lake scraped (%d lakefed_* series the rules use) and evaluated %v after the start, no alert",
		len(want), time.Since(start).Round(time.Millisecond))

	killed := time.Now()
	sites["site-c"].Kill()
	type wantAlert struct{ name, label, value string }
	wants := []wantAlert{
		{"LakefedDown", "instance", addrs["site-c"]},
		{"LakefedSiteDown", "endpoint", "site-c"},
		{"LakefedPrefixUnavailable", "prefix", "/scratch"},
		{"LakefedSiteToDebug", "endpoint", "site-c"},
	}
	var firing []promAlert
	if !testenv.Within(time.Minute, throttle(func() bool {
		if firing, err = api.alerts(); err != nil {
			return false
		}
		for _, w := range wants {
			if !slices.ContainsFunc(firing, func(a promAlert) bool {
				return a.State == "firing" && a.Labels["alertname"] == w.name && a.Labels[w.label] == w.value
			}) {
				return false
			}
		}
		return true
	})) {
		t.Fatalf("not within a minute of killing site-c: %+v firing; alerts %+v", wants, firing)
	}
	t.Logf("site-c killed: its alerts fired within %v", time.Since(killed).Round(time.Millisecond))
	for _, a := range firing {
		switch n := a.Labels["alertname"]; {
		case n == "LakefedSiteDown" && a.Labels["endpoint"] != "site-c",
			n == "LakefedPrefixUnavailable" && a.Labels["prefix"] != "/scratch",
			n == "LakefedDown" && a.Labels["instance"] != addrs["site-c"]:
			t.Errorf("alert beside the dead site's: %+v", a)
		case n == "LakefedSiteDown":
			if a.Labels["severity"] != "warning" || !strings.Contains(a.Annotations["summary"], "site-c") ||
				!strings.Contains(a.Annotations["description"], "/api/endpoints") {
				t.Errorf("LakefedSiteDown labels %v, annotations %v: want severity warning and what to look at", a.Labels, a.Annotations)
			}
		}
	}
}

// shortFor writes the rules file src to dst with every alert's for:
// set to one second, and returns dst. Nothing else changes.
func shortFor(t *testing.T, src, dst string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Groups []struct {
			Name     string           `yaml:"name"`
			Interval string           `yaml:"interval,omitempty"`
			Rules    []map[string]any `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range doc.Groups {
		for _, r := range g.Rules {
			if _, ok := r["alert"]; ok {
				r["for"] = "1s"
				n++
			}
		}
	}
	if n == 0 {
		t.Fatalf("%s: no alerts", src)
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}

// ruleMetrics returns the lakefed_* series the rules of file read: in
// their expressions and in the queries of their annotations.
func ruleMetrics(t *testing.T, file string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Groups []struct {
			Rules []struct {
				Expr        string            `yaml:"expr"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	// Not after a colon: instance:lakefed_... is a recorded series.
	inExpr := regexp.MustCompile(`(?:^|[^:\w])(lakefed_\w+)`)
	inQuery := regexp.MustCompile(`printf "(lakefed_\w+)`)
	var out []string
	add := func(ms [][]string) {
		for _, m := range ms {
			if !slices.Contains(out, m[1]) {
				out = append(out, m[1])
			}
		}
	}
	for _, g := range doc.Groups {
		for _, r := range g.Rules {
			add(inExpr.FindAllStringSubmatch(r.Expr, -1))
			for _, a := range r.Annotations {
				add(inQuery.FindAllStringSubmatch(a, -1))
			}
		}
	}
	slices.Sort(out)
	if len(out) < 10 {
		t.Fatalf("%s: only %v found", file, out)
	}
	return out
}

// throttle lets cond run at most every 200 ms, so that a wait on
// Prometheus does not query it a hundred times a second; between runs it
// answers false.
func throttle(cond func() bool) func() bool {
	var last time.Time
	return func() bool {
		if time.Since(last) < 200*time.Millisecond {
			return false
		}
		last = time.Now()
		return cond()
	}
}

// promAPI queries Prometheus's HTTP API.
type promAPI struct{ base string }

// promAlert is one alert of /api/v1/alerts.
type promAlert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	State       string            `json:"state"`
	Value       string            `json:"value"`
}

func (p *promAPI) get(path string, v any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var env struct {
		Status string          `json:"status"`
		Data   json.RawMessage `json:"data"`
		Error  string          `json:"error"`
	}
	if err := json.Unmarshal(b, &env); err != nil {
		return fmt.Errorf("%s: %d %s", path, resp.StatusCode, b)
	}
	if env.Status != "success" {
		return fmt.Errorf("%s: %s", path, env.Error)
	}
	return json.Unmarshal(env.Data, v)
}

// alerts returns the pending and firing alerts.
func (p *promAPI) alerts() ([]promAlert, error) {
	var d struct {
		Alerts []promAlert `json:"alerts"`
	}
	err := p.get("/api/v1/alerts", &d)
	return d.Alerts, err
}

// names returns the names of every series Prometheus holds.
func (p *promAPI) names() ([]string, error) {
	var names []string
	err := p.get("/api/v1/label/__name__/values", &names)
	return names, err
}

// promSample is one sample of an instant query: its labels, and
// [time, "value"].
type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// query runs an instant query that returns a vector.
func (p *promAPI) query(q string) ([]promSample, error) {
	var d struct {
		Result []promSample `json:"result"`
	}
	err := p.get("/api/v1/query?query="+url.QueryEscape(q), &d)
	return d.Result, err
}

// lastEvaluation returns when the rule group was last evaluated.
func (p *promAPI) lastEvaluation(group string) (time.Time, error) {
	var d struct {
		Groups []struct {
			Name           string    `json:"name"`
			LastEvaluation time.Time `json:"lastEvaluation"`
		} `json:"groups"`
	}
	if err := p.get("/api/v1/rules", &d); err != nil {
		return time.Time{}, err
	}
	for _, g := range d.Groups {
		if g.Name == group {
			return g.LastEvaluation, nil
		}
	}
	return time.Time{}, fmt.Errorf("no rule group %s", group)
}
