package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lakefed/lakefed/internal/results"
)

// A run of many jobs can come from many nodes, as HammerCloud's and the
// CMS AAA scale tests' jobs do: the command that starts it (the
// coordinator) prepares the test and hands its jobs out, in chunks,
// through a Redis stream with a consumer group; bench agents on worker
// nodes take chunks, run their jobs on the run's one schedule, write
// their samples (naming their node) into the shared results store, and
// acknowledge. An agent renews its hold on the chunks it runs every
// second; a chunk not renewed for ClaimIdle (its agent died or was cut
// off) is claimed by another agent (XAUTOCLAIM), which runs the rest of
// its jobs, or, when no agent takes it by the run's end, counted as
// lost. The coordinator finishes the run from the samples in the store,
// and says how many jobs were reclaimed or lost and how many samples are
// missing.
//
// Redis keys (lakefed:v1:bench:...): the stream "jobs" and its group
// "agents"; per run, "run:ID:test" (the PacedTest, JSON), "run:ID:done"
// (the chunks acknowledged), "run:ID:count" (samples produced, per node
// the jobs run).

const (
	queuePrefix = "lakefed:v1:bench:"
	queueStream = queuePrefix + "jobs"
	queueGroup  = "agents"
	// ClaimIdle is how long a chunk's hold may go unrenewed before
	// another agent may claim it.
	ClaimIdle = 5 * time.Second
	// runKeyTTL keeps a run's keys for a day after it was handed out.
	runKeyTTL = 24 * time.Hour
)

// Queue is the Redis stream a run's jobs are handed out through.
type Queue struct {
	rdb *redis.Client
}

// OpenQueue connects to the queue at url (redis://HOST:PORT/DB).
func OpenQueue(ctx context.Context, url string) (*Queue, error) {
	o, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("bench: queue: %w", err)
	}
	q := &Queue{rdb: redis.NewClient(o)}
	err = q.rdb.XGroupCreateMkStream(ctx, queueStream, queueGroup, "0").Err()
	if err != nil && !strings.Contains(err.Error(), "BUSYGROUP") {
		q.rdb.Close()
		return nil, fmt.Errorf("bench: queue %s: %w", url, err)
	}
	return q, nil
}

// Close closes the connection.
func (q *Queue) Close() error { return q.rdb.Close() }

func runKey(run int64, what string) string {
	return queuePrefix + "run:" + strconv.FormatInt(run, 10) + ":" + what
}

// chunk is one message of the stream: jobs [From, To) of run Run, which
// starts at Start (unix nanoseconds, the coordinator's clock: the nodes'
// clocks must agree, as for any distributed scale test).
type chunk struct {
	Run      int64
	Target   string
	Start    time.Time
	From, To int
}

func (c chunk) values() map[string]any {
	return map[string]any{"run": c.Run, "target": c.Target, "start": c.Start.UnixNano(), "from": c.From, "to": c.To}
}

func parseChunk(v map[string]any) (chunk, error) {
	var c chunk
	num := func(k string) int64 {
		s, _ := v[k].(string)
		n, _ := strconv.ParseInt(s, 10, 64)
		return n
	}
	c.Run, c.From, c.To = num("run"), int(num("from")), int(num("to"))
	c.Start = time.Unix(0, num("start"))
	c.Target, _ = v["target"].(string)
	if c.Run == 0 || c.Target == "" || c.To <= c.From {
		return c, fmt.Errorf("bench: a malformed chunk %v", v)
	}
	return c, nil
}

// FleetReport is what the nodes of a run did, in its summary.
type FleetReport struct {
	// Nodes are the jobs each node ran (a reclaimed job counts for
	// both).
	Nodes map[string]int `json:"nodes"`
	// Chunks is how many chunks the jobs were handed out in; Reclaimed
	// the jobs another agent took over from one that stopped; Lost the
	// jobs no agent finished.
	Chunks    int `json:"chunks"`
	Reclaimed int `json:"reclaimed_jobs"`
	Lost      int `json:"lost_jobs"`
	// MissingSamples are samples the agents produced that the store does
	// not hold (it could not be written to).
	MissingSamples int64 `json:"missing_samples"`
}

// Distributed is a run handed out to agents (Distribute).
type Distributed struct {
	q      *Queue
	run    int64
	test   *PacedTest
	start  time.Time
	ids    map[string]chunk
	claims map[string]bool
}

// Distribute hands the jobs of p, a run stored as run in the results
// store the agents write to, out in chunks of size jobs. The run starts
// at start (give the agents a moment to take their chunks).
func (q *Queue) Distribute(ctx context.Context, run int64, target string, p *PacedTest, start time.Time, size int) (*Distributed, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	if err := q.rdb.Set(ctx, runKey(run, "test"), b, runKeyTTL).Err(); err != nil {
		return nil, fmt.Errorf("bench: queue: %w", err)
	}
	d := &Distributed{q: q, run: run, test: p, start: start, ids: map[string]chunk{}, claims: map[string]bool{}}
	size = max(size, 1)
	for from := 0; from < p.Jobs(); from += size {
		c := chunk{Run: run, Target: target, Start: start, From: from, To: min(from+size, p.Jobs())}
		id, err := q.rdb.XAdd(ctx, &redis.XAddArgs{Stream: queueStream, Values: c.values()}).Result()
		if err != nil {
			return nil, fmt.Errorf("bench: queue: %w", err)
		}
		d.ids[id] = c
	}
	return d, nil
}

// Wait waits until every chunk is acknowledged or grace after the run's
// end, whichever comes first, and reports what the nodes did.
func (d *Distributed) Wait(ctx context.Context, grace time.Duration) (*FleetReport, error) {
	deadline := d.start.Add(d.test.End() + grace)
	rdb := d.q.rdb
	for {
		done, err := rdb.SCard(ctx, runKey(d.run, "done")).Result()
		if err != nil {
			return nil, fmt.Errorf("bench: queue: %w", err)
		}
		d.noteClaims(ctx)
		if int(done) >= len(d.ids) || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		t := time.NewTimer(500 * time.Millisecond)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
	ctx = context.WithoutCancel(ctx)
	r := &FleetReport{Nodes: map[string]int{}, Chunks: len(d.ids)}
	done, err := rdb.SMembers(ctx, runKey(d.run, "done")).Result()
	if err != nil {
		return nil, fmt.Errorf("bench: queue: %w", err)
	}
	acked := map[string]bool{}
	for _, id := range done {
		acked[id] = true
	}
	for id, c := range d.ids {
		n := c.To - c.From
		if !acked[id] {
			r.Lost += n
			// Nobody will run it now: out of the stream.
			rdb.XAck(ctx, queueStream, queueGroup, id)
		}
		if d.claims[id] {
			r.Reclaimed += n
		}
	}
	counts, err := rdb.HGetAll(ctx, runKey(d.run, "count")).Result()
	if err != nil {
		return nil, fmt.Errorf("bench: queue: %w", err)
	}
	for k, v := range counts {
		n, _ := strconv.Atoi(v)
		if node, ok := strings.CutPrefix(k, "jobs:"); ok {
			r.Nodes[node] = n
		}
	}
	return r, nil
}

// noteClaims records the run's chunks delivered more than once: another
// agent took them over.
func (d *Distributed) noteClaims(ctx context.Context) {
	pend, err := d.q.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: queueStream, Group: queueGroup,
		Start: "-", End: "+", Count: 10000}).Result()
	if err != nil {
		return
	}
	for _, p := range pend {
		if _, ours := d.ids[p.ID]; ours && p.RetryCount > 1 {
			d.claims[p.ID] = true
		}
	}
}

// Produced is how many samples the agents produced for the run.
func (d *Distributed) Produced(ctx context.Context) (int64, error) {
	v, err := d.q.rdb.HGet(ctx, runKey(d.run, "count"), "samples").Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return v, err
}

// Agent runs the chunks of runs handed out on a Queue.
type Agent struct {
	Queue *Queue
	// Store is the results store the coordinators' runs are in.
	Store *results.Store
	// Node names this agent in the consumer group and in its samples.
	Node string
	// Target opens the target of a run.
	Target func(ctx context.Context, url string) (*Target, error)
	// WriteFor bounds how long the agent keeps trying to write a chunk's
	// samples into a store that does not answer. Zero: 10 minutes.
	WriteFor time.Duration
	Log      *slog.Logger
}

// Serve takes chunks and runs them until ctx ends.
func (a *Agent) Serve(ctx context.Context) error {
	rdb := a.Queue.rdb
	var wg sync.WaitGroup
	defer wg.Wait()
	held := &heldChunks{ids: map[string]bool{}}
	wg.Go(func() { a.renew(ctx, held) })
	for ctx.Err() == nil {
		msgs, err := a.next(ctx, held)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			a.Log.Warn("the queue does not answer", "err", err)
			pause(ctx, time.Second)
			continue
		}
		for _, m := range msgs {
			c, err := parseChunk(m.Values)
			if err != nil {
				a.Log.Warn("dropping a chunk", "err", err)
				rdb.XAck(ctx, queueStream, queueGroup, m.ID)
				continue
			}
			held.add(m.ID)
			wg.Go(func() {
				defer held.remove(m.ID)
				a.runChunk(ctx, m.ID, c)
			})
		}
	}
	return nil
}

// next returns the next chunk for this agent: one another agent stopped
// holding, else a new one while this agent holds no more than the least
// busy live agent (so that the chunks of a run spread over the agents).
func (a *Agent) next(ctx context.Context, held *heldChunks) ([]redis.XMessage, error) {
	rdb := a.Queue.rdb
	claimed, _, err := rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{Stream: queueStream, Group: queueGroup,
		Consumer: a.Node, MinIdle: ClaimIdle, Start: "0", Count: 1}).Result()
	if err != nil {
		return nil, err
	}
	if len(claimed) > 0 {
		a.Log.Info("claimed a chunk another agent stopped running", "id", claimed[0].ID)
		return claimed, nil
	}
	if !a.fairTurn(ctx, held.count()) {
		pause(ctx, 100*time.Millisecond)
		return nil, nil
	}
	res, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: queueGroup, Consumer: a.Node,
		Streams: []string{queueStream, ">"}, Count: 1, Block: time.Second}).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil || len(res) == 0 {
		return nil, err
	}
	return res[0].Messages, nil
}

// fairTurn reports whether this agent, holding mine chunks, may take a
// new one: no live agent holds fewer.
func (a *Agent) fairTurn(ctx context.Context, mine int) bool {
	cs, err := a.Queue.rdb.XInfoConsumers(ctx, queueStream, queueGroup).Result()
	if err != nil {
		return true
	}
	for _, c := range cs {
		if c.Name != a.Node && c.Idle < ClaimIdle && int(c.Pending) < mine {
			return false
		}
	}
	return true
}

// renew keeps this agent's hold on the chunks it runs: it claims them
// for itself again every second, which resets their idle time.
func (a *Agent) renew(ctx context.Context, held *heldChunks) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if ids := held.list(); len(ids) > 0 {
			a.Queue.rdb.XClaimJustID(ctx, &redis.XClaimArgs{Stream: queueStream, Group: queueGroup,
				Consumer: a.Node, MinIdle: 0, Messages: ids})
		} else {
			// Touch the group so that the others see this agent live.
			a.Queue.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: queueStream, Group: queueGroup,
				Consumer: a.Node, Start: "-", End: "+", Count: 1})
		}
	}
}

// runChunk runs the jobs of c, writes their samples and acknowledges.
func (a *Agent) runChunk(ctx context.Context, id string, c chunk) {
	rdb := a.Queue.rdb
	log := a.Log.With("run", c.Run, "jobs", fmt.Sprintf("%d-%d", c.From, c.To-1))
	b, err := rdb.Get(ctx, runKey(c.Run, "test")).Bytes()
	var p PacedTest
	if err == nil {
		err = json.Unmarshal(b, &p)
	}
	if err != nil {
		log.Warn("cannot read the run's test; leaving the chunk to another agent", "err", err)
		return
	}
	t, err := a.Target(ctx, c.Target)
	if err != nil {
		log.Warn("cannot reach the run's target; leaving the chunk to another agent", "err", err)
		return
	}
	defer t.Close()
	jobs := make([]int, 0, c.To-c.From)
	for j := c.From; j < c.To; j++ {
		jobs = append(jobs, j)
	}
	log.Info("running jobs", "start", c.Start.Format(time.RFC3339Nano))
	recs, err := p.Run(ctx, t, jobs, c.Start, nil)
	if err != nil || ctx.Err() != nil {
		log.Warn("jobs not finished; leaving the chunk to another agent", "err", err)
		return
	}
	samples := Samples(recs, a.Node)
	ctx = context.WithoutCancel(ctx)
	key := runKey(c.Run, "count")
	rdb.HIncrBy(ctx, key, "samples", int64(len(samples)))
	rdb.HIncrBy(ctx, key, "jobs:"+a.Node, int64(len(jobs)))
	rdb.Expire(ctx, key, runKeyTTL)
	if err := a.write(ctx, c.Run, samples); err != nil {
		log.Error("samples not written: the run will say they are missing", "samples", len(samples), "err", err)
	}
	rdb.SAdd(ctx, runKey(c.Run, "done"), id)
	rdb.Expire(ctx, runKey(c.Run, "done"), runKeyTTL)
	rdb.XAck(ctx, queueStream, queueGroup, id)
}

// write stores samples into run, trying again while the store does not
// answer, for WriteFor at most: samples are never dropped while there is
// a chance to keep them.
func (a *Agent) write(ctx context.Context, run int64, samples []results.Sample) error {
	limit := a.WriteFor
	if limit <= 0 {
		limit = 10 * time.Minute
	}
	deadline := time.Now().Add(limit)
	wait := 100 * time.Millisecond
	for {
		err := a.Store.AddSamples(ctx, run, samples)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		a.Log.Warn("the results store does not answer: keeping the samples and trying again", "samples", len(samples), "err", err)
		pause(ctx, wait)
		wait = min(2*wait, 5*time.Second)
	}
}

func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// heldChunks are the chunks an agent runs now.
type heldChunks struct {
	mu  sync.Mutex
	ids map[string]bool
}

func (h *heldChunks) add(id string)    { h.mu.Lock(); h.ids[id] = true; h.mu.Unlock() }
func (h *heldChunks) remove(id string) { h.mu.Lock(); delete(h.ids, id); h.mu.Unlock() }
func (h *heldChunks) count() int       { h.mu.Lock(); defer h.mu.Unlock(); return len(h.ids) }
func (h *heldChunks) list() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, 0, len(h.ids))
	for id := range h.ids {
		out = append(out, id)
	}
	return out
}

// RunOnAgents runs p, stored as run in st (the store the agents write
// to), from the agents taking q's chunks, and finishes it from the
// samples they stored. params are the test's options. The run starts a
// few seconds from now, so that the agents have taken their chunks.
func RunOnAgents(ctx context.Context, q *Queue, st *results.Store, run int64, t *Target, p *PacedTest, params any) (*Result, error) {
	start := time.Now().Add(agentLead)
	size := min(max(p.Jobs()/30, 1), 100)
	d, err := q.Distribute(ctx, run, t.raw, p, start, size)
	if err != nil {
		return nil, err
	}
	res := &Result{Kind: p.Kind, Target: t.raw, Site: t.site, Params: params, Started: start}
	report, err := d.Wait(ctx, agentGrace)
	if err != nil {
		return nil, err
	}
	res.Ended = time.Now()
	res.Canceled = ctx.Err() != nil
	ctx = context.WithoutCancel(ctx)
	samples, err := st.Samples(ctx, run, results.SampleFilter{})
	if err != nil {
		return nil, err
	}
	p.Finish(res, samples)
	res.samplesStored = true
	produced, err := d.Produced(ctx)
	if err != nil {
		return nil, err
	}
	report.MissingSamples = max(produced-int64(len(samples)), 0)
	switch {
	case report.MissingSamples > 0 && report.Lost > 0:
		res.Incomplete = fmt.Sprintf("%d samples missing (the store did not take them), %d jobs lost", report.MissingSamples, report.Lost)
	case report.MissingSamples > 0:
		res.Incomplete = fmt.Sprintf("%d samples missing (the store did not take them)", report.MissingSamples)
	case report.Lost > 0:
		res.Incomplete = fmt.Sprintf("%d jobs lost (no agent finished them)", report.Lost)
	}
	switch s := res.Summary.(type) {
	case *OpenSummary:
		s.Fleet = report
	case *ReadSummary:
		s.Fleet = report
	}
	return res, nil
}

const (
	// agentLead is how far ahead a run from agents starts: time for
	// each agent to take its chunks and open its connections.
	agentLead = 3 * time.Second
	// agentGrace is how long after a run's end the coordinator waits
	// for the agents' samples.
	agentGrace = 2 * time.Minute
)
