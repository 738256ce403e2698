package interop

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/bench"
	"github.com/lakefed/lakefed/internal/results"
	"github.com/lakefed/lakefed/internal/testenv"
)

// agentFleet is a storage site, PostgreSQL, Redis and three bench agents
// (separate processes) waiting for jobs.
type agentFleet struct {
	bin, site, db string
	pg            *testenv.Postgres
	redis         *testenv.Redis
	agents        []*exec.Cmd
	dir           string
}

func startAgentFleet(t *testing.T) *agentFleet {
	f := &agentFleet{bin: lakefedBinary(t), pg: testenv.StartPostgres(t), redis: testenv.StartRedis(t), dir: t.TempDir()}
	f.db = f.pg.NewDatabase(t)
	root := filepath.Join(f.dir, "site")
	os.MkdirAll(root, 0o755)
	port := testenv.FreePort(t)
	site := &proc{bin: f.bin, port: port, log: root + ".log",
		args: []string{"storage", "--root", root, "--listen", "127.0.0.1:" + strconv.Itoa(port)}}
	site.start(t)
	t.Cleanup(site.kill)
	f.site = fmt.Sprintf("http://127.0.0.1:%d/", port)
	for i := range 3 {
		log, err := os.Create(filepath.Join(f.dir, fmt.Sprintf("agent-%d.log", i)))
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(f.bin, "bench", "agent", "--queue", f.redis.URL, "--results", f.db, "--node", fmt.Sprintf("agent-%d", i))
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		log.Close()
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		f.agents = append(f.agents, cmd)
	}
	return f
}

// run runs a bench test through the agents and returns its stored run,
// and its summary's fleet report.
func (f *agentFleet) run(t *testing.T, during func(), args ...string) (results.Run, *bench.FleetReport) {
	t.Helper()
	args = append(append([]string{"bench"}, args...), "--queue", f.redis.URL, "--db", f.db, "--json", f.site)
	cmd := exec.Command(f.bin, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	done := make(chan struct{})
	go func() {
		defer close(done)
		if during != nil {
			during()
		}
	}()
	out, err := cmd.Output()
	<-done
	if err != nil {
		t.Fatalf("lakefed %s: %v\n%s\n%s", strings.Join(args, " "), err, out, stderr.String())
	}
	var got struct {
		ID      int64 `json:"id"`
		Summary struct {
			Fleet *bench.FleetReport `json:"fleet"`
		} `json:"summary"`
	}
	if err := json.Unmarshal(out, &got); err != nil || got.ID == 0 || got.Summary.Fleet == nil {
		t.Fatalf("bench output %s: %v\n%s", out, err, stderr.String())
	}
	st, err := results.Open(context.Background(), f.db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r, err := st.Get(context.Background(), got.ID)
	if err != nil {
		t.Fatal(err)
	}
	return r, got.Summary.Fleet
}

// TestAgentsShareARun: three bench agents run one open test of 3 × 2,000
// jobs; one is killed with kill -9 in the middle. The run completes: the
// jobs of the dead agent are taken over by the others (reclaimed), none
// is lost, and every sample the agents produced is in the store, each
// naming the node that ran its job.
func TestAgentsShareARun(t *testing.T) {
	f := startAgentFleet(t)
	kill := func() {
		// Once agent-2 runs jobs, a span into the run: then kill -9.
		testenv.Within(60*time.Second, func() bool {
			b, _ := os.ReadFile(filepath.Join(f.dir, "agent-2.log"))
			return strings.Contains(string(b), "running jobs")
		})
		time.Sleep(8 * time.Second)
		f.agents[2].Process.Signal(syscall.SIGKILL)
	}
	r, fl := f.run(t, kill, "open", "--jobs", "6000", "--ramp-step", "0", "--hold", "24s", "--period", "10s", "--files", "300")
	if r.Status != results.StatusDone || fl.Lost != 0 || fl.MissingSamples != 0 {
		t.Fatalf("run %d: status %s (%s), fleet %+v; want done with nothing lost", r.ID, r.Status, r.Error, fl)
	}
	if fl.Reclaimed == 0 {
		t.Errorf("fleet %+v: no job reclaimed from the agent killed mid-run", fl)
	}
	ran := 0
	for _, n := range fl.Nodes {
		ran += n
	}
	if ran < 6000 || fl.Nodes["agent-0"] == 0 || fl.Nodes["agent-1"] == 0 {
		t.Errorf("fleet nodes %v: want the 6000 jobs run by the two agents left", fl.Nodes)
	}
	st, err := results.Open(context.Background(), f.db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	nodes, err := st.Nodes(context.Background(), r.ID)
	if err != nil || len(nodes) < 2 {
		t.Errorf("run %d: samples of nodes %v, %v; want a series per agent that finished", r.ID, nodes, err)
	}
	// The store's commands read the run from PostgreSQL as from SQLite.
	id := strconv.FormatInt(r.ID, 10)
	for _, args := range [][]string{
		{"list"}, {"show", id}, {"compare", id, id}, {"export", "--format", "csv", id},
	} {
		out, err := exec.Command(f.bin, append([]string{"bench", args[0], "--db", f.db}, args[1:]...)...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "open") && args[0] != "export" || len(out) == 0 {
			t.Errorf("lakefed bench %s --db postgres://...: %v\n%.2000s", strings.Join(args, " "), err, out)
		}
	}
}

// TestAgentsOutliveTheStore: PostgreSQL killed with kill -9 as a run
// from agents ends, and restarted a few seconds later: the agents keep
// their samples and write them once it is back, and the run has them
// all.
func TestAgentsOutliveTheStore(t *testing.T) {
	f := startAgentFleet(t)
	outage := func() {
		// The jobs are handed out 3 s before the run starts, and it holds
		// for 12 s: kill PostgreSQL 2 s before the end, restart it 6 s on.
		testenv.Within(60*time.Second, func() bool {
			b, _ := os.ReadFile(filepath.Join(f.dir, "agent-0.log"))
			return strings.Contains(string(b), "running jobs")
		})
		time.Sleep(13 * time.Second)
		if err := f.pg.Kill(); err != nil {
			t.Errorf("kill postgres: %v", err)
		}
		t.Logf("postgres killed at %v", time.Now())
		time.Sleep(6 * time.Second) // the outage, past the run's end
		f.pg.Restart(t)
	}
	r, fl := f.run(t, outage, "open", "--jobs", "300", "--ramp-step", "0", "--ramp-every", "12s", "--hold", "12s", "--period", "1s", "--files", "100")
	if r.Status != results.StatusDone || fl.MissingSamples != 0 || fl.Lost != 0 {
		t.Fatalf("run %d: status %s (%s), fleet %+v; want every sample after the store came back", r.ID, r.Status, r.Error, fl)
	}
	waited := false
	for i := range f.agents {
		b, _ := os.ReadFile(filepath.Join(f.dir, fmt.Sprintf("agent-%d.log", i)))
		waited = waited || strings.Contains(string(b), "keeping the samples and trying again")
	}
	if !waited {
		var logs []string
		for i := range f.agents {
			b, _ := os.ReadFile(filepath.Join(f.dir, fmt.Sprintf("agent-%d.log", i)))
			for _, l := range strings.Split(string(b), "\n") {
				if !strings.Contains(l, "running jobs") {
					logs = append(logs, l)
				}
			}
		}
		t.Errorf("no agent found the store down when writing: the outage missed the run's end\n%s", strings.Join(logs, "\n"))
	}
}

// TestAgentsClassifyAsOneProcess: the AAA open test at its shape (a ramp
// to 50 jobs at 2 Hz, sped up) and the paced read test with 600 jobs,
// run from three agents, are classified as they are from one process:
// "ok" against a healthy site.
func TestAgentsClassifyAsOneProcess(t *testing.T) {
	f := startAgentFleet(t)
	for _, args := range [][]string{
		{"open", "--speed", "10"},
		{"read", "--speed", "24", "--block", "64KiB"},
	} {
		r, fl := f.run(t, nil, args...)
		if r.Status != results.StatusDone || r.Classification != "ok" || fl.Lost != 0 {
			t.Errorf("bench %s from 3 agents: status %s, %q %v, fleet %+v; want done and ok",
				args[0], r.Status, r.Classification, r.Reasons, fl)
		}
		if len(fl.Nodes) != 3 {
			t.Errorf("bench %s: jobs ran on %v, want the three agents", args[0], fl.Nodes)
		}
	}
}
