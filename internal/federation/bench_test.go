package federation

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/lakefed/lakefed/internal/storage"
)

// discard is a reusable ResponseWriter that keeps nothing, so the
// benchmark measures the federator, not a recorder.
type discard struct {
	h    http.Header
	code int
}

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(code int)        { d.code = code }

// BenchmarkRedirectWarm is the hot path: GET of a known file (warm
// metadata, three replicas, proximity ranking on) answered with a 302 and
// Link headers. Run with -cpu 1,2 and -benchmem; profile with -cpuprofile.
func BenchmarkRedirectWarm(b *testing.B) {
	benchWarm(b, http.MethodGet, http.StatusFound, 1000)
}

// BenchmarkRedirectPacked is BenchmarkRedirectWarm over four times the
// paths the metadata cache keeps unpacked (the default hot bound), within
// its default max_entries: most answers unpack their entry first.
func BenchmarkRedirectPacked(b *testing.B) {
	benchWarm(b, http.MethodGet, http.StatusFound, 4*cacheShards*hotPerShard)
}

// BenchmarkHeadWarm is the stat path: HEAD answered from metadata.
func BenchmarkHeadWarm(b *testing.B) {
	benchWarm(b, http.MethodHead, http.StatusOK, 1000)
}

func benchWarm(b *testing.B, method string, want, files int) {
	fakes := []*fakeEP{newFake("site-a", true), newFake("site-b", true), newFake("site-c", true)}
	paths := make([]string, files)
	for i := range paths {
		paths[i] = "/atlas/data/run" + strconv.Itoa(i) + "/f.root"
		for _, f := range fakes {
			f.put(paths[i], []byte("0123456789"))
		}
	}
	nets := "client_networks: [{networks: [10.0.0.0/8], location: [46.2, 6.1]}]"
	tf := startFed(b, cfgYAML(slowHealth+"\n"+nets,
		ep("site-a", "location: [46.23, 6.05]"), ep("site-b", "location: [41.85, -88.27]"), ep("site-c", "location: [51.5, -0.1]")), fakes...)
	h := tf.Handler()
	reqs := make([]*http.Request, files)
	for i, p := range paths {
		reqs[i], _ = http.NewRequest(method, "http://fed"+p, nil)
		reqs[i].RemoteAddr = "10.1.2.3:40000"
		w := &discard{h: http.Header{}}
		h.ServeHTTP(w, reqs[i]) // warm the cache
		if w.code != want {
			b.Fatalf("%s %s = %d, want %d", method, p, w.code, want)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		w := &discard{h: make(http.Header, 8)}
		i := 0
		for pb.Next() {
			clear(w.h)
			h.ServeHTTP(w, reqs[i%files])
			i++
		}
	})
}

// proxiedStorage is a storage role on loopback holding /f, 64 MiB, for
// the proxy benchmarks; it stops with the benchmark.
func proxiedStorage(b *testing.B) (*httptest.Server, int64) {
	st, err := storage.New(storage.Config{Root: b.TempDir()}, quiet())
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(st.Handler())
	b.Cleanup(srv.Close)
	const size = 64 << 20
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i * 7)
	}
	req, _ := http.NewRequest(http.MethodPut, srv.URL+"/f", bytes.NewReader(data))
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode/100 != 2 {
		b.Fatalf("put: %v", err)
	}
	return srv, size
}

// BenchmarkProxyStorage measures proxy mode end to end on loopback: a
// client reads a 64 MiB file through the federator, which reads it from a
// real storage server over HTTP. b.SetBytes makes the result MB/s; profile
// with -cpuprofile to see where the federator spends its share.
func BenchmarkProxyStorage(b *testing.B) {
	srv, size := proxiedStorage(b)
	tf := startFed(b, cfgYAML(slowHealth+"\nmode: proxy", "name: st\nurl: "+srv.URL+"/"))
	c := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	buf := make([]byte, 256<<10)
	b.SetBytes(size)
	b.ResetTimer()
	for b.Loop() {
		resp, err := c.Get(tf.srv.URL + "/f")
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{resp.Body}, buf)
		resp.Body.Close()
		if err != nil || n != size {
			b.Fatalf("read %d bytes: %v", n, err)
		}
	}
}

// BenchmarkProxyStorageFast: a 64 MiB proxied GET from a storage role,
// through the federator's handler on net/http (copied through a buffer)
// and through the fast path (spliced socket to socket), on loopback.
func BenchmarkProxyStorageFast(b *testing.B) {
	srv, size := proxiedStorage(b)
	fp := startFastPair(b, cfgYAML(slowHealth+"\nmode: proxy", "name: st\nurl: "+srv.URL+"/"))
	c := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	if resp, err := c.Head("http://" + fp.handler + "/f"); err == nil {
		resp.Body.Close() // the look-up: the fast path answers warm paths only
	}
	buf := make([]byte, 256<<10)
	for _, to := range []struct{ name, addr string }{{"handler", fp.handler}, {"fastpath", fp.fast}} {
		b.Run(to.name, func(b *testing.B) {
			b.SetBytes(size)
			for b.Loop() {
				resp, err := c.Get("http://" + to.addr + "/f")
				if err != nil {
					b.Fatal(err)
				}
				n, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{resp.Body}, buf)
				resp.Body.Close()
				if err != nil || n != size {
					b.Fatalf("read %d bytes: %v", n, err)
				}
			}
			if n := fp.fastCount(); (n > 0) != (to.name == "fastpath") {
				b.Errorf("the fast path answered %v requests", n)
			}
		})
	}
}

// TestWarmAnswersAllocateNothing: once a path's entry is kept unpacked
// (its second read), a GET redirect and a HEAD of it allocate nothing
// in the federator.
func TestWarmAnswersAllocateNothing(t *testing.T) {
	fakes := []*fakeEP{newFake("site-a", true), newFake("site-b", true), newFake("site-c", true)}
	for _, f := range fakes {
		f.put("/atlas/data/f.root", []byte("0123456789"))
	}
	nets := "client_networks: [{networks: [10.0.0.0/8], location: [46.2, 6.1]}]"
	tf := startFed(t, cfgYAML(slowHealth+"\n"+nets,
		ep("site-a", "location: [46.23, 6.05]"), ep("site-b", "location: [41.85, -88.27]"), ep("site-c", "location: [51.5, -0.1]")), fakes...)
	h := tf.Handler()
	for _, c := range []struct {
		method string
		want   int
	}{{http.MethodGet, http.StatusFound}, {http.MethodHead, http.StatusOK}} {
		r, _ := http.NewRequest(c.method, "http://fed/atlas/data/f.root", nil)
		r.RemoteAddr = "10.1.2.3:40000"
		w := &discard{h: make(http.Header, 8)}
		for range 2 { // the look-up, then the entry unpacked and kept
			clear(w.h)
			h.ServeHTTP(w, r)
		}
		if w.code != c.want {
			t.Fatalf("%s = %d, want %d", c.method, w.code, c.want)
		}
		if n := testing.AllocsPerRun(100, func() { clear(w.h); h.ServeHTTP(w, r) }); n != 0 {
			t.Errorf("a warm %s allocates %v times, want 0", c.method, n)
		}
	}
}

// BenchmarkRedirectWarmTCP is the hot path as a client sees it: warm GETs
// (three replicas) redirected over a real loopback TCP connection with
// keep-alive, answered by the handler on net/http and by the fast path
// (FastResponder), one connection sending a request at a time (seq) and
// one connection per goroutine (parallel). Compare the ns/op of handler
// and fast; allocs/op counts the client's and the server's.
func BenchmarkRedirectWarmTCP(b *testing.B) {
	fakes := []*fakeEP{newFake("site-a", true), newFake("site-b", true), newFake("site-c", true)}
	const files = 1000
	reqs := make([][]byte, files)
	for i := range reqs {
		p := "/atlas/data/run" + strconv.Itoa(i) + "/f.root"
		for _, f := range fakes {
			f.put(p, []byte("0123456789"))
		}
		reqs[i] = []byte("GET " + p + " HTTP/1.1\r\nHost: fed\r\nUser-Agent: bench\r\nAccept: */*\r\n\r\n")
	}
	fp := startFastPair(b, cfgYAML(slowHealth, ep("site-a", "priority: 1"), ep("site-b", "priority: 2"), ep("site-c", "priority: 3")), fakes...)
	warm, err := net.Dial("tcp", fp.handler)
	if err != nil {
		b.Fatal(err)
	}
	wbr := bufio.NewReader(warm)
	for _, r := range reqs {
		redirectOnce(b, warm, wbr, r)
	}
	warm.Close()
	for _, srv := range []struct{ name, addr string }{{"handler", fp.handler}, {"fast", fp.fast}} {
		b.Run("seq/"+srv.name, func(b *testing.B) {
			c, err := net.Dial("tcp", srv.addr)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			br := bufio.NewReader(c)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				redirectOnce(b, c, br, reqs[i%files])
			}
		})
		b.Run("parallel/"+srv.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(4)
			b.RunParallel(func(pb *testing.PB) {
				c, err := net.Dial("tcp", srv.addr)
				if err != nil {
					b.Error(err)
					return
				}
				defer c.Close()
				br := bufio.NewReader(c)
				for i := 0; pb.Next(); i++ {
					redirectOnce(b, c, br, reqs[i%files])
				}
			})
		})
	}
}

// redirectOnce sends req on c and reads its answer, which must be a 302
// without a body.
func redirectOnce(b *testing.B, c net.Conn, br *bufio.Reader, req []byte) {
	if _, err := c.Write(req); err != nil {
		b.Fatal(err)
	}
	first := true
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			b.Fatal(err)
		}
		if first && !bytes.HasPrefix(line, []byte("HTTP/1.1 302 ")) {
			b.Fatalf("answer %q, want a 302", line)
		}
		first = false
		if len(line) == 2 {
			return
		}
	}
}
