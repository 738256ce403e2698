package testenv

import (
	"bytes"
	"sync"
	"testing"
	"time"
)

// Eventually waits until cond holds, or fails the test with what and the
// time waited. It is the one way lakefed's tests wait for something to
// happen (a server up, a file migrated, a state changed, a probe answered).
//
// It polls because there is nothing to listen on: the state a test waits for
// belongs to another goroutine's loop or to an external process (nginx,
// XRootD, a child lakefed), none of which announce it. The interval starts at
// 1ms and doubles up to 10ms, so a condition that holds at once costs almost
// nothing, and a test that times what it waited for (a site marked down
// within an interval) is at most 10ms late.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	start := time.Now()
	if !Within(within, cond) {
		t.Fatalf("not within %v (waited %v): %s", within, time.Since(start).Round(time.Millisecond), what)
	}
}

// Within polls cond as Eventually does and reports whether it held before
// the deadline, for loops that must go on (or report otherwise) when it did
// not.
func Within(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	wait := time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(wait) // no notification exists to wait on: see Eventually
		wait = min(2*wait, 10*time.Millisecond)
	}
	return true
}

// SyncBuffer is a buffer that a test reads while servers' goroutines
// write to it (a log, a process's output).
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String is what was written so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
