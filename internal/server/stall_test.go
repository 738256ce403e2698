package server_test

import (
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/config"
	"github.com/lakefed/lakefed/internal/server/servertest"
	"github.com/lakefed/lakefed/internal/testenv"
)

// TestSendTimeoutEveryListener: on every HTTP listener of the lake, and
// on each way an answer leaves it (the fast path's sendfile and splice,
// net/http's sendfile and copies), a client that asks for a large file
// and reads nothing is reset after the stall timeout, and a client that
// reads slowly but steadily gets the whole file though it takes several
// times the timeout. (The slow reader's pace, 10 MiB/s, is ten times
// what a 2 MiB step needs within the timeout, so that a loaded machine
// does not make it a stalled one.)
func TestSendTimeoutEveryListener(t *testing.T) {
	const d = 2 * time.Second
	fed := servertest.Start(t, servertest.Options{Configure: func(c *config.Config) {
		c.StallTimeout = config.Duration(d)
		c.Storage[0].StallTimeout = config.Duration(d)
		c.Federation.Mode = "proxy"
		c.Cache = &config.Cache{Dir: t.TempDir(), Origin: config.OriginFederation, Listen: "127.0.0.1:0"}
	}})
	const size = 48 << 20
	data := strings.Repeat("0123456789abcdef", size/16)
	if err := os.WriteFile(filepath.Join(fed.Sites[0].Dir, "f"), []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	host := func(u string) string {
		pu, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		return pu.Host
	}
	site, front, cache := host(fed.Sites[0].URL), host(fed.URL), host(fed.Server.CacheURL())
	// Warm: the federator's metadata (so that its GET is a fast one) and
	// the cache's copy (so that one case is a warm hit).
	for _, u := range []string{fed.URL + "/f", fed.Server.CacheURL() + "/f"} {
		if code, n, err := testenv.SlowGet(nil, u, 8<<20, 0); err != nil || code != 200 || n != size {
			t.Fatalf("GET %s = %d, %d bytes, %v", u, code, n, err)
		}
	}
	for _, tc := range []struct {
		name, addr, target string
		header             []string
	}{
		{"storage, fast path, sendfile", site, "/f", nil},
		{"storage, net/http, sendfile", site, "/f", []string{"Range: bytes=1-"}},
		{"federator, fast path, splice", front, "/f", nil},
		{"federator, net/http, copy", front, "/f", []string{"Range: bytes=1-"}},
		{"cache, warm hit", cache, "/f", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testenv.StallGetReset(t, d, size, tc.addr, tc.target, tc.header...)
			start := time.Now()
			code, n, err := testenv.SlowGet(nil, "http://"+tc.addr+tc.target, 512<<10, 50*time.Millisecond)
			if err != nil || code != 200 || n != size {
				t.Fatalf("slow reader: %d, %d bytes, %v; want 200 and %d bytes", code, n, err, size)
			}
			if took := time.Since(start); took < d {
				t.Errorf("slow reader took %v: not slow enough to show the timeout is per step", took)
			}
		})
	}
}

// TestSendTimeoutHTTP2Front: over HTTP/2 on the federator's TLS
// listener, a client that leaves a stream's window shut (its connection
// alive) gets the stream reset after the stall timeout, never the whole
// body; one that reads slowly but steadily gets it all.
func TestSendTimeoutHTTP2Front(t *testing.T) {
	const d = 2 * time.Second
	certs := testenv.NewTLS(t)
	fed := servertest.Start(t, servertest.Options{Configure: func(c *config.Config) {
		c.StallTimeout = config.Duration(d)
		c.TLSCert, c.TLSKey = certs.CertFile, certs.KeyFile
		c.Federation.Mode = "proxy"
	}})
	const size = 48 << 20
	data := strings.Repeat("0123456789abcdef", size/16)
	if err := os.WriteFile(filepath.Join(fed.Sites[0].Dir, "f"), []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	client := certs.Client()
	resp, err := client.Get(fed.URL + "/f")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.ProtoMajor != 2 || resp.StatusCode != 200 {
		t.Fatalf("GET = %s over %s, want 200 over HTTP/2", resp.Status, resp.Proto)
	}
	// The client's stall is the test: nothing to wait on but the time.
	time.Sleep(d + 3*time.Second)
	n, err := io.Copy(io.Discard, resp.Body)
	if err == nil || n >= size {
		t.Fatalf("the stalled client read %d bytes, ending in %v: want a reset stream", n, err)
	}
	start := time.Now()
	code, n, err := testenv.SlowGet(client, fed.URL+"/f", 512<<10, 50*time.Millisecond)
	if err != nil || code != 200 || n != size {
		t.Fatalf("slow reader: %d, %d bytes, %v; want 200 and %d bytes", code, n, err, size)
	}
	if took := time.Since(start); took < d {
		t.Errorf("slow reader took %v: not slow enough to show the timeout is per step", took)
	}
}

// TestStallTimeoutUploads: an upload whose body stops arriving, to a
// storage site and through the write buffer on the federator's
// listener, ends its connection after the stall timeout; nothing is
// stored or acknowledged, and the site keeps no temporary file of it.
func TestStallTimeoutUploads(t *testing.T) {
	const d = time.Second
	bufDir := t.TempDir()
	fed := servertest.Start(t, servertest.Options{Sites: 2, Configure: func(c *config.Config) {
		c.StallTimeout = config.Duration(d)
		c.Storage[0].StallTimeout = config.Duration(d)
		c.Buffer = &config.Buffer{Dir: bufDir,
			Prefixes: []config.BufferPrefix{{Prefix: "/out", Targets: []string{"site-b"}}}}
	}})
	host := func(u string) string {
		pu, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		return pu.Host
	}
	for _, tc := range []struct{ name, addr, path string }{
		{"storage site", host(fed.Sites[0].URL), "/up"},
		{"write buffer", host(fed.URL), "/out/up"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := testenv.DialRaw(t, tc.addr)
			start := time.Now()
			rc.Send("PUT " + tc.path + " HTTP/1.1\r\nHost: x\r\nContent-Length: 10485760\r\n\r\n" + strings.Repeat("x", 1<<20))
			closed, _ := rc.Closed(d + 10*time.Second)
			if !closed {
				t.Fatal("the connection of a stalled upload is still open")
			}
			if took := time.Since(start); took < d {
				t.Errorf("closed after %v, before the stall timeout %v", took, d)
			}
			resp, err := http.Get(fed.URL + tc.path)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound {
				t.Errorf("GET %s after the stalled upload = %d, want 404", tc.path, resp.StatusCode)
			}
		})
	}
	testenv.Eventually(t, 10*time.Second, "no temporary upload file left at the site or in the buffer", func() bool {
		ents, err := os.ReadDir(fed.Sites[0].Dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".lakefed-") && !e.IsDir() {
				return false
			}
		}
		tmp, err := os.ReadDir(filepath.Join(bufDir, "tmp"))
		return err == nil && len(tmp) == 0
	})
}
