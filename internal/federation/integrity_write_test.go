package federation

import (
	"bytes"
	"crypto/md5"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/httpx"
)

// Writes through the federator (write.go, README "Guarantees").

func TestPutRefusesContentRange(t *testing.T) {
	a := newFake("ra", false)
	a.put("/f", []byte("0123456789"))
	tf := startFed(t, cfgYAML(slowHealth, ep("ra", "writable: true")), a)
	resp, _ := tf.do(t, "PUT", "/f", http.Header{"Content-Range": {"bytes 4-5/10"}}, bytes.NewReader([]byte("xx")))
	if resp.StatusCode != 400 {
		t.Errorf("PUT with Content-Range = %d, want 400", resp.StatusCode)
	}
	if d, _ := a.get("/f"); string(d) != "0123456789" || a.puts.Load() != 0 {
		t.Errorf("file is %q after %d puts; want it untouched", d, a.puts.Load())
	}
}

func TestPutConditionalsThroughFederator(t *testing.T) {
	v1 := []byte("version one")
	etag := `"` + fakeInfo("/f", v1).ETag + `"`
	for _, tc := range []struct {
		name   string
		exists bool
		hdr    http.Header
		code   int
	}{
		{"If-None-Match * on existing", true, http.Header{"If-None-Match": {"*"}}, 412},
		{"If-None-Match * on new", false, http.Header{"If-None-Match": {"*"}}, 201},
		{"If-Match wrong", true, http.Header{"If-Match": {`"nope"`}}, 412},
		{"If-Match on missing", false, http.Header{"If-Match": {etag}}, 412},
		{"If-Match current", true, http.Header{"If-Match": {etag}}, 204},
		{"If-None-Match current", true, http.Header{"If-None-Match": {etag}}, 412},
		{"If-Unmodified-Since past", true, http.Header{"If-Unmodified-Since": {"Sat, 01 Jan 2000 00:00:00 GMT"}}, 412},
		{"unconditional replace", true, nil, 204},
		{"unconditional create", false, nil, 201},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newFake("ra", false)
			if tc.exists {
				a.put("/f", v1)
			}
			tf := startFed(t, cfgYAML(slowHealth, ep("ra", "writable: true")), a)
			resp, body := tf.do(t, "PUT", "/f", tc.hdr, bytes.NewReader([]byte("version two")))
			if resp.StatusCode != tc.code {
				t.Fatalf("PUT = %d %q, want %d", resp.StatusCode, body, tc.code)
			}
			d, ok := a.get("/f")
			switch {
			case tc.code/100 == 2 && string(d) != "version two":
				t.Errorf("after %d the file is %q", tc.code, d)
			case tc.code == 412 && tc.exists && string(d) != string(v1):
				t.Errorf("after 412 the file is %q, want it untouched", d)
			case tc.code == 412 && !tc.exists && ok:
				t.Errorf("after 412 a file was created")
			}
		})
	}
	t.Run("endpoint down: 503, not a guess", func(t *testing.T) {
		a, b := newFake("ra", false), newFake("rb", false)
		a.put("/f", v1)
		b.down.Store(true)
		tf := startFed(t, cfgYAML(slowHealth, ep("ra", "writable: true"), ep("rb", "writable: true")), a, b)
		resp, _ := tf.do(t, "PUT", "/g", http.Header{"If-None-Match": {"*"}}, bytes.NewReader([]byte("x")))
		if resp.StatusCode != 503 {
			t.Errorf("conditional PUT with an endpoint not answering = %d, want 503", resp.StatusCode)
		}
	})
}

func TestPutDigestCheckedByFederator(t *testing.T) {
	body := []byte("the bytes the client sends")
	good := "adler32=" + httpx.Adler32Of(body)
	sum := md5.Sum(body)
	goodMD5 := base64.StdEncoding.EncodeToString(sum[:])
	for _, tc := range []struct {
		name string
		hdr  http.Header
		code int
	}{
		{"wrong adler32", http.Header{"Digest": {"adler32=00000001"}}, 400},
		{"right adler32", http.Header{"Digest": {good}}, 204},
		{"wrong Content-MD5", http.Header{"Content-Md5": {base64.StdEncoding.EncodeToString(make([]byte, 16))}}, 400},
		{"right Content-MD5", http.Header{"Content-Md5": {goodMD5}}, 204},
		{"malformed Content-MD5", http.Header{"Content-Md5": {"zz"}}, 400},
		// The storage role's rule (httpx.WantedDigests), which the
		// federator once missed: a digest it cannot check is no check.
		{"malformed adler32", http.Header{"Digest": {"adler32=zz"}}, 400},
		{"wrong md5 on a second Digest line", http.Header{"Digest": {good, "md5=" + base64.StdEncoding.EncodeToString(make([]byte, 16))}}, 400},
		{"two adler32 values", http.Header{"Digest": {good + ",adler32=00000001"}}, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newFake("ra", false)
			a.put("/f", []byte("old"))
			tf := startFed(t, cfgYAML(slowHealth, ep("ra", "writable: true")), a)
			resp, msg := tf.do(t, "PUT", "/f", tc.hdr, bytes.NewReader(body))
			if resp.StatusCode != tc.code {
				t.Fatalf("PUT = %d %q, want %d", resp.StatusCode, msg, tc.code)
			}
			d, _ := a.get("/f")
			if tc.code == 400 && string(d) != "old" {
				t.Errorf("after 400 the file is %q, want the old one", d)
			}
		})
	}
}

// Read your writes: a replaced file is replaced everywhere it is read
// from, and a replica that could not be retired is never served.
func TestPutReadYourWrites(t *testing.T) {
	v1, v2 := randData(50_000, 31), randData(60_000, 32)
	t.Run("others deleted", func(t *testing.T) {
		a, b := newFake("ra", false), newFake("rb", false)
		a.put("/f", v1)
		b.put("/f", v1)
		tf := startFed(t, cfgYAML("mode: proxy\n"+slowHealth, ep("ra", "writable: true"), ep("rb", "writable: true")), a, b)
		tf.get(t, "/f", nil) // cached
		if resp, msg := tf.do(t, "PUT", "/f", nil, bytes.NewReader(v2)); resp.StatusCode != 204 {
			t.Fatalf("PUT = %d %q, want 204 (replaced)", resp.StatusCode, msg)
		}
		for range 20 {
			if _, body, err := tf.get(t, "/f", nil); err != nil || !bytes.Equal(body, v2) {
				t.Fatalf("GET after PUT: %d bytes, %v; want v2", len(body), err)
			}
		}
		if _, ok := b.get("/f"); ok {
			if _, ok2 := a.get("/f"); ok2 {
				t.Errorf("both replicas remain: one of them holds v1")
			}
		}
	})
	t.Run("other down: refused, nothing changed", func(t *testing.T) {
		a, b := newFake("ra", false), newFake("rb", false)
		a.put("/f", v1)
		b.put("/f", v1)
		tf := startFed(t, cfgYAML("mode: proxy\n"+slowHealth, ep("ra", "writable: true", "priority: 2"), ep("rb", "writable: true", "priority: 1")), a, b)
		tf.get(t, "/f", nil)
		a.down.Store(true) // ra takes no write and no delete
		resp, msg := tf.do(t, "PUT", "/f", nil, bytes.NewReader(v2))
		if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || !strings.Contains(msg, "ra") {
			t.Fatalf("PUT with ra down = %d %q (Retry-After %q), want 503 naming ra", resp.StatusCode, msg, resp.Header.Get("Retry-After"))
		}
		if d, _ := b.get("/f"); !bytes.Equal(d, v1) {
			t.Errorf("rb holds %d bytes after a refused PUT, want v1 untouched", len(d))
		}
		a.down.Store(false) // back: the same PUT goes through, and retires ra's copy
		if resp, msg := tf.do(t, "PUT", "/f", nil, bytes.NewReader(v2)); resp.StatusCode != 204 {
			t.Fatalf("PUT with both up = %d %q", resp.StatusCode, msg)
		}
		for range 20 {
			if _, body, err := tf.get(t, "/f", nil); err != nil || !bytes.Equal(body, v2) {
				t.Fatalf("GET after PUT: %d bytes, %v; want v2", len(body), err)
			}
		}
	})
	t.Run("old replica not removed: 503, and never served", func(t *testing.T) {
		a, b := newFake("ra", false), newFake("rb", false)
		a.put("/f", v1)
		b.put("/f", v1)
		tf := startFed(t, cfgYAML("mode: proxy\n"+slowHealth, ep("ra", "writable: true", "priority: 2"), ep("rb", "writable: true", "priority: 1")), a, b)
		a.deleteErr.Store(fmt.Errorf("fake ra: disk quota: %w", endpoint.ErrUnavailable))
		resp, msg := tf.do(t, "PUT", "/f", nil, bytes.NewReader(v2))
		if resp.StatusCode != 503 || !strings.Contains(msg, "could not be removed") {
			t.Fatalf("PUT whose old replica stays = %d %q, want 503 saying so", resp.StatusCode, msg)
		}
		for range 20 {
			if _, body, err := tf.get(t, "/f", nil); err != nil || !bytes.Equal(body, v2) {
				t.Fatalf("GET after the PUT: %d bytes, %v; want v2, never ra's stale v1", len(body), err)
			}
		}
	})
	t.Run("read-only replica: 409, nothing written", func(t *testing.T) {
		a, b := newFake("ra", false), newFake("rb", false)
		a.put("/f", v1)
		b.put("/f", v1)
		tf := startFed(t, cfgYAML("mode: proxy\n"+slowHealth, ep("ra"), ep("rb", "writable: true")), a, b)
		resp, msg := tf.do(t, "PUT", "/f", nil, bytes.NewReader(v2))
		if resp.StatusCode != 409 || !strings.Contains(msg, "ra") {
			t.Fatalf("PUT over a read-only replica = %d %q, want 409 naming ra", resp.StatusCode, msg)
		}
		if d, _ := b.get("/f"); !bytes.Equal(d, v1) || b.puts.Load() != 0 {
			t.Errorf("rb changed by a refused PUT")
		}
	})
}

// The same rules against two real storage roles, through the federator
// in redirect mode (a PUT over an existing file is carried by the
// federator, because the other replica must be retired).
func TestRealPutThroughFederator(t *testing.T) {
	a, b := startSite(t, "ra"), startSite(t, "rb")
	v1 := randData(100_000, 33)
	a.write(t, "/f", v1)
	b.write(t, "/f", v1)
	tf := realFed(t, "mode: proxy", a, b)
	put := func(hdr http.Header, data []byte) int {
		resp, _ := tf.do(t, "PUT", "/f", hdr, bytes.NewReader(data))
		return resp.StatusCode
	}
	if code := put(http.Header{"Digest": {"adler32=00000001"}}, []byte("bad")); code != 400 {
		t.Errorf("PUT with a wrong Digest = %d, want 400", code)
	}
	if code := put(http.Header{"Content-Range": {"bytes 4-5/10"}}, []byte("xx")); code != 400 {
		t.Errorf("PUT with Content-Range = %d, want 400", code)
	}
	if code := put(http.Header{"If-None-Match": {"*"}}, []byte("new")); code != 412 {
		t.Errorf("PUT If-None-Match: * over a file = %d, want 412", code)
	}
	for _, s := range []*site{a, b} {
		if d, _ := os.ReadFile(filepath.Join(s.dir, "f")); !bytes.Equal(d, v1) {
			t.Fatalf("%s: file changed by a refused PUT (%d bytes)", s.name, len(d))
		}
	}
	v2 := randData(120_000, 34)
	if code := put(http.Header{"Digest": {"adler32=" + httpx.Adler32Of(v2)}}, v2); code != 204 {
		t.Fatalf("PUT v2 = %d, want 204", code)
	}
	for i := range 10 {
		if _, body, err := tf.get(t, "/f", nil); err != nil || !bytes.Equal(body, v2) {
			t.Fatalf("GET %d after PUT: %d bytes, %v; want v2", i, len(body), err)
		}
	}
	left := 0
	for _, s := range []*site{a, b} {
		d, err := os.ReadFile(filepath.Join(s.dir, "f"))
		if err == nil {
			left++
			if !bytes.Equal(d, v2) {
				t.Errorf("%s still holds another version (%d bytes)", s.name, len(d))
			}
		}
	}
	if left != 1 {
		t.Errorf("%d replicas after the PUT, want 1 (the other retired)", left)
	}

}

// A look-up that started before a write and ends after it must not put
// its answer, older than the write, in the metadata cache: the write's
// invalidation came first and would be undone (a reader would be sent
// to the old version until the entry expires).
func TestLookupOlderThanWriteNotCached(t *testing.T) {
	c := newCache(100, testHot, nil)
	now := time.Now().UnixNano()
	old := &entry{status: 200, expires: now + int64(time.Hour)}
	gen := c.gen("/f")    // the look-up starts
	c.invalidate("/f", 0) // a write lands and drops the path
	c.putIf("/f", old, now, gen)
	if got := c.get("/f", now); got != nil {
		t.Fatalf("an answer from before the write was cached after it")
	}
	gen = c.gen("/f")
	c.putIf("/f", old, now, gen)
	// A 200 entry is kept packed: get hands out an entry made from it.
	if got := c.get("/f", now); got == nil || got.status != old.status || got.expires != old.expires {
		t.Fatalf("an answer with no write in between was not cached")
	}
}

// A PUT over an existing file is carried by the federator, not
// redirected: after a 307 the client's write lands later, and a read in
// between would put the old version back in the metadata cache (and in
// the cache of the process), to be served after the write was
// acknowledged. A new file may still be redirected.
func TestPutOverExistingNotRedirected(t *testing.T) {
	v1, v2 := randData(1000, 41), randData(2000, 42)
	a := newFake("site-a", true)
	a.put("/f", v1)
	tf := startFed(t, cfgYAML(slowHealth+"\nmetadata_cache: {ttl: 1h, negative_ttl: 1h}", ep("site-a", "writable: true")), a)
	length := func() string {
		t.Helper()
		resp, body := tf.do(t, "PROPFIND", "/f", http.Header{"Depth": {"0"}}, nil)
		if resp.StatusCode != http.StatusMultiStatus {
			t.Fatalf("PROPFIND /f = %d", resp.StatusCode)
		}
		_, rest, _ := strings.Cut(body, "getcontentlength>")
		n, _, _ := strings.Cut(rest, "<")
		return n
	}
	if n := length(); n != "1000" {
		t.Fatalf("PROPFIND /f before = %s bytes, want 1000", n)
	}
	resp, msg := tf.do(t, "PUT", "/f", nil, bytes.NewReader(v2))
	if resp.StatusCode == http.StatusTemporaryRedirect {
		length()        // a reader between the answer and the client's write
		a.put("/f", v2) // the client follows the redirect
	} else if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("PUT over /f = %d %q, want 204", resp.StatusCode, msg)
	}
	if n := length(); n != "2000" {
		t.Fatalf("PROPFIND /f after the PUT (%d) = %s bytes, want 2000: the old version outlived the write", resp.StatusCode, n)
	}
	if resp, _ := tf.do(t, "PUT", "/new", nil, bytes.NewReader(v1)); resp.StatusCode != http.StatusTemporaryRedirect {
		t.Errorf("PUT of a new file = %d, want 307", resp.StatusCode)
	}
}
