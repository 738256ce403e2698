package cache_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/cache"
	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/testenv"
)

// registry is the membership of a cache group, as Redis keeps it for
// group: [shared]: who registered.
type registry struct {
	mu   sync.Mutex
	urls []string
}

func (r *registry) Heartbeat(_ context.Context, self string, _ time.Duration) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !slices.Contains(r.urls, self) {
		r.urls = append(r.urls, self)
	}
	return nil
}

func (r *registry) Members(context.Context) ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.urls), nil
}

// groupNode starts a cache node of a group on a loopback listener, its
// handler wrapped by wrap (nil: none).
func groupNode(t *testing.T, cfg cache.Config, opts cache.Options, origin endpoint.Endpoint, wrap func(*node, http.Handler) http.Handler) *node {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Dir, cfg.BlockSize, cfg.Self = t.TempDir(), block, "http://"+ln.Addr().String()
	opts.Log = quiet
	c, err := cache.New(t.Context(), cfg, origin, opts)
	if err != nil {
		t.Fatal(err)
	}
	n := &node{Cache: c, URL: cfg.Self, srv: &http.Server{}, ln: ln}
	n.srv.Handler = c.Handler()
	if wrap != nil {
		n.srv.Handler = wrap(n, c.Handler())
	}
	go n.srv.Serve(ln)
	t.Cleanup(n.stop)
	return n
}

// waitMembers waits until every node sees want members up.
func waitMembers(t *testing.T, nodes []*node, want int) {
	t.Helper()
	for _, n := range nodes {
		testenv.Eventually(t, 10*time.Second, fmt.Sprintf("%s sees %d members up", n.URL, want), func() bool {
			up := 0
			for _, m := range n.Status().Group {
				if m.Up {
					up++
				}
			}
			return up == want
		})
	}
}

// groupFiles writes n files of a few blocks at the origin.
func groupFiles(t *testing.T, o *origin, n int) (map[string][]byte, int64) {
	files := map[string][]byte{}
	var total int64
	for i := range n {
		name := fmt.Sprintf("/g/f%d", i)
		files[name] = random(5*block+i*1001, uint64(300+i))
		total += int64(len(files[name]))
		o.write(t, name[1:], files[name])
	}
	return files, total
}

// readAll reads every file whole through n and checks its bytes.
func readAll(t *testing.T, n *node, files map[string][]byte) {
	t.Helper()
	for name, data := range files {
		resp, b := get(t, n.URL+name)
		if resp.StatusCode != http.StatusOK || !bytes.Equal(b, data) {
			t.Fatalf("GET %s%s = %d, %d bytes; want the origin's %d", n.URL, name, resp.StatusCode, len(b), len(data))
		}
	}
}

// A node that joins a group takes over some paths, and reads them from
// the member that held them before, not from the origin: a join costs
// the origin nothing.
func TestGroupJoinFillsFromPreviousOwner(t *testing.T) {
	o := startOrigin(t)
	reg := &registry{}
	opts := cache.Options{Membership: reg}
	a := groupNode(t, cache.Config{}, opts, o.ep, nil)
	b := groupNode(t, cache.Config{}, opts, o.ep, nil)
	waitMembers(t, []*node{a, b}, 2)
	// 24 files: the node that joins owns none of them once in 17,000 runs.
	files, total := groupFiles(t, o, 24)
	sent := o.sent(t)
	readAll(t, a, files)
	if d := o.sentSince(t, sent); d != total {
		t.Fatalf("origin sent %d bytes for the files through a group of two, want each once (%d)", d, total)
	}
	c := groupNode(t, cache.Config{}, opts, o.ep, nil)
	waitMembers(t, []*node{a, b, c}, 3)
	sent = o.sent(t)
	for _, n := range []*node{a, b, c} {
		readAll(t, n, files)
	}
	if d := o.sentSince(t, sent); d != 0 {
		t.Errorf("origin sent %d bytes after a node joined, want none (the paths it took over are on the others)", d)
	}
	// The fill's bytes are counted as it completes, which may be just
	// after the answer went out.
	testenv.Eventually(t, 10*time.Second, "the node that joined fills bytes from the previous owners", func() bool {
		return metric(t, c.URL+"/metrics", "lakefed_cache_peer_fill_bytes_total") > 0
	})
}

// A path's owner that cannot be reached is passed over for the path's
// next owner, by every node alike, so that the origin still sends each
// file once: the node asked does not fetch a path it does not keep.
func TestGroupDeadOwnerPassedOver(t *testing.T) {
	o := startOrigin(t)
	reg := &registry{}
	opts := cache.Options{Membership: reg}
	var nodes []*node
	for range 3 {
		nodes = append(nodes, groupNode(t, cache.Config{}, opts, o.ep, nil))
	}
	waitMembers(t, nodes, 3)
	files, total := groupFiles(t, o, 12)
	nodes[1].stop() // registered still: the others learn it is gone by asking it
	sent := o.sent(t)
	readAll(t, nodes[0], files)
	readAll(t, nodes[2], files)
	if d := o.sentSince(t, sent); d != total {
		t.Errorf("origin sent %d bytes for the files read through two nodes while a third was dead, want each once (%d)", d, total)
	}
}

// An owner that dies in the middle of an answer leaves the rest to the
// path's next owner, asked for the same version at the offset reached:
// the client gets every byte, once.
func TestGroupOwnerDiesMidBody(t *testing.T) {
	o := startOrigin(t)
	reg := &registry{}
	opts := cache.Options{Membership: reg}
	var cut atomic.Bool
	// dies answers the first hop request of a file with part of the body,
	// and dies: its listener and every connection closed.
	dies := func(n *node, h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get(cache.HopHeader) == "" || r.Header.Get("Cache-Control") == "only-if-cached" || cut.Load() {
				h.ServeHTTP(w, r)
				return
			}
			h.ServeHTTP(&dyingWriter{ResponseWriter: w, after: 3 * block / 2, die: func() {
				cut.Store(true)
				n.srv.Close()
			}}, r)
		})
	}
	var nodes []*node
	for i := range 3 {
		wrap := dies
		if i == 0 {
			wrap = nil
		}
		nodes = append(nodes, groupNode(t, cache.Config{}, opts, o.ep, wrap))
	}
	waitMembers(t, nodes, 3)
	files, _ := groupFiles(t, o, 12)
	for name, data := range files {
		for _, rg := range [][2]int{{0, len(data)}, {block / 3, len(data) - 7}} {
			resp, b := get(t, nodes[0].URL+name, "Range", fmt.Sprintf("bytes=%d-%d", rg[0], rg[1]-1))
			if resp.StatusCode != http.StatusPartialContent || !bytes.Equal(b, data[rg[0]:rg[1]]) {
				t.Fatalf("GET %s %v = %d, %d bytes; want the origin's %d", name, rg, resp.StatusCode, len(b), rg[1]-rg[0])
			}
		}
		resp, b := get(t, nodes[0].URL+name)
		if resp.StatusCode != http.StatusOK || !bytes.Equal(b, data) {
			t.Fatalf("GET %s = %d, %d bytes; want the origin's %d", name, resp.StatusCode, len(b), len(data))
		}
	}
	if !cut.Load() {
		t.Fatal("no owner died: the test proved nothing")
	}
	if got := metric(t, nodes[0].URL+"/metrics", "lakefed_cache_peer_resumes_total"); got != 1 {
		t.Errorf("lakefed_cache_peer_resumes_total = %d, want 1 (the answer cut off)", got)
	}
}

// dyingWriter passes the first after bytes of a body, then calls die
// and breaks the answer off.
type dyingWriter struct {
	http.ResponseWriter
	after int
	n     int
	die   func()
}

func (w *dyingWriter) Write(b []byte) (int, error) {
	if w.n+len(b) <= w.after {
		w.n += len(b)
		return w.ResponseWriter.Write(b)
	}
	k, _ := w.ResponseWriter.Write(b[:w.after-w.n])
	w.n += k
	w.ResponseWriter.(http.Flusher).Flush()
	w.die()
	panic(http.ErrAbortHandler)
}
