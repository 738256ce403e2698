package http_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/httpx"
	"github.com/lakefed/lakefed/internal/storage"
	"github.com/lakefed/lakefed/internal/storage/storagetest"
	"github.com/lakefed/lakefed/internal/testenv"
)

// TestStatListIsStat: what StatList says of each file of a storage
// role's directory is exactly what Stat says of it (the promise that
// lets the federator answer look-ups from a listing), every other entry
// is unsure, and nginx, whose PROPFIND has no ETag, is refused.
func TestStatListIsStat(t *testing.T) {
	site := storagetest.Start(t, storage.Config{})
	ng := testenv.StartNginx(t)
	files := map[string]string{
		"d/a.root":      "aaaa",
		"d/empty":       "",
		"d/page.html":   "<html></html>",
		"d/with space":  "x",
		"d/100%.txt":    "y",
		"d/sub/deeper":  "z",
		"d/big.bin":     string(make([]byte, 70000)),
		"d/sub2/.keep":  "",
		"other/outside": "o",
	}
	for _, dir := range []string{site.Dir, ng.Dir} {
		for name, data := range files {
			p := filepath.Join(dir, filepath.FromSlash(name))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}

	ep := newEP(t, endpoint.Config{URL: site.URL})
	got, unsure, err := ep.StatList(t.Context(), "/d", 100)
	if err != nil {
		t.Fatalf("StatList(/d) = %v", err)
	}
	var names []string
	for _, in := range got {
		names = append(names, in.Name)
		want, err := ep.Stat(t.Context(), "/d/"+in.Name)
		if err != nil {
			t.Fatalf("Stat(/d/%s) = %v", in.Name, err)
		}
		if !reflect.DeepEqual(in, want) {
			t.Errorf("StatList entry %q = %+v, Stat says %+v", in.Name, in, want)
		}
	}
	slices.Sort(names)
	if want := []string{"100%.txt", "a.root", "big.bin", "empty", "page.html", "with space"}; !slices.Equal(names, want) {
		t.Errorf("StatList(/d) files = %q, want %q", names, want)
	}
	slices.Sort(unsure)
	if want := []string{"sub", "sub2"}; !slices.Equal(unsure, want) {
		t.Errorf("StatList(/d) unsure = %q, want %q", unsure, want)
	}
	if _, _, err := ep.StatList(t.Context(), "/nothing", 100); !errors.Is(err, endpoint.ErrNotFound) {
		t.Errorf("StatList(/nothing) = %v, want ErrNotFound", err)
	}
	if _, _, err := ep.StatList(t.Context(), "/d", 7); !errors.Is(err, endpoint.ErrTooLarge) {
		t.Errorf("StatList(/d) of 8 entries with limit 7 = %v, want ErrTooLarge", err)
	}
	if _, _, err := ep.StatList(t.Context(), "/d", 8); err != nil {
		t.Errorf("StatList(/d) of 8 entries with limit 8 = %v", err)
	}

	nep := newEP(t, endpoint.Config{URL: ng.URL})
	if _, _, err := nep.StatList(t.Context(), "/d", 100); !errors.Is(err, endpoint.ErrUnsupported) {
		t.Errorf("StatList on nginx = %v, want ErrUnsupported", err)
	}
}

// TestStatListRefusedIsUnsure: a member the storage role's HEAD refuses
// (a symlink leading outside its root: 403) is neither a file of the
// listing nor missing from it, but unsure, so that its Stat (the HEAD)
// gives the answer, as it would without a listing.
func TestStatListRefusedIsUnsure(t *testing.T) {
	site := storagetest.Start(t, storage.Config{})
	if err := os.MkdirAll(filepath.Join(site.Dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(site.Dir, "d", "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(t.TempDir(), filepath.Join(site.Dir, "d", "out")); err != nil {
		t.Fatal(err)
	}
	ep := newEP(t, endpoint.Config{URL: site.URL})
	files, unsure, err := ep.StatList(t.Context(), "/d", 100)
	if err != nil {
		t.Fatalf("StatList(/d) = %v", err)
	}
	if len(files) != 1 || files[0].Name != "f" || !slices.Equal(unsure, []string{"out"}) {
		t.Errorf("StatList(/d) = %v, unsure %q; want f, unsure [out]", files, unsure)
	}
	if _, err := ep.Stat(t.Context(), "/d/out"); err == nil || errors.Is(err, endpoint.ErrNotFound) {
		t.Errorf("Stat(/d/out) = %v, want a refusal (not found would differ from its HEAD)", err)
	}
}

// TestStatListNeedsListedAsHead: a storage role's listing that does not
// say its members are what their HEAD says (an older storage role, or
// one behind rules it does not know) is not taken for Stats.
func TestStatListNeedsListedAsHead(t *testing.T) {
	site := storagetest.Start(t, storage.Config{})
	if err := os.MkdirAll(filepath.Join(site.Dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	target, err := url.Parse(site.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(r *http.Response) error {
		r.Header.Del(httpx.ListedAsHeadHeader)
		return nil
	}
	old := httptest.NewServer(proxy)
	t.Cleanup(old.Close)
	ep := newEP(t, endpoint.Config{URL: old.URL})
	if _, _, err := ep.StatList(t.Context(), "/d", 100); !errors.Is(err, endpoint.ErrUnsupported) {
		t.Errorf("StatList without %s = %v, want ErrUnsupported", httpx.ListedAsHeadHeader, err)
	}
	if _, _, err := newEP(t, endpoint.Config{URL: site.URL}).StatList(t.Context(), "/d", 100); err != nil {
		t.Errorf("StatList of the storage role itself = %v, want nil", err)
	}
}
