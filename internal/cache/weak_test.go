package cache_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/cache"
	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/endpoint/kinds"
	"github.com/lakefed/lakefed/internal/testenv"
)

// weakOrigin is nginx, whose ETag is the modification second and the
// size (weak: a file replaced by one of the same size with its time kept
// keeps it), and which offers no checksum.
type weakOrigin struct {
	*testenv.Server
	ep endpoint.Endpoint
}

func startWeakOrigin(t *testing.T) *weakOrigin {
	t.Helper()
	ng := testenv.StartNginx(t)
	ep, err := kinds.New(t.Context(), endpoint.Config{Name: "nginx", URL: ng.URL}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	return &weakOrigin{Server: ng, ep: ep}
}

// replace puts data at name with the old file's size and modification
// time, as cp -p, touch -r or an rsync restore leave it (a new inode).
func (o *weakOrigin) replace(t *testing.T, name string, data []byte) {
	t.Helper()
	p := filepath.Join(o.Dir, name)
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	tmp := p + ".new"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(tmp, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
}

// A file partly cached from nginx and then replaced there under the same
// validators: a whole GET, with or without Cache-Control: no-cache, is
// one version (the new one: the cache proves the blocks on disk stale),
// never the cached blocks of the old joined to fetched blocks of the
// new; and what stays cached is that version too. A file cached whole is
// served new once revalidated.
func TestWeakOriginNeverSpliced(t *testing.T) {
	for _, tc := range []struct {
		name string
		hdr  []string
		// whole: the whole file is cached before the replacement, and
		// the cache revalidates at every request.
		whole bool
	}{
		{"plain", nil, false},
		{"no-cache", []string{"Cache-Control", "no-cache"}, false},
		{"revalidated", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := startWeakOrigin(t)
			v1, v2 := random(16*block, 51), random(16*block, 52)
			if err := os.WriteFile(filepath.Join(o.Dir, "f"), v1, 0o644); err != nil {
				t.Fatal(err)
			}
			old := time.Now().Add(-time.Hour)
			if err := os.Chtimes(filepath.Join(o.Dir, "f"), old, old); err != nil {
				t.Fatal(err)
			}
			cfg := cache.Config{BlockSize: block, RAM: -1, PrefetchBlocks: -1}
			last := 4*block - 1
			if tc.whole {
				cfg.RevalidateAfter, last = time.Nanosecond, len(v1)-1
			}
			n := startCache(t, cfg, o.ep)
			resp, body := get(t, n.URL+"/f", "Range", fmt.Sprintf("bytes=0-%d", last))
			if resp.StatusCode/100 != 2 || !bytes.Equal(body, v1[:last+1]) {
				t.Fatalf("first read = %d, %d bytes", resp.StatusCode, len(body))
			}
			etag := resp.Header.Get("Etag")
			o.replace(t, "f", v2)

			resp, body = get(t, n.URL+"/f", tc.hdr...)
			if resp.Header.Get("Etag") != etag {
				t.Fatalf("ETag %s, was %s: the test does not test a replacement under the same validators", resp.Header.Get("Etag"), etag)
			}
			if resp.StatusCode != 200 || !bytes.Equal(body, v2) {
				t.Fatalf("whole GET after the replacement = %d, %d bytes: %s; want the new file whole",
					resp.StatusCode, len(body), which(body, v1, v2))
			}
			resp, body = get(t, n.URL+"/f")
			if resp.StatusCode != 200 || !bytes.Equal(body, v2) {
				t.Fatalf("GET again = %d: %s; want the new file, as cached", resp.StatusCode, which(body, v1, v2))
			}
			// RFC 9110 §13.1.5: If-Range needs a strong validator; the
			// cache's are the origin's, weak: the whole file.
			if resp, body := get(t, n.URL+"/f", "If-Range", etag, "Range", "bytes=0-9"); resp.StatusCode != 200 || !bytes.Equal(body, v2) {
				t.Fatalf("If-Range with the weak ETag = %d, %d bytes; want 200 and the whole file", resp.StatusCode, len(body))
			}
		})
	}
}

// which says what body is made of, block by block: "old", "new", or a
// splice of them.
func which(body, v1, v2 []byte) string {
	switch {
	case bytes.Equal(body, v1):
		return "the old file"
	case bytes.Equal(body, v2):
		return "the new file"
	case len(body) != len(v1):
		return fmt.Sprintf("%d bytes", len(body))
	}
	s := ""
	for i := 0; i < len(body); i += block {
		e := min(i+block, len(body))
		switch {
		case bytes.Equal(body[i:e], v1[i:e]):
			s += "o"
		case bytes.Equal(body[i:e], v2[i:e]):
			s += "n"
		default:
			s += "?"
		}
	}
	return "spliced, block by block (o: old, n: new): " + s
}

// swapOrigin is an origin with weak validators whose one file becomes
// other bytes, under the same size, time and ETag, from the first Open
// at offset swapOff on (-1: never).
type swapOrigin struct {
	mu      sync.Mutex
	v1, v2  []byte
	swapOff int64
	swapped bool
}

var _ endpoint.Endpoint = (*swapOrigin)(nil)

func (o *swapOrigin) info() endpoint.Info {
	return endpoint.Info{Name: "f", Size: int64(len(o.v1)), ModTime: time.Unix(1700000000, 0), ETag: "5f5e100-100000"}
}

func (o *swapOrigin) Name() string { return "swap" }

func (o *swapOrigin) Stat(context.Context, string) (endpoint.Info, error) { return o.info(), nil }

func (o *swapOrigin) List(context.Context, string) ([]endpoint.Info, error) {
	return []endpoint.Info{o.info()}, nil
}

func (o *swapOrigin) Open(_ context.Context, _ string, off, n int64) (io.ReadCloser, error) {
	o.mu.Lock()
	o.swapped = o.swapped || off == o.swapOff
	data := o.v1
	if o.swapped {
		data = o.v2
	}
	o.mu.Unlock()
	if n < 0 || off+n > int64(len(data)) {
		n = int64(len(data)) - off
	}
	return swapReader{io.NopCloser(bytes.NewReader(data[off : off+n])), o.info()}, nil
}

func (o *swapOrigin) Put(context.Context, string, io.Reader, int64) error {
	return endpoint.ErrUnsupported
}
func (o *swapOrigin) Delete(context.Context, string) error { return endpoint.ErrUnsupported }
func (o *swapOrigin) Mkdir(context.Context, string) error  { return endpoint.ErrUnsupported }
func (o *swapOrigin) Probe(context.Context) error          { return nil }

// swapReader says it reads the one version the origin has ever named.
type swapReader struct {
	io.ReadCloser
	ver endpoint.Info
}

func (r swapReader) Version() endpoint.Info { return r.ver }

// The file changes at the origin after the cache proved, before the
// status, that the blocks on disk are still its bytes, and before the
// fill of the rest: the fill proves its own read before any of its blocks
// joins them, finds the change, and the answer breaks with a prefix of
// the old file, never old bytes joined to new ones. The next GET is the
// new file whole.
func TestWeakOriginFillProved(t *testing.T) {
	o := &swapOrigin{v1: random(16*block, 53), v2: random(16*block, 54), swapOff: -1}
	n := startCache(t, cache.Config{BlockSize: block, RAM: -1, PrefetchBlocks: -1}, o)
	resp, body := get(t, n.URL+"/f", "Range", fmt.Sprintf("bytes=0-%d", 4*block-1))
	if resp.StatusCode != 206 || !bytes.Equal(body, o.v1[:4*block]) {
		t.Fatalf("first range = %d, %d bytes", resp.StatusCode, len(body))
	}
	o.mu.Lock()
	// The fill of the rest (from block 4 on) reads the new file; the
	// proof before the status (block 3) still read the old.
	o.swapOff = 4 * block
	o.mu.Unlock()
	r, err := http.Get(n.URL + "/f")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != 200 || !bytes.Equal(got, o.v1[:min(len(got), len(o.v1))]) {
		t.Fatalf("GET = %d, %s; want a prefix of the old file", r.StatusCode, which(got, o.v1, o.v2))
	}
	if err == nil {
		t.Fatalf("GET read %d bytes without error; want a broken answer", len(got))
	}
	resp, body = get(t, n.URL+"/f")
	if resp.StatusCode != 200 || !bytes.Equal(body, o.v2) {
		t.Fatalf("GET again = %d, %s; want the new file", resp.StatusCode, which(body, o.v1, o.v2))
	}
}
