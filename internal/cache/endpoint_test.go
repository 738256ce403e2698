package cache_test

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/lakefed/lakefed/internal/cache"
	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/httpx"
)

// The cache as an endpoint (for the root:// door) reads through the
// blocks with the same checks, and says which version it reads.
func TestEndpointReads(t *testing.T) {
	o := startOrigin(t)
	data := random(5*block+77, 41)
	o.write(t, "d/f", data)
	n := startCache(t, cache.Config{BlockSize: block}, o.ep)
	ep := n.Endpoint()
	in, err := ep.Stat(t.Context(), "/d/f")
	if err != nil || in.Size != int64(len(data)) || in.IsDir {
		t.Fatalf("Stat = %+v, %v", in, err)
	}
	for _, rg := range [][2]int64{{0, -1}, {100, 1000}, {block - 5, 10}, {int64(len(data)) - 3, 3}, {int64(len(data)), -1}} {
		rc, err := ep.Open(t.Context(), "/d/f", rg[0], rg[1])
		if err != nil {
			t.Fatalf("Open %v: %v", rg, err)
		}
		if v, ok := endpoint.VersionOf(rc); !ok || v.Size != int64(len(data)) {
			t.Errorf("Version = %+v, %v", v, ok)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		end := int64(len(data))
		if rg[1] >= 0 {
			end = rg[0] + rg[1]
		}
		if err != nil || !bytes.Equal(got, data[rg[0]:end]) {
			t.Errorf("read %v: %d bytes, err %v", rg, len(got), err)
		}
	}
	if sum, err := ep.Checksum(t.Context(), "/d/f", httpx.Adler32); err != nil || sum != httpx.Adler32Of(data) {
		t.Errorf("Checksum = %q, %v; want %s", sum, err, httpx.Adler32Of(data))
	}
	if _, err := ep.Open(t.Context(), "/d/missing", 0, -1); !errors.Is(err, endpoint.ErrNotFound) {
		t.Errorf("Open(missing) = %v, want ErrNotFound", err)
	}
	if in, err := ep.Stat(t.Context(), "/d"); err != nil || !in.IsDir {
		t.Errorf("Stat(dir) = %+v, %v", in, err)
	}
	if st := n.Status(); st.Usage.Files != 1 {
		t.Errorf("files cached = %d, want 1 (no entries kept for a directory or a missing path)", st.Usage.Files)
	}
}
