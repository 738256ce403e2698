package buffer

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/testenv"
)

// committer is a target that takes a Put's whole body, says so on got,
// and commits only when commit is closed, whatever happened to the
// caller meanwhile: a server that has the body keeps it. It is not a
// ConditionalPutter, so the buffer's copies to it are unconditional.
type committer struct {
	endpoint.Endpoint
	got    chan string
	commit chan struct{}
	done   chan error // each commit's outcome, when set
}

func (c *committer) Put(ctx context.Context, p string, r io.Reader, size int64) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	select {
	case c.got <- string(data):
	default:
	}
	<-c.commit
	err = c.Endpoint.Put(context.WithoutCancel(ctx), p, bytes.NewReader(data), size)
	if c.done != nil {
		c.done <- err
	}
	return err
}

// deleter stands for the federator behind the buffer: a DELETE deletes
// on ep (204, or 404 when nothing is there).
func deleter(ep endpoint.Endpoint) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodDelete {
			http.NotFound(w, r)
			return
		}
		switch err := ep.Delete(r.Context(), r.URL.Path); {
		case err == nil:
			w.WriteHeader(http.StatusNoContent)
		case errors.Is(err, endpoint.ErrNotFound):
			http.NotFound(w, r)
		default:
			http.Error(w, err.Error(), endpoint.HTTPStatus(err))
		}
	})
}

func del(t *testing.T, url string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodDelete, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("DELETE %s: %v", url, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestDeleteDuringCommit: a DELETE answered while the mover's copy of
// the file has reached the target whole but is not committed yet is not
// undone when the target commits: the buffer waits for that copy's
// answer, then carries the delete to the target. Version 0 was migrated
// first; the DELETE reaches the target (through the federator) inside
// the window, as it would 1–5 ms before a real target's rename.
func TestDeleteDuringCommit(t *testing.T) {
	disk, dir := newPosix(t, "disk")
	c := &committer{Endpoint: disk, got: make(chan string, 1), commit: make(chan struct{})}
	b, srv := start(t, fastRetry(Config{Prefixes: []Prefix{{Prefix: "/", Targets: []endpoint.Endpoint{c}}}}), deleter(disk), Options{})
	close(c.commit) // version 0 goes through
	put(t, srv.URL+"/f", []byte("version 0"))
	<-c.got
	testenv.Eventually(t, 10*time.Second, "version 0 not migrated", func() bool { return b.Status().PendingFiles == 0 })

	c.commit, c.done = make(chan struct{}), make(chan error, 1)
	if resp := put(t, srv.URL+"/f", []byte("version 1")); resp.StatusCode/100 != 2 {
		t.Fatalf("PUT version 1 = %d", resp.StatusCode)
	}
	if got := <-c.got; got != "version 1" {
		t.Fatalf("the target got %q, want version 1", got)
	}
	if code := del(t, srv.URL+"/f"); code != http.StatusNoContent {
		t.Fatalf("DELETE while the copy awaits its commit = %d, want 204", code)
	}
	if resp, _ := get(t, srv.URL+"/f"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET after the DELETE = %d, want 404", resp.StatusCode)
	}
	close(c.commit)
	if err := <-c.done; err != nil {
		t.Fatalf("the target's late commit: %v", err)
	}
	testenv.Eventually(t, 10*time.Second, "after a DELETE answered 204 the target holds the file again: the late commit undid it", func() bool {
		_, err := os.Stat(filepath.Join(dir, "f"))
		st := b.Status()
		return os.IsNotExist(err) && st.PendingDeletes == 0 && st.PendingFiles == 0
	})
	if resp, _ := get(t, srv.URL+"/f"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET once settled = %d, want 404", resp.StatusCode)
	}
}

// TestDeleteWhileTargetDown: a DELETE the federator cannot carry out
// (the target is down) is journaled and answered 202; reads say 404 at
// once, the delete survives a restart, and it reaches the target when it
// is back. The version written while the target was down never lands.
func TestDeleteWhileTargetDown(t *testing.T) {
	disk, dir := newPosix(t, "disk")
	f := &fake{Endpoint: disk}
	cfg := fastRetry(Config{Dir: t.TempDir(), Prefixes: []Prefix{{Prefix: "/", Targets: []endpoint.Endpoint{f}}}})
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f.down.Load() {
			http.Error(w, "site down", http.StatusServiceUnavailable)
			return
		}
		deleter(disk).ServeHTTP(w, r)
	})
	b, srv := start(t, cfg, next, Options{})
	put(t, srv.URL+"/f", []byte("version 0"))
	testenv.Eventually(t, 10*time.Second, "version 0 not migrated", func() bool { return b.Status().PendingFiles == 0 })
	f.down.Store(true)
	if resp := put(t, srv.URL+"/f", []byte("version 1")); resp.StatusCode/100 != 2 {
		t.Fatalf("PUT version 1 = %d", resp.StatusCode)
	}
	if code := del(t, srv.URL+"/f"); code != http.StatusAccepted {
		t.Fatalf("DELETE while the target is down = %d, want 202", code)
	}
	if resp, _ := get(t, srv.URL+"/f"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET after the DELETE = %d, want 404", resp.StatusCode)
	}
	if code := del(t, srv.URL+"/f"); code != http.StatusNotFound {
		t.Errorf("a second DELETE = %d, want 404", code)
	}
	if st := b.Status(); st.PendingDeletes != 1 || st.HeldFiles != 0 {
		t.Fatalf("Status after the DELETE = %+v, want one pending delete and no file", st)
	}

	// A restart keeps the pending delete.
	srv.Close()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b2, srv2 := start(t, cfg, next, Options{})
	if st := b2.Status(); st.PendingDeletes != 1 {
		t.Fatalf("Status after a restart = %+v, want the pending delete", st)
	}
	if resp, _ := get(t, srv2.URL+"/f"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET after a restart = %d, want 404", resp.StatusCode)
	}
	f.down.Store(false)
	testenv.Eventually(t, 10*time.Second, "the delete did not reach the target", func() bool {
		_, err := os.Stat(filepath.Join(dir, "f"))
		return os.IsNotExist(err) && b2.Status().PendingDeletes == 0
	})
	if st := b2.Status(); st.PendingFiles != 0 || len(st.Failures) != 0 {
		t.Errorf("Status once settled = %+v", st)
	}
}

// TestOverlayDelete: Delete through the Overlay (the root:// door's and
// the cache's writes) of a file the buffer holds (migrated and kept) is
// the same journaled delete.
func TestOverlayDelete(t *testing.T) {
	ctx := context.Background()
	disk, dir := newPosix(t, "disk")
	f := &fake{Endpoint: disk}
	b, _ := start(t, fastRetry(Config{KeepAfterMigration: time.Hour, Prefixes: []Prefix{{Prefix: "/buf", Targets: []endpoint.Endpoint{f}}}}), nil, Options{})
	ov := b.Overlay(f)
	if err := ov.Put(ctx, "/buf/f", bytes.NewReader([]byte("x")), 1); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "not migrated", func() bool { return b.Status().PendingFiles == 0 })
	f.down.Store(true)
	if err := ov.Delete(ctx, "/buf/f"); err != nil {
		t.Fatalf("Delete while the target is down = %v, want nil (journaled)", err)
	}
	if _, err := ov.Stat(ctx, "/buf/f"); !errors.Is(err, endpoint.ErrNotFound) {
		t.Errorf("Stat after Delete = %v, want ErrNotFound", err)
	}
	if items, err := ov.List(ctx, "/buf"); err != nil || len(items) != 0 {
		t.Errorf("List after Delete = %+v, %v; want nothing", items, err)
	}
	if err := ov.Delete(ctx, "/buf/f"); !errors.Is(err, endpoint.ErrNotFound) {
		t.Errorf("second Delete = %v, want ErrNotFound", err)
	}
	f.down.Store(false)
	testenv.Eventually(t, 10*time.Second, "the delete did not reach the target", func() bool {
		_, err := os.Stat(filepath.Join(dir, "buf", "f"))
		return os.IsNotExist(err) && b.Status().PendingDeletes == 0
	})
}

// TestConditionalDelete: a DELETE's preconditions are the buffered
// version's to meet, not the older one its target still holds.
func TestConditionalDelete(t *testing.T) {
	disk, _ := newPosix(t, "disk")
	gated := &fake{Endpoint: disk, gate: make(chan struct{})}
	defer close(gated.gate)
	b, srv := start(t, Config{Prefixes: []Prefix{{Prefix: "/", Targets: []endpoint.Endpoint{gated}}}}, deleter(disk), Options{})
	etag := put(t, srv.URL+"/f", []byte("buffered")).Header.Get("Etag")
	for _, tc := range []struct {
		hdr, val string
		want     int
	}{
		{"If-Match", `"another"`, http.StatusPreconditionFailed},
		{"If-None-Match", "*", http.StatusPreconditionFailed},
		{"If-Match", etag, http.StatusNoContent},
	} {
		req, _ := http.NewRequest(http.MethodDelete, srv.URL+"/f", nil)
		req.Header.Set(tc.hdr, tc.val)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("DELETE %s: %s = %d, want %d", tc.hdr, tc.val, resp.StatusCode, tc.want)
		}
	}
	if st := b.Status(); st.HeldFiles != 0 || st.PendingDeletes != 1 {
		t.Errorf("Status = %+v, want the file deleted", st)
	}
}

// TestDeleteNotJournaledIsUnavailable: a delete the journal cannot keep
// (its disk full, an I/O error) is not durable, so it is answered as
// unavailable, to be tried again, over HTTP (503 with Retry-After) and
// through the Overlay (the door's deletes) alike; never a 500.
func TestDeleteNotJournaledIsUnavailable(t *testing.T) {
	ctx := context.Background()
	disk, _ := newPosix(t, "disk")
	f := &fake{Endpoint: disk}
	b, srv := start(t, fastRetry(Config{KeepAfterMigration: time.Hour, Prefixes: []Prefix{{Prefix: "/buf", Targets: []endpoint.Endpoint{f}}}}), deleter(disk), Options{})
	ov := b.Overlay(f)
	for _, p := range []string{"/buf/a", "/buf/b"} {
		if err := ov.Put(ctx, p, bytes.NewReader([]byte("x")), 1); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 10*time.Second, "migrated", func() bool { return b.Status().PendingFiles == 0 })
	// The journal refuses every change from now on.
	if err := b.j.db.Close(); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodDelete, srv.URL+"/buf/a", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("DELETE with the journal failing = %d (Retry-After %q), want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if err := ov.Delete(ctx, "/buf/b"); !errors.Is(err, endpoint.ErrUnavailable) {
		t.Errorf("Overlay Delete with the journal failing = %v, want ErrUnavailable", err)
	}
}
