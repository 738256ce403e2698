package interop

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/testenv"
)

// cuttable forwards TCP connections to a server until cut: then it
// closes every connection and the listener, so that whoever used it can
// no longer reach the server, while everyone else still does.
type cuttable struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func newCuttable(t *testing.T, to string) *cuttable {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &cuttable{ln: ln}
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", to)
			if err != nil {
				in.Close()
				continue
			}
			c.mu.Lock()
			c.conns = append(c.conns, in, out)
			c.mu.Unlock()
			go func() { io.Copy(out, in); out.Close() }()
			go func() { io.Copy(in, out); in.Close() }()
		}
	}()
	t.Cleanup(c.cut)
	return c
}

func (c *cuttable) addr() string { return c.ln.Addr().String() }

func (c *cuttable) cut() {
	c.ln.Close()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cn := range c.conns {
		cn.Close()
	}
	c.conns = nil
}

// TestSharedCutFromRedisOnly: federator A loses Redis while it still
// reaches the sites, and B and C do not. B's write of a file A had cached
// is acknowledged once A's lease has run out, and from then on A never
// answers with the version B replaced: cut off, it cannot hear that the
// others write, so it asks the sites rather than its memory.
func TestSharedCutFromRedisOnly(t *testing.T) {
	var link *cuttable
	l := startSharedLake(t, lakeOptions{redis: func(i int, r *testenv.Redis) string {
		if i != 0 {
			return ""
		}
		link = newCuttable(t, r.Addr)
		return "redis://" + link.addr() + "/0"
	}})
	v1 := bytes.Repeat([]byte("one "), 1000)
	if err := os.WriteFile(filepath.Join(l.dirs[0], "f"), v1, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, u := range l.urls { // every federator caches v1 (metadata TTL: an hour)
		if resp, _ := do(t, http.MethodHead, u+"/f", nil); resp.StatusCode != http.StatusOK || resp.ContentLength != int64(len(v1)) {
			t.Fatalf("HEAD %s/f = %d, %d bytes", u, resp.StatusCode, resp.ContentLength)
		}
	}
	link.cut()
	waitUntilState(t, l.urls[0], "degraded")
	// A looks the file up again while cut off (what it learned before
	// was dropped when it found Redis gone): v1, in its memory now.
	if resp, _ := do(t, http.MethodHead, l.urls[0]+"/f", nil); resp.StatusCode != http.StatusOK || resp.ContentLength != int64(len(v1)) {
		t.Fatalf("HEAD through A cut off = %d, %d bytes; want v1", resp.StatusCode, resp.ContentLength)
	}
	v2 := bytes.Repeat([]byte("two!"), 3000)
	if resp, msg := do(t, http.MethodPut, l.urls[1]+"/f", v2); resp.StatusCode/100 != 2 {
		t.Fatalf("PUT through B while A is cut off from Redis = %d %s; want it taken once A's lease ran out", resp.StatusCode, msg)
	}
	for range 20 {
		resp, _ := do(t, http.MethodHead, l.urls[0]+"/f", nil)
		if resp.StatusCode != http.StatusOK || resp.ContentLength != int64(len(v2)) {
			t.Fatalf("HEAD through A (cut off from Redis) after B's acknowledged PUT = %d, %d bytes; want the new version, %d bytes",
				resp.StatusCode, resp.ContentLength, len(v2))
		}
	}
}

// TestSharedDeadSite: a storage site killed with kill -9 is marked down
// by all three federators within about one probe interval (the one whose
// turn it is finds it refusing at its probe, the others read its verdict
// four times an interval),
// and while it lived its own access log shows one probe per interval
// between the three federators, not three.
func TestSharedDeadSite(t *testing.T) {
	l := startSharedLake(t)
	const interval = 500 * time.Millisecond // startSharedLake's health interval
	for i, u := range l.urls {
		testenv.Eventually(t, 10*time.Second, "every federator has the sites up", func() bool {
			return siteState(t, l, i, u, "site-b") == "up"
		})
	}
	probes := func() int {
		b, _ := os.ReadFile(l.sites[1].log)
		return strings.Count(string(b), "OPTIONS")
	}
	before := probes()
	<-time.After(20 * interval) // a span to count the probes in, not a wait for an event
	n := probes() - before
	if n < 10 || n > 20*13/10+3 {
		t.Errorf("site-b's access log shows %d probes in 20 intervals from 3 federators, want about 20 (one per interval), not 60", n)
	}
	l.sites[1].signal(t, syscall.SIGKILL)
	died := time.Now()
	for i, u := range l.urls {
		if !testenv.Within(interval*5/4+500*time.Millisecond-time.Since(died), func() bool { return siteState(t, l, i, u, "site-b") != "up" }) {
			t.Fatalf("federator %d still has site-b up %v after it was killed (interval %v)", i, time.Since(died), interval)
		}
	}
	t.Logf("all three federators had site-b down %v after its kill -9 (interval %v)", time.Since(died).Round(time.Millisecond), interval)
}

// siteState is the state federator i (at u) gives endpoint name.
func siteState(t *testing.T, l *sharedLake, i int, u, name string) string {
	t.Helper()
	_, b := doWith(t, l.clients[i], http.MethodGet, u+"/api/endpoints", nil)
	var eps []struct {
		Name, State string
	}
	if err := json.Unmarshal(b, &eps); err != nil {
		t.Fatalf("/api/endpoints of %s: %v: %s", u, err, b)
	}
	for _, e := range eps {
		if e.Name == name {
			return e.State
		}
	}
	return ""
}
