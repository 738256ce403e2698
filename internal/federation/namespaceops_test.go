package federation

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/lakefed/lakefed/internal/config"
	"github.com/lakefed/lakefed/internal/endpoint"
)

// hookFed is a federation whose write hook (Options.OnWrite) records
// the paths it is told.
type hookFed struct {
	*testFed
	mu    sync.Mutex
	wrote []string
}

func (h *hookFed) told() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.wrote)
}

func startHookFed(t *testing.T, yamlText string, fakes ...*fakeEP) *hookFed {
	t.Helper()
	cfg, err := config.Parse([]byte(yamlText))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	byName := map[string]*fakeEP{}
	for _, f := range fakes {
		byName[f.name] = f
	}
	h := &hookFed{}
	newEP := func(ctx context.Context, ec config.Endpoint, log *slog.Logger) (endpoint.Endpoint, error) {
		if f, ok := byName[ec.Name]; ok {
			return f.asEndpoint(), nil
		}
		return DefaultNewEndpoint(ctx, ec, log)
	}
	onWrite := func(p string) {
		h.mu.Lock()
		h.wrote = append(h.wrote, p)
		h.mu.Unlock()
	}
	fed, err := New(t.Context(), *cfg.Federation, Options{Log: quiet(), NewEndpoint: newEP, OnWrite: onWrite})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	srv := httptest.NewServer(fed.Handler())
	t.Cleanup(func() {
		srv.Close()
		fed.Close()
	})
	h.testFed = &testFed{Federator: fed, srv: srv, fakes: byName}
	return h
}

// disk is a posix endpoint's config lines over a fresh directory.
func disk(t *testing.T, name string, extra ...string) (string, string) {
	dir := t.TempDir()
	return dir, "name: " + name + "\nurl: file://" + dir + "\nwritable: true\n" + strings.Join(extra, "\n")
}

func writeFile(t *testing.T, dir, p, body string) {
	t.Helper()
	full := filepath.Join(dir, filepath.FromSlash(p))
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(dir, p string) string {
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

func exists(dir, p string) bool {
	_, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(p)))
	return err == nil
}

// A move renames on the one endpoint that holds the path, and tells the
// write hook every path it changed: for a directory, every path below
// it under both names.
func TestMove(t *testing.T) {
	dirA, a := disk(t, "a", "priority: 1")
	dirB, b := disk(t, "b", "priority: 2")
	tf := startHookFed(t, cfgYAML(slowHealth, a, b))
	writeFile(t, dirA, "/x", "x on a")
	writeFile(t, dirA, "/d/e/f", "f on a")
	ctx := t.Context()

	created, err := tf.Move(ctx, "/x", "/new/y", WriteOptions{})
	if err != nil || !created {
		t.Fatalf("Move(/x, /new/y) = %v, %v; want created", created, err)
	}
	if exists(dirA, "/x") || readFile(dirA, "/new/y") != "x on a" || exists(dirB, "/new/y") {
		t.Errorf("after the move: a/x %v, a/new/y %q, b/new/y %v; want only a/new/y", exists(dirA, "/x"), readFile(dirA, "/new/y"), exists(dirB, "/new/y"))
	}
	if got := tf.told(); !slices.Contains(got, "/x") || !slices.Contains(got, "/new/y") {
		t.Errorf("write hook told %q, want /x and /new/y", got)
	}

	if _, err := tf.Move(ctx, "/d", "/d2", WriteOptions{}); err != nil {
		t.Fatalf("Move(/d, /d2) = %v", err)
	}
	if readFile(dirA, "/d2/e/f") != "f on a" || exists(dirA, "/d") {
		t.Errorf("after the directory move: a/d2/e/f %q, a/d %v", readFile(dirA, "/d2/e/f"), exists(dirA, "/d"))
	}
	for _, p := range []string{"/d", "/d2", "/d/e", "/d/e/f", "/d2/e", "/d2/e/f"} {
		if !slices.Contains(tf.told(), p) {
			t.Errorf("write hook not told %s after the directory move: %q", p, tf.told())
		}
	}

	// Onto a file of the same endpoint: replaced.
	writeFile(t, dirA, "/z", "old z")
	if created, err := tf.Move(ctx, "/new/y", "/z", WriteOptions{}); err != nil || created {
		t.Errorf("Move over a file = %v, %v; want replaced (created false)", created, err)
	}
	if readFile(dirA, "/z") != "x on a" {
		t.Errorf("a/z after the move over it: %q", readFile(dirA, "/z"))
	}
	// Overwrite: F (If-None-Match: *) keeps it.
	writeFile(t, dirA, "/w", "w")
	_, err = tf.Move(ctx, "/w", "/z", WriteOptions{Cond: http.Header{"If-None-Match": {"*"}}})
	if err == nil || readFile(dirA, "/z") != "x on a" || readFile(dirA, "/w") != "w" {
		t.Errorf("Move with If-None-Match: * over a file = %v; a/z %q, a/w %q", err, readFile(dirA, "/z"), readFile(dirA, "/w"))
	}
	// On the endpoint of lower priority: priority places new files, it
	// does not keep a renamed one from staying where it is.
	writeFile(t, dirB, "/onb", "on b")
	if _, err := tf.Move(ctx, "/onb", "/onb2", WriteOptions{}); err != nil || readFile(dirB, "/onb2") != "on b" || exists(dirA, "/onb2") {
		t.Errorf("Move on the second endpoint = %v; b/onb2 %q, a/onb2 %v", err, readFile(dirB, "/onb2"), exists(dirA, "/onb2"))
	}
	_, err = tf.Move(ctx, "/missing", "/m2", WriteOptions{})
	if !errors.Is(err, endpoint.ErrNotFound) {
		t.Errorf("Move(missing) = %v, want ErrNotFound", err)
	}
}

// A move that cannot be one step on one endpoint is refused before
// anything changes, and says why.
func TestMoveRefused(t *testing.T) {
	dirA, a := disk(t, "a", "priority: 1")
	dirB, b := disk(t, "b", "priority: 2")
	dirS, s := disk(t, "scratch", "prefix: /scratch", "path: /")
	ro := newFake("ro", false)
	ro.put("/ro/f", []byte("read-only"))
	nr := newFake("norename", false)
	nr.put("/nr/f", []byte("cannot rename"))
	tf := startHookFed(t, cfgYAML(slowHealth, a, b, s,
		"name: ro\nurl: http://ro.example/\nprefix: /ro\npath: /ro",
		"name: norename\nurl: http://nr.example/\nprefix: /nr\npath: /nr\nwritable: true"), ro, nr)
	writeFile(t, dirA, "/both", "a copy")
	writeFile(t, dirB, "/both", "b copy")
	writeFile(t, dirA, "/x", "x")
	writeFile(t, dirB, "/taken", "b's")
	ctx := t.Context()

	for _, c := range []struct {
		name, from, to string
		class          error
		why            string
	}{
		{"replicas on two endpoints", "/both", "/both2", endpoint.ErrUnsupported, "all-or-nothing"},
		{"placement on another endpoint", "/x", "/scratch/x", endpoint.ErrUnsupported, "belongs on scratch"},
		{"destination held elsewhere", "/x", "/taken", endpoint.ErrUnsupported, "held by b too"},
		{"kind without rename", "/nr/f", "/nr/g", endpoint.ErrUnsupported, "cannot rename"},
		{"read-only endpoint", "/ro/f", "/ro/g", endpoint.ErrRefused, "read-only"},
		{"into itself", "/x", "/x/y", endpoint.ErrRefused, "inside the source"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := tf.Move(ctx, c.from, c.to, WriteOptions{})
			if !errors.Is(err, c.class) || !strings.Contains(err.Error(), c.why) || !strings.Contains(err.Error(), "nothing was moved") {
				t.Errorf("Move(%s, %s) = %v; want %v saying %q and that nothing was moved", c.from, c.to, err, c.class, c.why)
			}
		})
	}
	if readFile(dirA, "/both") != "a copy" || readFile(dirB, "/both") != "b copy" || exists(dirA, "/both2") || exists(dirB, "/both2") {
		t.Errorf("a refused move changed the replicas")
	}
	if readFile(dirA, "/x") != "x" || exists(dirS, "/x") || readFile(dirB, "/taken") != "b's" || exists(dirA, "/taken") {
		t.Errorf("a refused move changed a file")
	}
	if _, err := nr.Stat(ctx, "/nr/f"); err != nil {
		t.Errorf("norename's file after the refused move: %v", err)
	}

	// An endpoint that could hold a copy does not answer: 503, nothing
	// moved.
	dn := newFake("down", false)
	tf2 := startHookFed(t, cfgYAML(slowHealth, a, "name: down\nurl: http://down.example/\nwritable: true"), dn)
	dn.down.Store(true)
	_, err := tf2.Move(ctx, "/x", "/x3", WriteOptions{})
	if !errors.Is(err, endpoint.ErrUnavailable) || readFile(dirA, "/x") != "x" || exists(dirA, "/x3") {
		t.Errorf("Move with an endpoint down = %v; a/x %q; want ErrUnavailable and nothing moved", err, readFile(dirA, "/x"))
	}
}

// rmdir is refused while the directory has entries on any endpoint, and
// then removed on none; once empty everywhere it goes everywhere.
func TestRmdir(t *testing.T) {
	dirA, a := disk(t, "a", "priority: 1")
	dirB, b := disk(t, "b", "priority: 2")
	tf := startHookFed(t, cfgYAML(slowHealth, a, b))
	if err := os.MkdirAll(filepath.Join(dirA, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dirB, "/d/f", "f")
	writeFile(t, dirA, "/file", "not a dir")
	ctx := t.Context()
	err := tf.Rmdir(ctx, "/d", WriteOptions{})
	if !errors.Is(err, endpoint.ErrNotEmpty) || !exists(dirA, "/d") || !exists(dirB, "/d/f") {
		t.Fatalf("Rmdir(/d) empty on a, not on b = %v; a/d %v, b/d/f %v; want ErrNotEmpty and nothing removed", err, exists(dirA, "/d"), exists(dirB, "/d/f"))
	}
	if err := tf.Rmdir(ctx, "/file", WriteOptions{}); !errors.Is(err, endpoint.ErrRefused) || errors.Is(err, endpoint.ErrNotEmpty) {
		t.Errorf("Rmdir(file) = %v, want a refusal", err)
	}
	if err := tf.Rmdir(ctx, "/nothing", WriteOptions{}); !errors.Is(err, endpoint.ErrNotFound) {
		t.Errorf("Rmdir(missing) = %v, want ErrNotFound", err)
	}
	os.Remove(filepath.Join(dirB, "d", "f"))
	if err := tf.Rmdir(ctx, "/d", WriteOptions{}); err != nil {
		t.Fatalf("Rmdir(/d) empty everywhere = %v", err)
	}
	if exists(dirA, "/d") || exists(dirB, "/d") {
		t.Errorf("after rmdir: a/d %v, b/d %v", exists(dirA, "/d"), exists(dirB, "/d"))
	}
	if !slices.Contains(tf.told(), "/d") {
		t.Errorf("write hook not told /d: %q", tf.told())
	}
}

// truncate and chmod change a file in place on its endpoint; a truncate
// of a file on two endpoints is refused (it cannot be all-or-nothing).
func TestTruncateChmod(t *testing.T) {
	dirA, a := disk(t, "a", "priority: 1")
	dirB, b := disk(t, "b", "priority: 2")
	tf := startHookFed(t, cfgYAML(slowHealth, a, b))
	writeFile(t, dirA, "/f", "0123456789")
	writeFile(t, dirA, "/both", "0123456789")
	writeFile(t, dirB, "/both", "0123456789")
	ctx := t.Context()
	if err := tf.Truncate(ctx, "/f", 4, WriteOptions{}); err != nil || readFile(dirA, "/f") != "0123" {
		t.Errorf("Truncate(/f, 4) = %v; a/f %q", err, readFile(dirA, "/f"))
	}
	err := tf.Truncate(ctx, "/both", 4, WriteOptions{})
	if !errors.Is(err, endpoint.ErrUnsupported) || readFile(dirA, "/both") != "0123456789" || readFile(dirB, "/both") != "0123456789" {
		t.Errorf("Truncate(/both) = %v; want refused, both untouched", err)
	}
	if err := tf.Chmod(ctx, "/both", 0o600, WriteOptions{}); err != nil {
		t.Fatalf("Chmod(/both) = %v", err)
	}
	for _, dir := range []string{dirA, dirB} {
		if fi, err := os.Stat(filepath.Join(dir, "both")); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("mode of %s/both after chmod: %v, %v", dir, fi.Mode(), err)
		}
	}
	sp, err := tf.Space(ctx, "/")
	if err != nil || sp.Total <= 0 || sp.Free > sp.Total {
		t.Errorf("Space(/) = %+v, %v", sp, err)
	}
	locs, err := tf.locations(ctx, "/both")
	if err != nil || len(locs) != 2 || !locs[0].Writable || !strings.HasPrefix(locs[0].URL.String(), "file://") {
		t.Errorf("locations(/both) = %+v, %v; want two writable file:// locations", locs, err)
	}
}

// MOVE over HTTP is the same function: 201 for a new name, 412 with
// Overwrite: F over a file, 502 for another server.
func TestHTTPMove(t *testing.T) {
	dirA, a := disk(t, "a")
	tf := startHookFed(t, cfgYAML(slowHealth, a))
	writeFile(t, dirA, "/src", "s")
	writeFile(t, dirA, "/other", "o")
	resp, body := tf.do(t, "MOVE", "/src", http.Header{"Destination": {tf.srv.URL + "/dst"}}, nil)
	if resp.StatusCode != http.StatusCreated || readFile(dirA, "/dst") != "s" || exists(dirA, "/src") {
		t.Errorf("MOVE /src → /dst = %d %s; a/dst %q", resp.StatusCode, body, readFile(dirA, "/dst"))
	}
	resp, body = tf.do(t, "MOVE", "/other", http.Header{"Destination": {"/dst"}, "Overwrite": {"F"}}, nil)
	if resp.StatusCode != http.StatusPreconditionFailed || readFile(dirA, "/dst") != "s" {
		t.Errorf("MOVE with Overwrite: F over a file = %d %s, want 412", resp.StatusCode, body)
	}
	resp, body = tf.do(t, "MOVE", "/other", http.Header{"Destination": {"http://elsewhere.example/x"}}, nil)
	if resp.StatusCode != http.StatusBadGateway || readFile(dirA, "/other") != "o" {
		t.Errorf("MOVE to another server = %d %s, want 502", resp.StatusCode, body)
	}
	resp, body = tf.do(t, "MOVE", "/other", http.Header{"Destination": {"/dst"}}, nil)
	if resp.StatusCode != http.StatusNoContent || readFile(dirA, "/dst") != "o" {
		t.Errorf("MOVE over a file = %d %s, want 204", resp.StatusCode, body)
	}
}
