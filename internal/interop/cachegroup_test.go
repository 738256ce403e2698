package interop

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/cache"
	"github.com/lakefed/lakefed/internal/testenv"
)

// cacheGroup is a lakefed storage site as the origin and cache processes
// that find each other through one Redis (group: [shared]). The caches
// read the origin through a proxy of the test's, which counts the bytes
// the origin sends and can slow the files under /slow/ down.
type cacheGroup struct {
	bin    string
	dir    string
	redis  *testenv.Redis
	origin *proc
	proxy  *originProxy
	nodes  []*cacheNode
}

// originProxy passes requests to the origin, counting the body bytes it
// sends back; while slow is set, files under /slow/ come at about 1 MB/s.
type originProxy struct {
	srv  *httptest.Server
	sent atomic.Int64
	slow atomic.Bool
}

func newOriginProxy(t *testing.T, origin string) *originProxy {
	u, err := url.Parse(origin)
	if err != nil {
		t.Fatal(err)
	}
	op := &originProxy{}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ModifyResponse = func(resp *http.Response) error {
		resp.Body = &countingBody{rc: resp.Body, op: op, slow: strings.HasPrefix(resp.Request.URL.Path, "/slow/")}
		return nil
	}
	op.srv = httptest.NewServer(rp)
	t.Cleanup(op.srv.Close)
	return op
}

// countingBody is a body of the origin's, counted, and slowed down while
// its proxy says so.
type countingBody struct {
	rc   io.ReadCloser
	op   *originProxy
	slow bool
}

func (b *countingBody) Read(p []byte) (int, error) {
	if b.slow && b.op.slow.Load() {
		time.Sleep(30 * time.Millisecond) // 32 KiB per 30 ms: no notification to wait on, a rate to keep
		p = p[:min(len(p), 32<<10)]
	}
	n, err := b.rc.Read(p)
	b.op.sent.Add(int64(n))
	return n, err
}

func (b *countingBody) Close() error { return b.rc.Close() }

// cacheNode is one cache process of the group.
type cacheNode struct {
	p   *proc
	url string
}

func startCacheGroup(t *testing.T, n int) *cacheGroup {
	g := &cacheGroup{bin: lakefedBinary(t), dir: t.TempDir(), redis: testenv.StartRedis(t)}
	root := filepath.Join(g.dir, "origin")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	port := testenv.FreePort(t)
	g.origin = &proc{bin: g.bin, port: port, log: root + ".log",
		args: []string{"storage", "--root", root, "--listen", "127.0.0.1:" + strconv.Itoa(port)}}
	g.origin.start(t)
	t.Cleanup(g.origin.kill)
	g.proxy = newOriginProxy(t, "http://127.0.0.1:"+strconv.Itoa(port))
	for range n {
		g.addNode(t)
	}
	return g
}

// addNode starts one more cache process; nothing in the others' configs
// names it.
func (g *cacheGroup) addNode(t *testing.T) *cacheNode {
	i := len(g.nodes)
	port := testenv.FreePort(t)
	dir := filepath.Join(g.dir, fmt.Sprintf("cache-%d", i))
	cfg := fmt.Sprintf(`shared: {redis: %q, lease: 1s, node: cache-%d}
cache:
  listen: 127.0.0.1:%d
  dir: %s
  origin: %s/
  group: [shared]
  block_size: 256KiB
  max_bytes: 1GiB
  ram: 32MiB
`, g.redis.URL, i, port, dir, g.proxy.srv.URL)
	f := filepath.Join(g.dir, fmt.Sprintf("cache-%d.yaml", i))
	if err := os.WriteFile(f, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	n := &cacheNode{p: &proc{bin: g.bin, port: port, log: filepath.Join(g.dir, fmt.Sprintf("cache-%d.log", i)),
		args: []string{"serve", f}}, url: "http://127.0.0.1:" + strconv.Itoa(port)}
	n.p.start(t)
	t.Cleanup(n.p.kill)
	g.nodes = append(g.nodes, n)
	return n
}

// status is the node's /api/cache.
func (n *cacheNode) status(t *testing.T) cache.Status {
	t.Helper()
	var st cache.Status
	resp, b := do(t, http.MethodGet, n.url+"/api/cache", nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s/api/cache = %d %s", n.url, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("GET %s/api/cache: %v", n.url, err)
	}
	return st
}

// sees reports whether the node's group lists the member u, and whether
// it takes it for up.
func (n *cacheNode) sees(t *testing.T, u string) (listed, up bool) {
	for _, m := range n.status(t).Group {
		if m.URL == u {
			return true, m.Up
		}
	}
	return false, false
}

// metric reads one unlabelled series from a /metrics page.
func metric(t *testing.T, u, name string) float64 {
	t.Helper()
	resp, b := do(t, http.MethodGet, u+"/metrics", nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s/metrics = %d", u, resp.StatusCode)
	}
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s/metrics has no %s", u, name)
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatalf("%s/metrics: %s %q: %v", u, name, m[1], err)
	}
	return v
}

// groupLoad is the clients of TestCacheGroupShared: each reads a file
// (whole, or a range) through one of the nodes clients may use, and
// compares every byte with what the origin holds.
type groupLoad struct {
	files  map[string][]byte
	names  []string
	client *http.Client

	mu    sync.RWMutex // guards nodes; a read holds it for reading while it runs
	nodes []*cacheNode // the nodes clients read through

	reads    atomic.Int64
	failures chan string
}

func (l *groupLoad) setNodes(nodes []*cacheNode) {
	l.mu.Lock() // waits for the reads through the nodes dropped
	l.nodes = nodes
	l.mu.Unlock()
}

// read does one read with r, and reports what was wrong with it, or "".
func (l *groupLoad) read(ctx context.Context, r *rand.Rand) string {
	l.mu.RLock()
	defer l.mu.RUnlock()
	n := l.nodes[r.IntN(len(l.nodes))]
	name := l.names[r.IntN(len(l.names))]
	data := l.files[name]
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, n.url+name, nil)
	lo, hi, want := 0, len(data), http.StatusOK
	if r.IntN(3) > 0 {
		lo = r.IntN(len(data))
		hi = lo + 1 + r.IntN(min(len(data)-lo, 1<<20))
		want = http.StatusPartialContent
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", lo, hi-1))
	}
	resp, err := l.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ""
		}
		return fmt.Sprintf("GET %s%s [%d,%d): %v", n.url, name, lo, hi, err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	switch {
	case err != nil && ctx.Err() != nil:
		return ""
	case err != nil:
		return fmt.Sprintf("GET %s%s [%d,%d) = %d, body broke after %d bytes: %v", n.url, name, lo, hi, resp.StatusCode, len(b), err)
	case resp.StatusCode != want:
		return fmt.Sprintf("GET %s%s [%d,%d) = %d %.200s, want %d", n.url, name, lo, hi, resp.StatusCode, b, want)
	case !bytes.Equal(b, data[lo:hi]):
		return fmt.Sprintf("GET %s%s [%d,%d): %d bytes, not the origin's", n.url, name, lo, hi, len(b))
	}
	l.reads.Add(1)
	return ""
}

// run reads with k clients until ctx ends.
func (l *groupLoad) run(ctx context.Context, k int) *sync.WaitGroup {
	var wg sync.WaitGroup
	for c := range k {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(c), 77))
			for ctx.Err() == nil {
				if msg := l.read(ctx, r); msg != "" {
					select {
					case l.failures <- msg:
					default:
					}
				}
			}
		})
	}
	return &wg
}

// TestCacheGroupShared: three cache processes find each other through
// Redis, with a lakefed storage site as their origin, under six clients
// reading files of a few MiB (whole and ranged) through any node. A
// fourth node joins with no change to the others' configs, and then one
// of the first three is killed with kill -9 while whole reads of a file
// it owns are streaming through the others. Every read gives the
// origin's bytes and no error (those cut off by the kill finish from the
// file's next owner); the dead node is out of every other node's ring
// within a heartbeat and out of the membership once its registration
// runs out; the new node serves the paths it owns; and the origin sends
// each file once: the join costs it nothing, and over the workload it
// sends at most 5 % more than the files' bytes plus the bytes that only
// the dead node held.
func TestCacheGroupShared(t *testing.T) {
	g := startCacheGroup(t, 3)
	l := &groupLoad{files: map[string][]byte{}, client: &http.Client{Timeout: 30 * time.Second},
		failures: make(chan string, 64)}
	origin := filepath.Join(g.dir, "origin")
	var fileBytes int64
	for i := range 16 {
		name := fmt.Sprintf("/data/run%d/f%02d.root", i%3, i)
		data := cacheData(2<<20+i*97_003, uint64(1000+i))
		writeUnder(t, origin, name, data)
		l.files[name] = data
		l.names = append(l.names, name)
		fileBytes += int64(len(data))
	}
	// The files read across the kill: not in the clients' set.
	slow := map[string][]byte{}
	for i := range 8 {
		name := fmt.Sprintf("/slow/s%d.root", i)
		slow[name] = cacheData(3<<20, uint64(2000+i))
		writeUnder(t, origin, name, slow[name])
	}
	for _, n := range g.nodes { // each sees the three
		testenv.Eventually(t, 10*time.Second, n.url+" sees three members", func() bool {
			return len(n.status(t).Group) == 3
		})
	}
	l.setNodes(g.nodes)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	wg := l.run(ctx, 6)
	checkFailures := func(when string) {
		t.Helper()
		select {
		case msg := <-l.failures:
			cancel()
			wg.Wait()
			t.Fatalf("%s: %s", when, msg)
		default:
		}
	}
	waitReads := func(n int64, when string) {
		t.Helper()
		target := l.reads.Load() + n
		testenv.Eventually(t, 30*time.Second, fmt.Sprintf("%d reads %s", n, when), func() bool {
			checkFailures(when)
			return l.reads.Load() >= target
		})
	}
	waitReads(200, "through three nodes")
	for i, name := range l.names { // the group holds every file whole
		resp, b := do(t, http.MethodGet, g.nodes[i%3].url+name, nil)
		if resp.StatusCode != http.StatusOK || !bytes.Equal(b, l.files[name]) {
			t.Fatalf("GET %s%s = %d, %d bytes, not the origin's", g.nodes[i%3].url, name, resp.StatusCode, len(b))
		}
	}
	beforeJoin := g.proxy.sent.Load()

	// A fourth node joins.
	n4 := g.addNode(t)
	for _, n := range g.nodes {
		testenv.Eventually(t, 10*time.Second, n.url+" sees the fourth member", func() bool {
			listed, up := n.sees(t, n4.url)
			return listed && up
		})
	}
	l.setNodes(g.nodes)
	waitReads(200, "after the fourth node joined")
	joinCost := g.proxy.sent.Load() - beforeJoin

	// One of the first three dies, in the middle of answers.
	name, dead := ownedByOneOf(t, g.nodes, g.nodes[:3], slices.Sorted(maps.Keys(slow)))
	var live []*cacheNode
	for _, n := range g.nodes {
		if n != dead {
			live = append(live, n)
		}
	}
	l.setNodes(live) // no client reads through the node about to die
	g.proxy.slow.Store(true)
	held := holdReads(t, l.client, live, name, slow[name])
	lost := onlyOn(t, dead, live)
	dead.p.kill()
	killed := time.Now()
	g.proxy.slow.Store(false)
	// The others probe each member every heartbeat (1 s), and a read that
	// cannot reach it marks it down at once: out of the ring within a
	// heartbeat, and a second more for a loaded machine. Its
	// registration runs out within 3 s of its last heartbeat, and the
	// others read the membership every heartbeat.
	for _, n := range live {
		testenv.Eventually(t, 2*time.Second, n.url+" marks the dead node down", func() bool {
			_, up := n.sees(t, dead.url)
			return !up
		})
	}
	downAfter := time.Since(killed)
	held()
	for _, n := range live {
		testenv.Eventually(t, 6*time.Second, n.url+" drops the dead node from the group", func() bool {
			listed, _ := n.sees(t, dead.url)
			return !listed
		})
	}
	goneAfter := time.Since(killed)
	if downAfter > 2*time.Second || goneAfter > 6*time.Second {
		t.Errorf("the dead node was out of the ring after %v (want a heartbeat, 1 s, and 1 s of slack) and out of the group after %v (want its 3 s registration, a heartbeat and 2 s of slack)",
			downAfter, goneAfter)
	}
	waitReads(200, "after a node was killed")
	cancel()
	wg.Wait()
	checkFailures("at the end")

	var resumed float64
	for _, n := range live {
		resumed += metric(t, n.url, "lakefed_cache_peer_resumes_total")
	}
	if resumed == 0 {
		t.Errorf("no answer cut off by the kill was finished from the next owner (lakefed_cache_peer_resumes_total 0)")
	}
	var n4Served float64
	for _, name := range []string{"lakefed_cache_hit_bytes_total", "lakefed_cache_miss_bytes_total"} {
		n4Served += metric(t, n4.url, name)
	}
	if n4Served == 0 {
		t.Errorf("the node that joined served no byte of the paths it owns")
	}
	fileBytes += int64(len(slow[name]))
	sent := g.proxy.sent.Load()
	t.Logf("%d reads, %.0f answers resumed; origin sent %d bytes for %d bytes of files (%.3f), %d of them for the join; %d bytes only on the dead node (sent / (files + those) = %.3f); dead node down after %v, gone after %v",
		l.reads.Load(), resumed, sent, fileBytes, float64(sent)/float64(fileBytes), joinCost, lost, float64(sent)/float64(fileBytes+lost),
		downAfter.Round(time.Millisecond), goneAfter.Round(time.Millisecond))
	if joinCost > fileBytes/20 {
		t.Errorf("origin sent %d bytes while the fourth node joined, want its paths from their previous owners (at most 5 %% of %d)", joinCost, fileBytes)
	}
	if limit := 1.05 * float64(fileBytes+lost); float64(sent) > limit {
		t.Errorf("origin sent %d bytes, more than 1.05 × (%d bytes of files + %d bytes only the dead node held) = %.0f",
			sent, fileBytes, lost, limit)
	}
}

// ownedByOneOf finds, among names, a path whose owner is one of among,
// and returns it with its owner: a HEAD through nodes[0] makes the owner,
// and only it, look the path up.
func ownedByOneOf(t *testing.T, nodes, among []*cacheNode, names []string) (string, *cacheNode) {
	t.Helper()
	for _, name := range names {
		if resp, _ := do(t, http.MethodHead, nodes[0].url+name, nil); resp.StatusCode != http.StatusOK {
			t.Fatalf("HEAD %s%s = %d", nodes[0].url, name, resp.StatusCode)
		}
		var owners []*cacheNode
		for _, n := range nodes {
			resp, b := do(t, http.MethodGet, n.url+"/api/cache/files?path="+url.QueryEscape(name), nil)
			if resp.StatusCode == http.StatusOK && strings.Contains(string(b), name) {
				owners = append(owners, n)
			}
		}
		if len(owners) != 1 {
			t.Fatalf("%s is known to %d nodes after one HEAD, want its owner alone", name, len(owners))
		}
		if slices.Contains(among, owners[0]) {
			return name, owners[0]
		}
	}
	t.Fatalf("none of %v is owned by one of the first nodes", names)
	return "", nil
}

// holdReads starts a whole read of name through each of nodes and waits
// for its first bytes; the function it returns reads the rest of each
// and checks every byte against want.
func holdReads(t *testing.T, client *http.Client, nodes []*cacheNode, name string, want []byte) func() {
	t.Helper()
	type held struct {
		url  string
		resp *http.Response
		head []byte
	}
	var hs []held
	for _, n := range nodes {
		resp, err := client.Get(n.url + name)
		if err != nil {
			t.Fatalf("GET %s%s: %v", n.url, name, err)
		}
		head := make([]byte, 64<<10)
		if _, err := io.ReadFull(resp.Body, head); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s%s = %d, first bytes: %v", n.url, name, resp.StatusCode, err)
		}
		hs = append(hs, held{n.url + name, resp, head})
	}
	return func() {
		t.Helper()
		for _, h := range hs {
			rest, err := io.ReadAll(h.resp.Body)
			h.resp.Body.Close()
			if got := append(h.head, rest...); err != nil || !bytes.Equal(got, want) {
				t.Errorf("GET %s held across the kill: %d bytes of %d, err %v, same bytes %v",
					h.url, len(got), len(want), err, bytes.Equal(got, want))
			}
		}
	}
}

// onlyOn is the bytes dead holds of each file beyond what the most of
// any of live holds of it: a group keeps one copy, so these come from
// the origin again once dead is gone.
func onlyOn(t *testing.T, dead *cacheNode, live []*cacheNode) int64 {
	t.Helper()
	cached := func(n *cacheNode) map[string]int64 {
		resp, b := do(t, http.MethodGet, n.url+"/api/cache/files", nil)
		var files []cache.FilePattern
		if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &files) != nil {
			t.Fatalf("GET %s/api/cache/files = %d %s", n.url, resp.StatusCode, b)
		}
		out := map[string]int64{}
		for _, f := range files {
			out[f.Path] = f.Cached
		}
		return out
	}
	others := map[string]int64{}
	for _, n := range live {
		for p, b := range cached(n) {
			others[p] = max(others[p], b)
		}
	}
	var lost int64
	for p, b := range cached(dead) {
		lost += max(0, b-others[p])
	}
	return lost
}
