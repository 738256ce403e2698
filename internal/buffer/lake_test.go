package buffer

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/testenv"
)

// fakeLake is a Lake in memory: the holds by path, the paths another
// process holds, and every call (and write hook) in order.
type fakeLake struct {
	mu    sync.Mutex
	holds map[string]lakeHold
	other map[string]bool
	calls []string
	down  atomic.Bool // every call fails
	// noRelease makes Release fail alone (counted in refused).
	noRelease atomic.Bool
	// refused counts the calls that failed because the lake was down.
	refused atomic.Int32
}

type lakeHold struct {
	seq     int64
	v       endpoint.Info
	deleted bool
}

func newFakeLake() *fakeLake {
	return &fakeLake{holds: map[string]lakeHold{}, other: map[string]bool{}}
}

func (l *fakeLake) log(format string, args ...any) {
	l.calls = append(l.calls, fmt.Sprintf(format, args...))
}

func (l *fakeLake) Claim(_ context.Context, p string) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.down.Load() {
		return false, errors.New("lake down")
	}
	l.log("claim %s", p)
	if l.other[p] {
		return false, nil
	}
	if _, ok := l.holds[p]; !ok {
		l.holds[p] = lakeHold{}
	}
	return true, nil
}

func (l *fakeLake) Hold(_ context.Context, p string, seq int64, v endpoint.Info, deleted bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.down.Load() {
		return errors.New("lake down")
	}
	l.log("hold %s %v", p, deleted)
	if l.other[p] {
		return ErrHeldElsewhere
	}
	if h, ok := l.holds[p]; !ok || h.seq <= seq {
		l.holds[p] = lakeHold{seq: seq, v: v, deleted: deleted}
	}
	return nil
}

func (l *fakeLake) Release(_ context.Context, p string, seq int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.down.Load() || l.noRelease.Load() {
		l.refused.Add(1)
		return errors.New("lake down")
	}
	l.log("release %s", p)
	if h, ok := l.holds[p]; ok && (seq < 0 || h.seq == seq) {
		delete(l.holds, p)
	}
	return nil
}

func (l *fakeLake) Held(context.Context) ([]string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.down.Load() {
		return nil, errors.New("lake down")
	}
	var ps []string
	for p := range l.holds {
		ps = append(ps, p)
	}
	return ps, nil
}

// wrote is the write hook, logged with the lake's calls.
func (l *fakeLake) wrote(_ context.Context, p string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.log("wrote %s", p)
	return nil
}

func (l *fakeLake) hold(p string) (lakeHold, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h, ok := l.holds[p]
	return h, ok
}

// since returns the calls after the first n, and their count.
func (l *fakeLake) since(n int) ([]string, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.calls[n:]...), len(l.calls)
}

// The buffer tells its lake what it holds: a PUT is claimed, then held
// (its version, before the write hook and before the answer); a path
// another process holds goes to next; a lake that cannot be told refuses
// the write; a delete is held as one; a migrated file is released before
// its retirement, and is then read from its target; a delete carried out
// is released. A restarted buffer holds its pending files again and
// drops a claim the journal does not have.
func TestLakeHolds(t *testing.T) {
	tgt, _ := newPosix(t, "site")
	target := &fake{Endpoint: tgt}
	target.down.Store(true)
	lake := newFakeLake()
	var nexts atomic.Int32
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		nexts.Add(1)
		deleter(target).ServeHTTP(w, r)
	})
	dir := t.TempDir()
	cfg := fastRetry(Config{Dir: dir, KeepAfterMigration: time.Millisecond,
		Prefixes: []Prefix{{Prefix: "/store", Targets: []endpoint.Endpoint{target}}}})
	b, srv := start(t, cfg, next, Options{Lake: lake, OnWrite: lake.wrote})

	_, n := lake.since(0)
	resp := put(t, srv.URL+"/store/f", []byte("version one"))
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("PUT = %d, want 201", resp.StatusCode)
	}
	calls, _ := lake.since(n)
	if !slices.Equal(calls, []string{"claim /store/f", "hold /store/f false", "wrote /store/f"}) {
		t.Fatalf("a PUT told the lake %q; want claim, hold, then the write hook", calls)
	}
	if h, _ := lake.hold("/store/f"); h.v.Size != 11 || `"`+h.v.ETag+`"` != resp.Header.Get("Etag") || h.v.Checksums["adler32"] == "" {
		t.Fatalf("hold of /store/f = %+v; want 11 bytes, the ETag answered (%s) and an adler32", h, resp.Header.Get("Etag"))
	}

	lake.mu.Lock()
	lake.other["/store/x"] = true
	lake.mu.Unlock()
	before := nexts.Load()
	put(t, srv.URL+"/store/x", []byte("elsewhere"))
	if nexts.Load() != before+1 {
		t.Fatal("a PUT of a path another process holds did not go to next")
	}
	if _, ok := b.stat("/store/x"); ok {
		t.Fatal("the buffer took a PUT of a path another process holds")
	}

	lake.down.Store(true)
	if resp := put(t, srv.URL+"/store/g", []byte("g")); resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("PUT with the lake unreachable = %d (Retry-After %q), want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if _, ok := b.stat("/store/g"); ok {
		t.Fatal("the buffer took a PUT the lake could not be told of")
	}
	lake.down.Store(false)

	_, n = lake.since(0)
	req, _ := http.NewRequest(http.MethodDelete, srv.URL+"/store/f", nil)
	dresp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	dresp.Body.Close()
	if dresp.StatusCode != http.StatusAccepted {
		t.Fatalf("DELETE with the target down = %d, want 202", dresp.StatusCode)
	}
	calls, _ = lake.since(n)
	if !slices.Equal(calls, []string{"hold /store/f true", "wrote /store/f"}) {
		t.Fatalf("a DELETE told the lake %q; want the delete held, then the write hook", calls)
	}

	if resp := put(t, srv.URL+"/store/h", []byte("migrates")); resp.StatusCode != http.StatusCreated {
		t.Fatalf("PUT /store/h = %d", resp.StatusCode)
	}
	_, n = lake.since(0)
	target.down.Store(false)
	// Each is released, then the write hook runs (a moment after the
	// hold is gone).
	testenv.Eventually(t, 10*time.Second, "/store/h retired and the delete of /store/f carried out, each released then written", func() bool {
		_, h := lake.hold("/store/h")
		_, f := lake.hold("/store/f")
		calls, _ = lake.since(n)
		for _, p := range []string{"/store/h", "/store/f"} {
			if slices.Index(calls, "release "+p) < 0 || slices.Index(calls, "wrote "+p) < 0 {
				return false
			}
		}
		return !h && !f
	})
	for _, p := range []string{"/store/h", "/store/f"} {
		rel, wrote := slices.Index(calls, "release "+p), slices.Index(calls, "wrote "+p)
		if wrote < rel {
			t.Fatalf("after migration the lake heard %q; want %s released, then the write hook", calls, p)
		}
	}
	if _, body := get(t, srv.URL+"/store/h"); string(body) == "migrates" {
		t.Fatal("the buffer still serves a file it released (it is to be read from its target)")
	}

	// A restart: a pending file whose hold the lake lost is held again,
	// a claim the journal does not have is dropped.
	target.down.Store(true)
	if resp := put(t, srv.URL+"/store/p", []byte("pending")); resp.StatusCode != http.StatusCreated {
		t.Fatalf("PUT /store/p = %d", resp.StatusCode)
	}
	srv.Close()
	b.Close()
	lake.mu.Lock()
	delete(lake.holds, "/store/p")
	lake.holds["/store/orphan"] = lakeHold{}
	lake.mu.Unlock()
	start(t, cfg, next, Options{Lake: lake, OnWrite: lake.wrote})
	testenv.Eventually(t, 5*time.Second, "the restarted buffer's reconcile", func() bool {
		h, held := lake.hold("/store/p")
		_, orphan := lake.hold("/store/orphan")
		return held && h.seq > 0 && !orphan
	})
	if calls, _ := lake.since(0); !strings.Contains(strings.Join(calls, ","), "wrote /store/p") {
		t.Fatalf("the restarted buffer held /store/p again without telling the process: %q", calls)
	}
}

// TestLakeOutageRetiresEveryMigratedFile: while the lake is down, a
// resync (Redis restarted) cannot release the migrated files the buffer
// keeps; once it is back, every one of them is released and retired. A
// reconcile that gave up at the first failure used to leave the others
// marked as retiring, so that neither it nor expiry ever retired them,
// and the lake kept sending their readers to this buffer.
func TestLakeOutageRetiresEveryMigratedFile(t *testing.T) {
	tgt, _ := newPosix(t, "site")
	lake := newFakeLake()
	cfg := fastRetry(Config{Dir: t.TempDir(), KeepAfterMigration: time.Hour,
		Prefixes: []Prefix{{Prefix: "/store", Targets: []endpoint.Endpoint{tgt}}}})
	b, srv := start(t, cfg, http.NotFoundHandler(), Options{Lake: lake, OnWrite: lake.wrote})
	paths := []string{"/store/a", "/store/b", "/store/c", "/store/d"}
	for _, p := range paths {
		if resp := put(t, srv.URL+p, []byte("bytes of "+p)); resp.StatusCode != http.StatusCreated {
			t.Fatalf("PUT %s = %d, want 201", p, resp.StatusCode)
		}
	}
	testenv.Eventually(t, 10*time.Second, "every file migrated and kept", func() bool {
		st := b.Status()
		return st.PendingFiles == 0 && st.HeldFiles == len(paths)
	})

	lake.down.Store(true)
	b.Resync()
	testenv.Eventually(t, 10*time.Second, "a reconcile that fails on the lake", func() bool {
		return lake.refused.Load() > 0
	})
	lake.down.Store(false)
	testenv.Eventually(t, 10*time.Second, "every migrated file released and retired once the lake is back", func() bool {
		for _, p := range paths {
			if _, held := lake.hold(p); held {
				return false
			}
		}
		return b.Status().HeldFiles == 0
	})
}

// TestRefusedReleaseWaitsBeforeAskingAgain: expired migrated files whose
// release the lake refuses are asked for again RetryInitial later, not
// on every turn of the mover's loop (which spun, a warning a time, while
// a Redis refused connections).
func TestRefusedReleaseWaitsBeforeAskingAgain(t *testing.T) {
	tgt, _ := newPosix(t, "site")
	lake := newFakeLake()
	lake.noRelease.Store(true)
	const retry = 50 * time.Millisecond
	cfg := Config{Dir: t.TempDir(), KeepAfterMigration: time.Millisecond, RetryInitial: retry, RetryMax: 4 * retry,
		Prefixes: []Prefix{{Prefix: "/store", Targets: []endpoint.Endpoint{tgt}}}}
	b, srv := start(t, cfg, http.NotFoundHandler(), Options{Lake: lake, OnWrite: lake.wrote})
	paths := []string{"/store/a", "/store/b", "/store/c", "/store/d"}
	for _, p := range paths {
		if resp := put(t, srv.URL+p, []byte("bytes of "+p)); resp.StatusCode != http.StatusCreated {
			t.Fatalf("PUT %s = %d, want 201", p, resp.StatusCode)
		}
	}
	testenv.Eventually(t, 10*time.Second, "every file migrated and its release refused", func() bool {
		st := b.Status()
		return st.PendingFiles == 0 && st.HeldFiles == len(paths) && lake.refused.Load() > 0
	})
	// A window of ten retry intervals: the count in it is the rate.
	const window = 10 * retry
	before := lake.refused.Load()
	time.Sleep(window)
	asked := lake.refused.Load() - before
	if max := int32(window/retry) + 3; asked > max || asked < 2 {
		t.Errorf("the lake was asked to release %d times in %v, want between 2 and %d (one pass each %v)", asked, window, max, retry)
	}
	lake.noRelease.Store(false)
	testenv.Eventually(t, 10*time.Second, "every migrated file retired once the lake takes releases", func() bool {
		return b.Status().HeldFiles == 0
	})
}
