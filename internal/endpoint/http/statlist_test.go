package http_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/lakefed/lakefed/internal/endpoint"
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
