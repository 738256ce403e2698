package storage

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/lakefed/lakefed/internal/httpx/davxml"
)

// benchClient keeps connections alive across parallel goroutines.
func benchClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	tr.DisableCompression = true
	return &http.Client{Transport: tr}
}

func benchFile(b *testing.B, ts *testServer, name string, size int) {
	b.Helper()
	p := filepath.Join(ts.root, name)
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, bytes.Repeat([]byte("x"), size), 0o644); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkHead measures HEAD over a real keep-alive listener, the way a
// federator's Stat fan-out hits a storage node.
func BenchmarkHead(b *testing.B) {
	ts := startServer(b, Config{})
	benchFile(b, ts, "bench/f.root", 1<<20)
	c := benchClient()
	url := ts.url + "/bench/f.root"
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := c.Head(url)
			if err != nil {
				b.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Errorf("HEAD = %d", resp.StatusCode)
				return
			}
		}
	})
}

// BenchmarkHeadHandler measures the handler alone (no network, no client):
// the part of the HEAD cost this package controls. Profile it with
// go test -bench HeadHandler -cpuprofile cpu.out.
func BenchmarkHeadHandler(b *testing.B) {
	ts := startServer(b, Config{})
	benchFile(b, ts, "bench/f.root", 1<<20)
	h := ts.s.Handler()
	req := httptest.NewRequest("HEAD", "/bench/f.root", nil)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != 200 {
			b.Fatalf("HEAD = %d", w.Code)
		}
	}
}

// BenchmarkGet reads a 16 MiB file over a real listener (sendfile path);
// bytes/s is the throughput.
func BenchmarkGet(b *testing.B) {
	const size = 16 << 20
	ts := startServer(b, Config{})
	benchFile(b, ts, "bench/big.root", size)
	c := benchClient()
	url := ts.url + "/bench/big.root"
	b.SetBytes(size)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := c.Get(url)
			if err != nil {
				b.Error(err)
				return
			}
			n, _ := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if n != size {
				b.Errorf("GET read %d bytes, want %d", n, size)
				return
			}
		}
	})
}

// BenchmarkGetSmall reads a 4 KiB file: the request-rate side of reads.
func BenchmarkGetSmall(b *testing.B) {
	ts := startServer(b, Config{})
	benchFile(b, ts, "bench/small", 4096)
	c := benchClient()
	url := ts.url + "/bench/small"
	b.SetBytes(4096)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := c.Get(url)
			if err != nil {
				b.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
}

// BenchmarkPut uploads 16 MiB files (temp file, adler32, fsync, rename).
func BenchmarkPut(b *testing.B) {
	const size = 16 << 20
	ts := startServer(b, Config{})
	c := benchClient()
	data := bytes.Repeat([]byte("y"), size)
	b.SetBytes(size)
	b.ResetTimer()
	for b.Loop() {
		req, _ := http.NewRequest("PUT", ts.url+"/bench/put.root", bytes.NewReader(data))
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			b.Fatalf("PUT = %d", resp.StatusCode)
		}
	}
}

// benchListEntries is the size of the directory the listing benchmarks
// read: the files per directory of bench/federation.sh.
const benchListEntries = 100

// BenchmarkPropfindDepth1 measures the handler's PROPFIND Depth 1 of a
// directory of benchListEntries files asked for what a federator asks
// (davxml.PropfindBody), written from the directory (live) and, for
// reference in the same run, member by member through x/net/webdav;
// µs/entry is the cost of one member.
func BenchmarkPropfindDepth1(b *testing.B) {
	ts := startServer(b, Config{})
	for i := range benchListEntries {
		benchFile(b, ts, "bench/f"+strconv.Itoa(i)+".root", 1024)
	}
	body := []byte(davxml.PropfindBody)
	run := func(b *testing.B, serve func(w http.ResponseWriter, r *http.Request)) {
		b.ReportAllocs()
		for b.Loop() {
			w := httptest.NewRecorder()
			req := httptest.NewRequest("PROPFIND", "/bench/", bytes.NewReader(body))
			req.Header.Set("Depth", "1")
			serve(w, req)
			if w.Code != http.StatusMultiStatus {
				b.Fatalf("PROPFIND = %d", w.Code)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*benchListEntries), "µs/entry")
	}
	b.Run("live", func(b *testing.B) { run(b, ts.s.Handler().ServeHTTP) })
	b.Run("webdav", func(b *testing.B) {
		run(b, func(w http.ResponseWriter, r *http.Request) {
			ts.s.serveDAVListing(&respWriter{ResponseWriter: w}, r, "/bench", body)
		})
	})
}
