package federation

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"mime"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/httpx"
	"github.com/lakefed/lakefed/internal/testenv"
)

// The proxy's promises (proxy.go; README "Guarantees"), each against
// fakes whose failures the test controls. The same promises against real
// storage roles and nginx are in integrity_real_test.go.

func randData(n int, seed uint64) []byte {
	var key [32]byte
	key[0], key[1] = byte(seed), byte(seed>>8)
	b := make([]byte, n)
	_, _ = rand.NewChaCha8(key).Read(b)
	return b
}

// get does a GET and reads what comes, returning the read error instead
// of failing on it: a broken body is what some tests want to see.
func (tf *testFed) get(t *testing.T, p string, hdr http.Header) (*http.Response, []byte, error) {
	t.Helper()
	req, _ := http.NewRequest("GET", tf.srv.URL+p, nil)
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := noFollow.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", p, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp, body, err
}

// Replicas of one size but different bytes: a failover from one to the
// other would splice two files. The read must break instead, having sent
// only bytes of the first.
func TestProxyFailoverNeverSplices(t *testing.T) {
	va, vb := randData(1<<20, 1), randData(1<<20, 2)
	a, b := newFake("ra", false), newFake("rb", false)
	a.put("/f", va)
	b.put("/f", vb)
	a.failAfter.Store(400_000)
	tf := startFed(t, cfgYAML("mode: proxy\n"+slowHealth, ep("ra", "priority: 1"), ep("rb", "priority: 2")), a, b)

	resp, body, err := tf.get(t, "/f", nil)
	if resp.StatusCode != 200 {
		t.Fatalf("GET = %d", resp.StatusCode)
	}
	if err == nil {
		t.Fatalf("GET read %d bytes without an error; want a broken body", len(body))
	}
	if len(body) > 400_000 || !bytes.Equal(body, va[:len(body)]) {
		t.Fatalf("got %d bytes: not a prefix of ra's file (spliced?)", len(body))
	}
	if b.opens.Load() != 0 {
		t.Errorf("rb opened %d times; it holds other bytes and must not be read", b.opens.Load())
	}
	_, js := tf.do(t, "GET", "/api/disagreements", nil, nil)
	var ds []Disagreement
	if err := json.Unmarshal([]byte(js), &ds); err != nil || len(ds) == 0 || ds[0].Path != "/f" {
		t.Errorf("/api/disagreements = %s (%v); want the pair ra/rb for /f", js, err)
	}
	_, metrics := tf.do(t, "GET", "/metrics", nil, nil)
	if strings.Contains(metrics, "lakefed_federation_replica_disagreements_total 0") {
		t.Errorf("disagreement not counted:\n%s", grepLines(metrics, "disagree"))
	}
}

// Replicas that differ are served whole, each answer with its own ETag
// and Digest: an answer's Digest always matches its body.
func TestProxyDigestOfReplicaServed(t *testing.T) {
	va, vb := randData(64<<10, 3), randData(64<<10, 4)
	a, b := newFake("ra", false), newFake("rb", false)
	a.put("/f", va)
	b.put("/f", vb)
	// Equal priority, no location: ranking shuffles them per request.
	tf := startFed(t, cfgYAML("mode: proxy\n"+slowHealth, ep("ra"), ep("rb")), a, b)
	seen := map[string]bool{}
	for range 40 {
		resp, body, err := tf.get(t, "/f", http.Header{"Want-Digest": {"adler32"}})
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET = %d, %v", resp.StatusCode, err)
		}
		want := "adler32=" + httpx.Adler32Of(body)
		if got := resp.Header.Get("Digest"); got != want {
			t.Fatalf("Digest %q, body has %q", got, want)
		}
		if et := resp.Header.Get("Etag"); et != `"`+fakeInfo("/f", body).ETag+`"` {
			t.Fatalf("ETag %q is not that of the bytes served", et)
		}
		seen[string(body[:8])] = true
	}
	if len(seen) != 2 {
		t.Logf("only one replica served in 40 tries (ranking did not shuffle)")
	}
}

// Identical replicas: a failover is proven safe by the checksum and goes
// on at the same offset.
func TestProxyFailoverSameBytes(t *testing.T) {
	data := randData(1<<20, 5)
	a, b := newFake("ra", false), newFake("rb", false)
	a.put("/f", data)
	b.put("/f", data)
	a.failAfter.Store(300_001)
	tf := startFed(t, cfgYAML("mode: proxy\n"+slowHealth, ep("ra", "priority: 1"), ep("rb", "priority: 2")), a, b)
	resp, body, err := tf.get(t, "/f", nil)
	if err != nil || resp.StatusCode != 200 || !bytes.Equal(body, data) {
		t.Fatalf("GET = %d, %d bytes, %v; want the file whole", resp.StatusCode, len(body), err)
	}
}

// A file replaced by a bigger one after its size was cached: the next GET
// must send the new length and bytes, never the old length.
func TestProxyStaleSizeLooksAgain(t *testing.T) {
	v1, v2 := randData(1_000_000, 6), randData(2_000_000, 7)
	a, b := newFake("ra", false), newFake("rb", false)
	a.put("/f", v1)
	b.put("/f", v1)
	tf := startFed(t, cfgYAML("mode: proxy\n"+slowHealth, ep("ra"), ep("rb")), a, b)
	if resp, body, err := tf.get(t, "/f", nil); err != nil || !bytes.Equal(body, v1) {
		t.Fatalf("first GET = %d, %d bytes, %v", resp.StatusCode, len(body), err)
	}
	a.put("/f", v2)
	b.put("/f", v2)
	for _, tc := range []struct {
		name  string
		hdr   http.Header
		code  int
		want  []byte
		crng  string
		clen  string
		after func()
	}{
		{name: "whole", code: 200, want: v2, clen: "2000000"},
		{name: "range", hdr: http.Header{"Range": {"bytes=1500000-1500009"}}, code: 206, want: v2[1500000:1500010], crng: "bytes 1500000-1500009/2000000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a.put("/f", v1) // cache v1's size again
			b.put("/f", v1)
			tf.get(t, "/f", nil)
			a.put("/f", v2)
			b.put("/f", v2)
			resp, body, err := tf.get(t, "/f", tc.hdr)
			if err != nil || resp.StatusCode != tc.code || !bytes.Equal(body, tc.want) {
				t.Fatalf("GET = %d, %d bytes, %v; want %d and the new file's bytes", resp.StatusCode, len(body), err, tc.code)
			}
			if tc.crng != "" && resp.Header.Get("Content-Range") != tc.crng {
				t.Errorf("Content-Range %q, want %q", resp.Header.Get("Content-Range"), tc.crng)
			}
		})
	}
}

// No status before a replica has answered: every replica down after the
// metadata was cached is 503 with Retry-After; the file deleted on every
// replica is 404; a Range request likewise.
func TestProxyNoStatusBeforeBytes(t *testing.T) {
	data := randData(100_000, 8)
	for _, tc := range []struct {
		name   string
		hdr    http.Header
		break_ func(a, b *fakeEP)
		code   int
	}{
		{"all down", nil, func(a, b *fakeEP) { a.down.Store(true); b.down.Store(true) }, 503},
		{"all down, range", http.Header{"Range": {"bytes=10-20"}}, func(a, b *fakeEP) { a.down.Store(true); b.down.Store(true) }, 503},
		{"deleted everywhere", nil, func(a, b *fakeEP) { a.Delete(t.Context(), "/f"); b.Delete(t.Context(), "/f") }, 404},
		{"deleted everywhere, range", http.Header{"Range": {"bytes=10-20"}}, func(a, b *fakeEP) { a.Delete(t.Context(), "/f"); b.Delete(t.Context(), "/f") }, 404},
		{"deleted on one", nil, func(a, b *fakeEP) { a.Delete(t.Context(), "/f") }, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := newFake("ra", false), newFake("rb", false)
			a.put("/f", data)
			b.put("/f", data)
			tf := startFed(t, cfgYAML("mode: proxy\n"+slowHealth, ep("ra", "priority: 1"), ep("rb", "priority: 2")), a, b)
			if resp, _, err := tf.get(t, "/f", nil); err != nil || resp.StatusCode != 200 {
				t.Fatalf("warm-up GET = %d, %v", resp.StatusCode, err)
			}
			tc.break_(a, b)
			resp, body, err := tf.get(t, "/f", tc.hdr)
			if err != nil {
				t.Fatalf("GET: body broken (%v) after status %d", err, resp.StatusCode)
			}
			if resp.StatusCode != tc.code {
				t.Fatalf("GET = %d %q, want %d", resp.StatusCode, body, tc.code)
			}
			if tc.code == 503 && resp.Header.Get("Retry-After") == "" {
				t.Errorf("503 without Retry-After")
			}
			if tc.code == 200 && !bytes.Equal(body, data) {
				t.Errorf("200 with %d bytes, not the file", len(body))
			}
		})
	}
}

// A replica that stops sending mid-stream (kill -STOP) is left after the
// idle timeout, and the read goes on from the other replica.
func TestProxyStalledReplicaLeft(t *testing.T) {
	data := randData(2<<20, 9)
	a, b := newFake("ra", false), newFake("rb", false)
	a.put("/f", data)
	b.put("/f", data)
	a.stallAfter.Store(1 << 20)
	tf := startFed(t, cfgYAML("mode: proxy\nproxy_idle_timeout: 300ms\n"+slowHealth, ep("ra", "priority: 1"), ep("rb", "priority: 2")), a, b)
	start := time.Now()
	resp, body, err := tf.get(t, "/f", nil)
	if err != nil || resp.StatusCode != 200 || !bytes.Equal(body, data) {
		t.Fatalf("GET = %d, %d bytes, %v; want the file whole", resp.StatusCode, len(body), err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("GET took %v; the stall should cost about the idle timeout (300ms)", d)
	}
	if b.opens.Load() != 1 {
		t.Errorf("rb opened %d times, want 1", b.opens.Load())
	}
}

// A single replica whose server restarts mid-read: the read retries the
// same replica at the same offset, checking it is the same version.
func TestProxyRetriesSameReplica(t *testing.T) {
	data := randData(1<<20, 10)
	t.Run("back", func(t *testing.T) {
		a := newFake("ra", false)
		a.put("/f", data)
		tf := startFed(t, cfgYAML("mode: proxy\nproxy_idle_timeout: 2s\n"+slowHealth, ep("ra")), a)
		a.failAfter.Store(500_000)
		heal := func() { a.failAfter.Store(0) } // the server is back
		a.onBreak.Store(&heal)
		resp, body, err := tf.get(t, "/f", nil)
		if err != nil || resp.StatusCode != 200 || !bytes.Equal(body, data) {
			t.Fatalf("GET = %d, %d bytes, %v; want the file whole", resp.StatusCode, len(body), err)
		}
		if a.opens.Load() != 2 {
			t.Errorf("opens = %d, want 2 (the first, and one at the offset reached)", a.opens.Load())
		}
	})
	t.Run("replaced while away", func(t *testing.T) {
		a := newFake("ra", false)
		a.put("/f", data)
		tf := startFed(t, cfgYAML("mode: proxy\nproxy_idle_timeout: 2s\n"+slowHealth, ep("ra")), a)
		a.failAfter.Store(500_000)
		replace := func() { a.put("/f", randData(1<<20, 11)); a.failAfter.Store(0) }
		a.onBreak.Store(&replace)
		resp, body, err := tf.get(t, "/f", nil)
		if resp.StatusCode != 200 || err == nil {
			t.Fatalf("GET = %d, %d bytes, %v; want 200 and a broken body", resp.StatusCode, len(body), err)
		}
		if len(body) != 500_000 || !bytes.Equal(body, data[:len(body)]) {
			t.Fatalf("%d bytes: want the first version's 500000-byte prefix and nothing of the second", len(body))
		}
	})
}

// A lone replica with weak validators (nginx's kind: the same ETag for
// any file of the same size and time) breaks mid-transfer and comes back.
// The read resumes on it only when its adler32, asked when the answer
// began and again after the new read opened, is the same; otherwise (a
// file replaced with its size and time kept, or no checksum to tell) the
// answer breaks, with a prefix of the first file.
func TestProxyWeakReplicaResume(t *testing.T) {
	data := randData(1<<20, 14)
	for _, tc := range []struct {
		name             string
		replaced, noSums bool
		// early: the file is replaced just after the first read opened,
		// before its adler32 was asked after the open: that one is then
		// the new file's, the same as the one the new read gives.
		early bool
		whole bool
	}{
		{"back, adler32 the same", false, false, false, true},
		{"replaced, adler32 differs", true, false, false, false},
		{"back, no checksum", false, true, false, false},
		{"replaced, no checksum", true, true, false, false},
		{"replaced just after the open", false, false, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newFake("ra", false)
			a.weak.Store(true)
			a.noSums.Store(tc.noSums)
			a.put("/f", data)
			tf := startFed(t, cfgYAML("mode: proxy\nproxy_idle_timeout: 2s\n"+slowHealth, ep("ra")), a)
			if _, _, err := tf.get(t, "/f", http.Header{"Range": {"bytes=0-0"}}); err != nil {
				t.Fatal(err) // the look-up, with the adler32 of the first file
			}
			if tc.early {
				early := func() { a.put("/f", randData(1<<20, 15)) }
				a.afterOpen.Store(&early)
			}
			a.failAfter.Store(500_000)
			back := func() {
				if tc.replaced {
					a.put("/f", randData(1<<20, 15))
				}
				a.failAfter.Store(0)
			}
			a.onBreak.Store(&back)
			resp, body, err := tf.get(t, "/f", nil)
			if resp.StatusCode != 200 || !bytes.Equal(body, data[:min(len(body), len(data))]) {
				t.Fatalf("GET = %d, %d bytes: not a prefix of the first file (spliced)", resp.StatusCode, len(body))
			}
			if tc.whole && (err != nil || len(body) != len(data)) {
				t.Fatalf("GET: %d bytes, %v; want the file whole, its adler32 proves the replica unchanged", len(body), err)
			}
			if !tc.whole && err == nil {
				t.Fatalf("GET: %d bytes without error; want a broken answer, nothing proves the replica unchanged", len(body))
			}
		})
	}
}

// A multi-range answer is one read of a replica whose validators are
// weak, its parts in ascending order (nothing could prove two reads of
// it the same file); a replica whose validators are strong is read range
// by range, in the order asked.
func TestProxyWeakMultiRangeOneRead(t *testing.T) {
	data := randData(10_000, 16)
	for _, weak := range []bool{false, true} {
		t.Run(fmt.Sprintf("weak=%v", weak), func(t *testing.T) {
			a := newFake("ra", false)
			a.weak.Store(weak)
			a.put("/f", data)
			tf := startFed(t, cfgYAML("mode: proxy\n"+slowHealth, ep("ra")), a)
			before := a.opens.Load()
			resp, body, err := tf.get(t, "/f", http.Header{"Range": {"bytes=5000-5099,0-9,100-199"}})
			if err != nil || resp.StatusCode != 206 {
				t.Fatalf("GET = %d, %v", resp.StatusCode, err)
			}
			_, params, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
			if err != nil {
				t.Fatal(err)
			}
			mr := multipart.NewReader(strings.NewReader(string(body)), params["boundary"])
			var order []string
			for {
				part, err := mr.NextPart()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				got, _ := io.ReadAll(part)
				cr := part.Header.Get("Content-Range")
				first, last, _, _ := httpx.ParseContentRange(cr)
				if !bytes.Equal(got, data[first:last+1]) {
					t.Errorf("part %s holds other bytes", cr)
				}
				order = append(order, cr)
			}
			want, opens := "[bytes 5000-5099/10000 bytes 0-9/10000 bytes 100-199/10000]", int64(3)
			if weak {
				want, opens = "[bytes 0-9/10000 bytes 100-199/10000 bytes 5000-5099/10000]", 1
			}
			if fmt.Sprint(order) != want || a.opens.Load()-before != opens {
				t.Errorf("parts %v in %d reads; want %s in %d", order, a.opens.Load()-before, want, opens)
			}
		})
	}
}

// Range amplification: a hundred overlapping ranges of a 1 MB file are
// refused with 416, as the storage role refuses them (httpx.ServeContent),
// never a hundred copies of it.
func TestProxyRangeAmplification(t *testing.T) {
	data := randData(1_000_000, 12)
	a := newFake("ra", false)
	a.put("/f", data)
	tf := startFed(t, cfgYAML("mode: proxy\n"+slowHealth, ep("ra")), a)
	for _, spec := range []string{
		"bytes=" + strings.Repeat("0-,", 99) + "0-",
		"bytes=" + strings.Repeat("0-999999,", 20) + "0-1",
		"bytes=" + strings.TrimSuffix(strings.Repeat("1-2,", 1000), ","),
	} {
		before := a.opens.Load()
		resp, body, err := tf.get(t, "/f", http.Header{"Range": {spec}})
		if err != nil {
			t.Fatalf("GET: %v", err)
		}
		if resp.StatusCode != 416 || len(body) > 2*len(data) {
			t.Errorf("Range %.30q...: %d, %d bytes for a %d-byte file; want 416", spec, resp.StatusCode, len(body), len(data))
		}
		if n := a.opens.Load() - before; n > 2 {
			t.Errorf("Range %.30q...: %d replica reads", spec, n)
		}
	}
}

// Conditionals on a proxied GET and on HEAD are evaluated against the
// replica served (RFC 9110 §13.2).
func TestProxyConditionals(t *testing.T) {
	data := randData(10_000, 13)
	a := newFake("ra", false)
	a.put("/f", data)
	tf := startFed(t, cfgYAML("mode: proxy\n"+slowHealth, ep("ra")), a)
	etag := `"` + fakeInfo("/f", data).ETag + `"`
	lm := time.Unix(1700000000, 0).UTC().Format(http.TimeFormat)
	past := time.Unix(1600000000, 0).UTC().Format(http.TimeFormat)
	for _, tc := range []struct {
		name string
		hdr  http.Header
		code int
	}{
		{"If-None-Match current", http.Header{"If-None-Match": {etag}}, 304},
		{"If-None-Match other", http.Header{"If-None-Match": {`"zzz"`}}, 200},
		{"If-None-Match star", http.Header{"If-None-Match": {"*"}}, 304},
		{"If-Match wrong", http.Header{"If-Match": {`"zzz"`}}, 412},
		{"If-Match current", http.Header{"If-Match": {etag}}, 200},
		{"If-Modified-Since now", http.Header{"If-Modified-Since": {lm}}, 304},
		{"If-Unmodified-Since past", http.Header{"If-Unmodified-Since": {past}}, 412},
		{"If-Range stale", http.Header{"If-Range": {`"zzz"`}, "Range": {"bytes=0-9"}}, 200},
		{"If-Range current", http.Header{"If-Range": {etag}, "Range": {"bytes=0-9"}}, 206},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, method := range []string{"GET", "HEAD"} {
				want := tc.code
				if method == "HEAD" && want == 206 {
					want = 200 // HEAD from metadata ignores Range
				}
				resp, body := tf.do(t, method, "/f", tc.hdr, nil)
				if resp.StatusCode != want {
					t.Errorf("%s = %d, want %d", method, resp.StatusCode, want)
				}
				if method == "GET" && want == 200 && body != string(data) {
					t.Errorf("GET 200 with %d bytes, want the whole file", len(body))
				}
			}
		})
	}
}

// A cached redirect URL past half its life is re-signed, and the fresh
// signature is the one in Location (not only in Link): a client must
// never get a URL about to expire.
func TestPresignRefreshReachesLocation(t *testing.T) {
	s3 := newFake("cloud", false)
	s3.presign = 1200 * time.Millisecond
	s3.put("/f", []byte("object"))
	tf := startFed(t, cfgYAML(slowHealth+"\nmetadata_cache: {ttl: 1200ms}", ep("cloud")), s3)
	first, _ := tf.do(t, "GET", "/f", nil, nil)
	born := time.Now()
	old := first.Header.Get("Location")
	time.Sleep(700 * time.Millisecond) // past half the URL's life, within the entry's TTL
	resp, _ := tf.do(t, "GET", "/f", nil, nil)
	if time.Since(born) >= 1200*time.Millisecond {
		t.Skip("too slow to stay within the cache TTL")
	}
	loc := resp.Header.Get("Location")
	if loc == old {
		t.Fatalf("Location %q is the old signature, %v into a %v life", loc, time.Since(born), s3.presign)
	}
	if link := resp.Header.Get("Link"); !strings.Contains(link, "<"+loc+">") {
		t.Errorf("Location %q is not the Link's URL %q", loc, link)
	}
}

// A look-up does not wait for a slow endpoint once another has the file:
// it answers within foundGrace, and the slow endpoint's answer completes
// the cached entry when it comes.
func TestLookupDoesNotWaitForSlowEndpoint(t *testing.T) {
	a, b := newFake("fast", true), newFake("slow", true)
	a.put("/f", []byte("data"))
	b.put("/f", []byte("data"))
	gate := make(chan struct{})
	b.gate.Store(&gate)
	tf := startFed(t, cfgYAML(slowHealth, ep("fast", "priority: 2", "timeout: 10s"), ep("slow", "priority: 1", "timeout: 10s")), a, b)
	start := time.Now()
	resp, body := tf.do(t, "GET", "/f", http.Header{DebugHeader: {"1"}}, nil)
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("GET took %v with one endpoint slow; want about %v", d, foundGrace)
	}
	if resp.StatusCode != 302 || resp.Header.Get("Location") != "http://fast.example/f" {
		t.Fatalf("GET = %d %q %q", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	if !strings.Contains(resp.Header.Get(ChoiceHeader), "slow=slow: not waited for") {
		t.Errorf("choice %q does not show the slow endpoint", resp.Header.Get(ChoiceHeader))
	}
	close(gate) // the slow endpoint answers: its replica (priority 1) is used next
	testenv.Eventually(t, 5*time.Second, "the full answer in the cache", func() bool {
		resp, _ := tf.do(t, "GET", "/f", nil, nil)
		return resp.Header.Get("Location") == "http://slow.example/f"
	})
}
