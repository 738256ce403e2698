package davlock

import (
	"strconv"
	"testing"
	"time"

	"golang.org/x/net/webdav"
)

// TestLockSystemExpiry checks that a lock past its timeout stops blocking
// and goes from the table without anyone asking for it, while one a
// request relies on (admit) cannot be unlocked.
func TestLockSystemExpiry(t *testing.T) {
	ls := newTable()
	now := time.Unix(1000, 0)
	l, err := ls.create(now, webdav.LockDetails{Root: "/a", Duration: time.Second}, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ls.create(now, webdav.LockDetails{Root: "/a/b"}, false); err != webdav.ErrLocked {
		t.Fatalf("exclusive under a depth-infinity shared lock: %v, want ErrLocked", err)
	}
	release, refused := ls.admit(now, []Target{{Path: "/a/b"}}, func(o *davLock) bool { return o.token == l.token })
	if refused != nil {
		t.Fatalf("admit with the token refused %v", refused)
	}
	if err := ls.unlock(now, l.token, "/a"); err != webdav.ErrLocked {
		t.Errorf("unlock of a held lock: %v, want ErrLocked", err)
	}
	if _, err := ls.create(now, webdav.LockDetails{Root: "/a/b", ZeroDepth: true}, true); err != webdav.ErrLocked {
		t.Errorf("LOCK of a resource a request is changing: %v, want ErrLocked", err)
	}
	release()
	later := now.Add(2 * time.Second)
	if n := ls.count(); n != 1 {
		t.Errorf("count before expiry = %d, want 1", n)
	}
	if _, err := ls.create(later, webdav.LockDetails{Root: "/a/b"}, false); err != nil {
		t.Errorf("create after expiry: %v", err)
	}
	if err := ls.unlock(later, l.token, "/a"); err != webdav.ErrNoSuchLock {
		t.Errorf("unlock of an expired lock: %v, want ErrNoSuchLock", err)
	}
	if n := ls.count(); n != 1 {
		t.Errorf("count after expiry = %d, want 1 (the expired lock dropped)", n)
	}
}

// fillLocks puts n exclusive depth-0 locks on distinct files into ls.
func fillLocks(tb testing.TB, ls *table, now time.Time, n int) {
	tb.Helper()
	for i := range n {
		p := "/fill/" + strconv.Itoa(i%100) + "/" + strconv.Itoa(i)
		if _, err := ls.create(now, webdav.LockDetails{Root: p, Duration: time.Hour, ZeroDepth: true}, false); err != nil {
			tb.Fatalf("create %s: %v", p, err)
		}
	}
}

// TestLockCostFlat shows that LOCK, the check of a write and the
// lockdiscovery of a resource look at the same number of lock entries
// whether the table holds one other lock or MaxLocksTotal-2: they walk the
// path's parents instead of scanning the table (it once scanned, and LOCK
// slowed to a few hundred a second with 65,000 locks held).
func TestLockCostFlat(t *testing.T) {
	now := time.Unix(1000, 0)
	cost := func(others int) [3]int {
		ls := newTable()
		fillLocks(t, ls, now, others)
		var c [3]int
		v := ls.visited
		l, err := ls.create(now, webdav.LockDetails{Root: "/fill/7/x", ZeroDepth: true}, true)
		if err != nil {
			t.Fatal(err)
		}
		c[0], v = ls.visited-v, ls.visited
		release, _ := ls.admit(now, []Target{{Path: "/fill/7/x"}}, func(o *davLock) bool { return o.token == l.token })
		release()
		c[1], v = ls.visited-v, ls.visited
		ls.locksOn(now, "/fill/7/x")
		c[2] = ls.visited - v
		return c
	}
	small, full := cost(1), cost(MaxLocksTotal-2)
	if small != full {
		t.Errorf("lock entries visited by create, admit, locksOn = %v with 1 other lock, %v with %d: want equal",
			small, full, MaxLocksTotal-2)
	}
}

// BenchmarkLockWithFullTable measures LOCK plus UNLOCK of one file while
// the table holds MaxLocksTotal-1 other locks.
func BenchmarkLockWithFullTable(b *testing.B) {
	now := time.Now()
	ls := newTable()
	fillLocks(b, ls, now, MaxLocksTotal-1)
	b.ResetTimer()
	for b.Loop() {
		l, err := ls.create(now, webdav.LockDetails{Root: "/fill/7/x", ZeroDepth: true}, false)
		if err != nil {
			b.Fatal(err)
		}
		if err := ls.unlock(now, l.token, "/fill/7/x"); err != nil {
			b.Fatal(err)
		}
	}
}
