package http_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/httpx"
	"github.com/lakefed/lakefed/internal/storage"
	"github.com/lakefed/lakefed/internal/storage/storagetest"
	"github.com/lakefed/lakefed/internal/testenv"
)

// TestValidatorStrength: the kind calls a server's versions strong only
// when they are. A file is replaced by one of the same size with its
// modification time kept (cp -p): nginx's ETag stays the same, so the
// kind must call it weak; the storage role's changes, and it is strong.
func TestValidatorStrength(t *testing.T) {
	site := storagetest.Start(t, storage.Config{})
	ng := testenv.StartNginx(t)
	for _, srv := range []struct {
		name, url, dir string
		strong         bool
	}{
		{"storage role", site.URL, site.Dir, true},
		{"nginx", ng.URL, ng.Dir, false},
	} {
		t.Run(srv.name, func(t *testing.T) {
			ep := newEP(t, endpoint.Config{URL: srv.url})
			if v := ep.Validators(); v != endpoint.ValidatorsUnknown {
				t.Errorf("Validators before any answer = %q", v)
			}
			p := filepath.Join(srv.dir, "f")
			mtime := time.Now().Add(-time.Hour).Truncate(time.Second)
			write := func(data []byte) {
				tmp := p + ".tmp"
				if err := os.WriteFile(tmp, data, 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Chtimes(tmp, mtime, mtime); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(tmp, p); err != nil {
					t.Fatal(err)
				}
			}
			write(bytes.Repeat([]byte("a"), 1000))
			before, err := ep.Stat(t.Context(), "/f")
			if err != nil {
				t.Fatal(err)
			}
			write(bytes.Repeat([]byte("b"), 1000))
			after, err := ep.Stat(t.Context(), "/f")
			if err != nil {
				t.Fatal(err)
			}
			if before.Strong != srv.strong || after.Strong != srv.strong {
				t.Errorf("Stat: Strong %v, %v; want %v", before.Strong, after.Strong, srv.strong)
			}
			// Strong must be true only where the versions tell the files
			// apart: the claim the kind makes is tested, not assumed.
			if same := endpoint.SameVersion(before, after); same == srv.strong {
				t.Errorf("SameVersion of the two files = %v (ETags %q, %q) for validators called strong=%v",
					same, before.ETag, after.ETag, srv.strong)
			}
			rc, err := ep.Open(t.Context(), "/f", 10, 20)
			if err != nil {
				t.Fatal(err)
			}
			ver, ok := endpoint.VersionOf(rc)
			rc.Close()
			if !ok || ver.Strong != srv.strong || endpoint.SameBytes(after, ver) != srv.strong {
				t.Errorf("Open: Version %+v (ok %v): Strong %v, SameBytes %v; want %v",
					ver, ok, ver.Strong, endpoint.SameBytes(after, ver), srv.strong)
			}
			want := endpoint.ValidatorsWeak
			if srv.strong {
				want = endpoint.ValidatorsStrong
			}
			if v := ep.Validators(); v != want {
				t.Errorf("Validators = %q, want %q", v, want)
			}
		})
	}
}

// A W/ tag is weak whoever sends it.
func TestWeakTagIsWeak(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Server", httpx.StorageServer)
		w.Header().Set("Etag", `W/"abc"`)
		w.Header().Set("Last-Modified", time.Unix(1700000000, 0).UTC().Format(http.TimeFormat))
		w.Header().Set("Content-Length", "3")
		io.WriteString(w, "abc")
	}))
	defer ts.Close()
	ep := newEP(t, endpoint.Config{URL: ts.URL + "/"})
	in, err := ep.Stat(t.Context(), "/f")
	if err != nil {
		t.Fatal(err)
	}
	if in.Strong || in.ETag != "abc" {
		t.Errorf("Stat of a W/ tag: ETag %q, Strong %v; want abc, weak", in.ETag, in.Strong)
	}
}
