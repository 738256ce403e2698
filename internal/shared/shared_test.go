package shared

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/testenv"
)

// member is a Client with a memory the test can look at: the paths it
// dropped and how often it flushed.
type member struct {
	*Client
	mu      sync.Mutex
	dropped []string
	flushes atomic.Int64
	block   atomic.Pointer[chan struct{}] // when set, OnInvalidate waits on it
}

func (m *member) droppedAny(p string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Contains(m.dropped, p)
}

func startMember(t *testing.T, url, name string, lease time.Duration) *member {
	t.Helper()
	return startMemberLog(t, url, name, lease, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// startMemberLog is startMember logging to log.
func startMemberLog(t *testing.T, url, name string, lease time.Duration, log *slog.Logger) *member {
	t.Helper()
	m := &member{}
	c, err := New(context.Background(), Options{URL: url, Node: name, Lease: lease, AckTimeout: 200 * time.Millisecond,
		Log: log,
		OnInvalidate: func(paths []string) {
			if b := m.block.Load(); b != nil {
				<-*b
			}
			m.mu.Lock()
			m.dropped = append(m.dropped, paths...)
			m.mu.Unlock()
		},
		OnFlush: func() { m.flushes.Add(1) },
	})
	if err != nil {
		t.Fatal(err)
	}
	m.Client = c
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); c.Close(); <-done })
	testenv.Eventually(t, 5*time.Second, name+" joined", func() bool { return c.Trusted() && !c.Degraded() })
	return m
}

// An invalidation returns only once every live member dropped the path.
func TestInvalidateReachesEveryMember(t *testing.T) {
	r := testenv.StartRedis(t)
	a := startMember(t, r.URL, "a", 3*time.Second)
	b := startMember(t, r.URL, "b", 3*time.Second)
	c := startMember(t, r.URL, "c", 3*time.Second)
	for i := range 50 {
		p := "/f" + string(rune('a'+i%26)) + time.Now().Format("150405.000000")
		if err := a.Invalidate(context.Background(), p); err != nil {
			t.Fatal(err)
		}
		if !b.droppedAny(p) || !c.droppedAny(p) {
			t.Fatalf("Invalidate(%q) returned before every member dropped it (b %v, c %v)", p, b.droppedAny(p), c.droppedAny(p))
		}
		if a.droppedAny(p) {
			t.Fatalf("the writer was sent its own invalidation")
		}
	}
}

// A member that does not acknowledge (its subscriber stalled) is
// expelled, and the writer waits out its lease: when Invalidate
// returns, the stalled member has dropped everything it remembered
// (it noticed the expulsion) or no longer trusts it (its lease ran out).
func TestStalledMemberExpelled(t *testing.T) {
	r := testenv.StartRedis(t)
	lease := time.Second
	a := startMember(t, r.URL, "a", lease)
	block := make(chan struct{})
	b := startMember(t, r.URL, "b", lease)
	b.block.Store(&block)
	t.Cleanup(func() { close(block) }) // before b's own cleanup (LIFO): its Run can end
	start := time.Now()
	if err := a.Invalidate(context.Background(), "/f"); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if b.flushes.Load() == 0 && b.Trusted() {
		t.Fatalf("Invalidate returned after %v while the stalled member neither acknowledged, nor flushed, nor lost its lease", took)
	}
	if b.droppedAny("/f") {
		t.Fatalf("the stalled member processed the invalidation although it was blocked")
	}
	testenv.Eventually(t, 5*time.Second, "b joined again", func() bool { return b.Trusted() })
}

// Redis killed: Invalidate says ErrDegraded (a write must not be
// acknowledged as seen everywhere), and members trust their own memory
// until their lease runs out, not after (a writer that still reaches
// Redis waits out only that lease). Redis back: every member flushes what
// it learned while apart, then shares again.
func TestDegradedThenFlushed(t *testing.T) {
	r := testenv.StartRedis(t)
	a := startMember(t, r.URL, "a", 600*time.Millisecond)
	b := startMember(t, r.URL, "b", 600*time.Millisecond)
	r.Kill()
	testenv.Eventually(t, 5*time.Second, "degraded", func() bool { return a.Degraded() && b.Degraded() })
	if err := a.Invalidate(context.Background(), "/f"); !errors.Is(err, ErrDegraded) {
		t.Fatalf("Invalidate with Redis down = %v, want ErrDegraded", err)
	}
	testenv.Eventually(t, 5*time.Second, "b stops trusting its memory once its lease runs out", func() bool { return !b.Trusted() })
	if b.flushes.Load() == 0 {
		t.Errorf("b's lease ran out while degraded, and it did not flush")
	}
	before := b.flushes.Load()
	r.Restart(t)
	testenv.Eventually(t, 10*time.Second, "sharing again", func() bool { return !a.Degraded() && !b.Degraded() && a.Trusted() && b.Trusted() })
	if b.flushes.Load() == before {
		t.Errorf("b did not flush what it learned while Redis was away")
	}
	if err := a.Invalidate(context.Background(), "/g"); err != nil || !b.droppedAny("/g") {
		t.Fatalf("after the restart: Invalidate = %v, b dropped it %v", err, b.droppedAny("/g"))
	}
}

// An answer from a listing of a directory cannot be stored once any path
// of that directory was written after the listing was asked for, even
// when the path's own version was read after that write (the listing is
// older than the write; the path's version is not).
func TestStoreMetaListedRefusedAfterWriteInDir(t *testing.T) {
	r := testenv.StartRedis(t)
	a := startMember(t, r.URL, "a", 3*time.Second)
	ctx := context.Background()
	dv, err := a.DirVersion(ctx, "/d")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Invalidate(ctx, "/d/f"); err != nil {
		t.Fatal(err)
	}
	m, _ := a.LoadMeta(ctx, "/d/f")
	if ok, err := a.StoreMetaListed(ctx, "/d/f", m.Version, dv, []byte("old"), time.Minute); ok || err != nil {
		t.Fatalf("StoreMetaListed with a directory version from before a write = %v, %v; want refused", ok, err)
	}
	if ok, err := a.StoreMetaListed(ctx, "/d/f", m.Version, "", []byte("old"), time.Minute); ok || err != nil {
		t.Fatalf("StoreMetaListed without a directory version = %v, %v; want refused", ok, err)
	}
	if err := a.Invalidate(ctx, "/e/g"); err != nil { // another directory
		t.Fatal(err)
	}
	dv, _ = a.DirVersion(ctx, "/d")
	m, _ = a.LoadMeta(ctx, "/d/f")
	if ok, err := a.StoreMetaListed(ctx, "/d/f", m.Version, dv, []byte("new"), time.Minute); !ok || err != nil {
		t.Fatalf("StoreMetaListed with current versions = %v, %v", ok, err)
	}
	if m, _ = a.LoadMeta(ctx, "/d/f"); string(m.Value) != "new" {
		t.Fatalf("LoadMeta = %q, want the stored entry", m.Value)
	}
}

// A look-up that read a path's version before a write cannot store its
// (older) answer after the write.
func TestStoreMetaRefusedAfterWrite(t *testing.T) {
	r := testenv.StartRedis(t)
	a := startMember(t, r.URL, "a", 3*time.Second)
	ctx := context.Background()
	m, err := a.LoadMeta(ctx, "/f")
	if err != nil || m.Value != nil {
		t.Fatalf("LoadMeta of a new path = %+v, %v", m, err)
	}
	if err := a.Invalidate(ctx, "/f"); err != nil {
		t.Fatal(err)
	}
	if ok, err := a.StoreMeta(ctx, "/f", m.Version, []byte("old"), time.Minute); ok || err != nil {
		t.Fatalf("StoreMeta with a version from before a write = %v, %v; want refused", ok, err)
	}
	m, _ = a.LoadMeta(ctx, "/f")
	if ok, err := a.StoreMeta(ctx, "/f", m.Version, []byte("new"), time.Minute); !ok || err != nil {
		t.Fatalf("StoreMeta with the current version = %v, %v", ok, err)
	}
	if m, _ = a.LoadMeta(ctx, "/f"); string(m.Value) != "new" {
		t.Fatalf("LoadMeta = %q, want the stored entry", m.Value)
	}
	if err := a.Invalidate(ctx, "/f"); err != nil {
		t.Fatal(err)
	}
	if m, _ = a.LoadMeta(ctx, "/f"); m.Value != nil {
		t.Fatalf("LoadMeta after a write = %q, want none", m.Value)
	}
	got, err := a.TryLease(ctx, "lookup:/f", time.Second)
	again, _ := a.TryLease(ctx, "lookup:/f", time.Second)
	if !got || again || err != nil {
		t.Fatalf("TryLease twice = %v, %v (%v); want one holder", got, again, err)
	}
}

// A group's registrations: a member registered is listed, one whose
// registration ran out is not.
func TestGroupRegistrations(t *testing.T) {
	r := testenv.StartRedis(t)
	a := startMember(t, r.URL, "a", time.Second)
	g := a.Group("cache")
	ctx := context.Background()
	if err := g.Heartbeat(ctx, "http://n1", time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := g.Heartbeat(ctx, "http://n2", 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if m, _ := g.Members(ctx); len(m) != 2 {
		t.Fatalf("Members = %v, want both", m)
	}
	testenv.Eventually(t, 5*time.Second, "n2's registration ran out", func() bool {
		m, _ := g.Members(ctx)
		return len(m) == 1 && m[0] == "http://n1"
	})
}

// A Redis restarted from a snapshot (RDB persistence is Debian's
// default) brings back the second-level entries it held then, among them
// entries of paths written since: none of them is handed out.
func TestRestoredEntryNotServed(t *testing.T) {
	r := testenv.StartRedis(t)
	a := startMember(t, r.URL, "a", 600*time.Millisecond)
	ctx := context.Background()
	m, err := a.LoadMeta(ctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := a.StoreMeta(ctx, "/f", m.Version, []byte("before the write"), time.Hour); !ok || err != nil {
		t.Fatalf("StoreMeta = %v, %v", ok, err)
	}
	if err := a.rdb.Save(ctx).Err(); err != nil { // the snapshot
		t.Fatal(err)
	}
	if err := a.Invalidate(ctx, "/f"); err != nil { // the write, after it
		t.Fatal(err)
	}
	r.Kill()
	testenv.Eventually(t, 5*time.Second, "degraded", a.Degraded)
	r.Restart(t)
	testenv.Eventually(t, 10*time.Second, "sharing again", func() bool { return !a.Degraded() && a.Trusted() })
	if m, err = a.LoadMeta(ctx, "/f"); err != nil || m.Value != nil {
		t.Fatalf("LoadMeta after a restart from a snapshot = %q, %v; want no entry (the path was written since)", m.Value, err)
	}
	if ok, err := a.StoreMeta(ctx, "/f", m.Version, []byte("new"), time.Hour); !ok || err != nil {
		t.Fatalf("StoreMeta after the restart = %v, %v", ok, err)
	}
	if m, _ = a.LoadMeta(ctx, "/f"); string(m.Value) != "new" {
		t.Fatalf("LoadMeta = %q, want the entry stored since the restart", m.Value)
	}
}

// A member that finds Redis gone through a command of its own, before
// its heartbeat does (a write's invalidation, as a federator cut off
// from Redis finds it), says so in its log, once.
func TestDegradedSaysSo(t *testing.T) {
	r := testenv.StartRedis(t)
	var log testenv.SyncBuffer
	// The write below comes before the next heartbeat (a second away)
	// but by a chance of a few microseconds.
	m := startMemberLog(t, r.URL, "a", 3*time.Second, slog.New(slog.NewTextHandler(&log, nil)))
	r.Kill()
	for range 3 {
		if err := m.Invalidate(context.Background(), "/f"); !errors.Is(err, ErrDegraded) {
			t.Fatalf("Invalidate with Redis killed = %v, want ErrDegraded", err)
		}
	}
	if n := strings.Count(log.String(), "redis unreachable"); n != 1 || !m.Degraded() {
		t.Errorf("degraded %v, and the log says redis unreachable %d times, want once:\n%s", m.Degraded(), n, log.String())
	}
}
