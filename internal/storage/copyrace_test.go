package storage

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/httpx"
	"github.com/lakefed/lakefed/internal/keptsum"
	"github.com/lakefed/lakefed/internal/testenv"
)

// Races between a COPY or MOVE and what else changes its destination,
// made deterministic: testHooks stop the COPY right after it moved the old
// destination aside (install, copy.go), and the test runs the other
// operation then.

// parked is a COPY or MOVE stopped in its aside hook.
type parked struct {
	reached chan struct{} // one value when the request is in the hook
	release chan struct{} // closed to let it go on
}

func newParked() *parked {
	return &parked{reached: make(chan struct{}, 1), release: make(chan struct{})}
}

func (p *parked) hook() {
	p.reached <- struct{}{}
	<-p.release
}

// wait waits for the request to reach the hook, or for it to answer
// without doing so (then the test fails).
func (p *parked) wait(t *testing.T, answered <-chan int) {
	t.Helper()
	select {
	case <-p.reached:
	case code := <-answered:
		t.Fatalf("the COPY answered %d without moving the destination aside", code)
	case <-time.After(10 * time.Second):
		t.Fatal("the COPY did not move the destination aside within 10s")
	}
}

// send sends one request in the background; the channel gets its status.
func send(t *testing.T, method, url, body string, hdr ...string) <-chan int {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	done := make(chan int, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	return done
}

// answer waits for a status from send.
func answer(t *testing.T, what string, c <-chan int) int {
	t.Helper()
	select {
	case code := <-c:
		return code
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: no answer within 20s", what)
		return 0
	}
}

// tempEntries returns the temp entries directly in dir, with what each
// holds: a file's content, or "dir".
func tempEntries(t *testing.T, dir string) map[string]string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), uploadPrefix) {
			continue
		}
		if e.IsDir() {
			out[e.Name()] = "dir"
			continue
		}
		b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		out[e.Name()] = string(b)
	}
	return out
}

// TestJanitorSparesCopyAside: a janitor pass that runs while a COPY holds
// the old destination aside leaves it there, and the copy about to be
// renamed in too, though both look like a crash's leftovers (a temp name,
// an mtime older than the stale age), and though the pass read the
// open-file table before the COPY began. The COPY then gets the old
// destination back when its rename fails (here on a file that a local
// process put at the destination).
func TestJanitorSparesCopyAside(t *testing.T) {
	p := newParked()
	var armed atomic.Bool
	var copied <-chan int
	var ts *testServer
	hooks := &testHooks{aside: p.hook}
	hooks.walk = func() {
		if !armed.Load() {
			return // the start pass
		}
		// The pass has met its first candidate (the decoy) and read the
		// open-file table: now the COPY moves the destination aside.
		copied = send(t, "COPY", ts.url+"/src", "", "Destination", ts.url+"/dst", "Overwrite", "T")
		p.wait(t, copied)
	}
	ts = startHooked(t, Config{}, hooks)
	<-ts.s.swept
	old := time.Now().Add(-2 * time.Hour)
	ts.write(t, "src/member", "the copy", time.Time{})
	ts.write(t, "dst", "the old destination", old)
	decoy := writeAged(t, ts.root, keptsum.Dir+"/"+uploadPrefix+"decoy", 2*time.Hour)

	armed.Store(true)
	// A pass as if two hours later: by age alone the copy's own temp
	// directory would be stale too.
	if _, err := ts.s.sweepOnce(context.Background(), time.Now().Add(2*time.Hour), time.Hour, time.Time{}); err != nil {
		t.Fatalf("sweep: %v", err)
	}
	if _, err := os.Lstat(decoy); !os.IsNotExist(err) {
		t.Errorf("the decoy %s is still there (%v): the pass did not sweep", decoy, err)
	}
	held := map[string]bool{}
	for _, what := range tempEntries(t, ts.root) {
		held[what] = true
	}
	if !held["the old destination"] {
		t.Errorf("after a janitor pass during the COPY, the destination moved aside is gone (temp entries: %v)", tempEntries(t, ts.root))
	}
	if !held["dir"] {
		t.Errorf("after a janitor pass during the COPY, the copy being renamed in is gone (temp entries: %v)", tempEntries(t, ts.root))
	}

	if err := os.WriteFile(filepath.Join(ts.root, "dst"), []byte("in the way"), 0o644); err != nil {
		t.Fatal(err)
	}
	close(p.release)
	if code := answer(t, "COPY", copied); code != http.StatusPreconditionFailed {
		t.Errorf("COPY onto a destination created meanwhile = %d, want 412", code)
	}
	if b, err := os.ReadFile(filepath.Join(ts.root, "dst")); err != nil || string(b) != "the old destination" {
		t.Errorf("after the failed COPY /dst = %q, %v; want the old destination back", b, err)
	}
	noTemps(t, ts.root)
}

// holders returns how many requests hold or wait for p's lock.
func (l *pathLocks) holders(p string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.m[p]; e != nil {
		return e.refs
	}
	return 0
}

// TestPutRacingCopyDestination: a PUT of the destination that arrives
// while a COPY or MOVE of a collection has the old destination (a file)
// moved aside waits for it, so the result is one whole version: the
// collection, with the PUT refused (409, a collection is there now), or
// the PUT's file. Without the destination's path lock the PUT landed in
// the gap, the COPY's rename failed on it, and moving the old file back
// undid the PUT that had been answered 201.
func TestPutRacingCopyDestination(t *testing.T) {
	for _, method := range []string{"COPY", "MOVE"} {
		t.Run(method, func(t *testing.T) {
			p := newParked()
			ts := startHooked(t, Config{}, &testHooks{aside: p.hook})
			ts.write(t, "src/member", "the copy", time.Time{})
			ts.write(t, "dst", "the old destination", time.Time{})
			copied := send(t, method, ts.url+"/src", "", "Destination", ts.url+"/dst", "Overwrite", "T")
			p.wait(t, copied)

			put := send(t, "PUT", ts.url+"/dst", "the PUT's file")
			putCode := 0
			testenv.Eventually(t, 10*time.Second, "the PUT answered or waits for the destination's lock", func() bool {
				select {
				case putCode = <-put:
				default:
				}
				return putCode != 0 || ts.s.paths.holders("/dst") >= 2
			})
			close(p.release)
			copyCode := answer(t, method, copied)
			if putCode == 0 {
				putCode = answer(t, "PUT", put)
			}

			dst := filepath.Join(ts.root, "dst")
			var got string
			if fi, err := os.Stat(dst); err == nil && fi.IsDir() {
				b, _ := os.ReadFile(filepath.Join(dst, "member"))
				got = "collection:" + string(b)
			} else {
				b, _ := os.ReadFile(dst)
				got = "file:" + string(b)
			}
			copyOK, putOK := copyCode/100 == 2, putCode/100 == 2
			var want []string // the versions the answers allow
			switch {
			case copyOK && putOK: // either order
				want = []string{"collection:the copy", "file:the PUT's file"}
			case copyOK:
				want = []string{"collection:the copy"}
			case putOK:
				want = []string{"file:the PUT's file"}
			default:
				want = []string{"file:the old destination"}
			}
			if !slices.Contains(want, got) {
				t.Errorf("%s answered %d, PUT answered %d, and /dst holds %q; want one of %q", method, copyCode, putCode, got, want)
			}
			if copyCode != http.StatusNoContent || putCode != http.StatusConflict {
				t.Errorf("%s = %d, PUT = %d; want 204 for the %s and 409 for the PUT that waited for it", method, copyCode, putCode, method)
			}
			noTemps(t, ts.root)
		})
	}
}

// TestCopyPutBackFailureKeepsDestination: a PUT of a member of a
// collection that a COPY has moved aside makes the collection again (its
// parent is created), so the COPY can neither rename its copy in nor put
// the old collection back. The COPY fails and the PUT's file stays; the
// old collection is kept under a name the janitor never sweeps, not left
// under a temp name that a later pass removes.
func TestCopyPutBackFailureKeepsDestination(t *testing.T) {
	p := newParked()
	ts := startHooked(t, Config{}, &testHooks{aside: p.hook})
	ts.write(t, "src/member", "the copy", time.Time{})
	ts.write(t, "dst/old", "the old collection's file", time.Time{})
	copied := send(t, "COPY", ts.url+"/src", "", "Destination", ts.url+"/dst", "Overwrite", "T")
	p.wait(t, copied)
	if code := answer(t, "PUT", send(t, "PUT", ts.url+"/dst/new", "a member")); code != http.StatusCreated {
		t.Fatalf("PUT /dst/new during the COPY = %d, want 201", code)
	}
	close(p.release)
	if code := answer(t, "COPY", copied); code/100 == 2 {
		t.Errorf("COPY whose destination was made again = %d, want a failure", code)
	}
	if b, err := os.ReadFile(filepath.Join(ts.root, "dst", "new")); err != nil || string(b) != "a member" {
		t.Errorf("/dst/new = %q, %v; want the PUT's member", b, err)
	}
	if _, err := ts.s.sweepOnce(context.Background(), time.Now().Add(2*time.Hour), time.Hour, time.Time{}); err != nil {
		t.Fatalf("sweep: %v", err)
	}
	kept, _ := filepath.Glob(filepath.Join(ts.root, keptPrefix+"*", "old"))
	if len(kept) != 1 {
		t.Fatalf("after a janitor pass, the old collection is kept %d times (%q), want once", len(kept), kept)
	}
	if b, err := os.ReadFile(kept[0]); err != nil || string(b) != "the old collection's file" {
		t.Errorf("%s = %q, %v; want the old collection's file", kept[0], b, err)
	}
	if temps := tempEntries(t, ts.root); len(temps) != 0 {
		t.Errorf("temp entries left: %v", temps)
	}
}

// A DELETE asking for an empty collection only (httpx.EmptyDeleteHeader,
// what the http kind sends for an rmdir, after listing the directory
// empty) removes it in one step with the emptiness check: a file
// committed after the caller's listing, or one being uploaded (its temp
// file beside it), makes it 409 and stays. Without the header a DELETE
// removes the tree (RFC 4918 §9.6.1).
func TestDeleteEmptyOnly(t *testing.T) {
	ts := startServer(t, Config{})
	empty := []string{httpx.EmptyDeleteHeader, "empty"}
	ts.write(t, "d/f", "written after the listing", time.Time{})
	resp, body := ts.do(t, "DELETE", "/d/", nil, empty...)
	wantStatus(t, resp, body, http.StatusConflict)
	if _, err := os.Stat(filepath.Join(ts.root, "d", "f")); err != nil {
		t.Fatalf("the file in the directory: %v; a DELETE of an empty directory removed it", err)
	}
	ts.write(t, "u/.lakefed-upload-x", "an upload in progress", time.Time{})
	resp, body = ts.do(t, "DELETE", "/u/", nil, empty...)
	wantStatus(t, resp, body, http.StatusConflict)
	if err := os.Mkdir(filepath.Join(ts.root, "e"), 0o755); err != nil {
		t.Fatal(err)
	}
	resp, body = ts.do(t, "DELETE", "/e/", nil, empty...)
	wantStatus(t, resp, body, http.StatusNoContent)
	resp, body = ts.do(t, "DELETE", "/d/f", nil, empty...) // a file: the header changes nothing
	wantStatus(t, resp, body, http.StatusNoContent)
	ts.write(t, "t/g", "x", time.Time{})
	resp, body = ts.do(t, "DELETE", "/t/", nil)
	wantStatus(t, resp, body, http.StatusNoContent)
}
