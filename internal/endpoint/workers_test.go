package endpoint

import (
	"bytes"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/testenv"
)

// goroutineID is the runtime's number of the calling goroutine, from the
// first line of its stack trace ("goroutine 42 [running]:").
func goroutineID() string {
	b := make([]byte, 64)
	b = b[:runtime.Stack(b, false)]
	id, _, _ := bytes.Cut(bytes.TrimPrefix(b, []byte("goroutine ")), []byte(" "))
	return string(id)
}

// TestWorkersReuse: a function given once the last one has returned
// runs on the same goroutine, kept idle in between.
func TestWorkersReuse(t *testing.T) {
	w := NewWorkers(4, time.Hour)
	defer w.Close()
	ids := make(chan string, 1)
	first := ""
	for i := range 3 {
		w.Go(func() { ids <- goroutineID() })
		id := <-ids
		testenv.Eventually(t, 10*time.Second, "the worker idle again", func() bool { return w.idle.Idle() == 1 })
		if i == 0 {
			first = id
		} else if id != first {
			t.Errorf("call %d ran on goroutine %s, want %s, the kept one", i, id, first)
		}
	}
}

// TestWorkersNeverWait: with every worker busy, Go starts another at
// once rather than queueing behind them.
func TestWorkersNeverWait(t *testing.T) {
	w := NewWorkers(1, time.Hour)
	release := make(chan struct{})
	started := make(chan struct{}, 2)
	for range 2 {
		w.Go(func() {
			started <- struct{}{}
			<-release
		})
	}
	for range 2 {
		<-started // both run at once: the second did not wait for the first
	}
	close(release)
	w.Close()
	if n := w.idle.Idle(); n != 0 {
		t.Errorf("%d workers idle after Close, want 0", n)
	}
}

// TestWorkersCloseWaits: Close returns only once the functions running
// have returned: here one that returns only after Close has begun.
func TestWorkersCloseWaits(t *testing.T) {
	w := NewWorkers(4, time.Hour)
	closing := func() bool {
		w.idle.mu.Lock()
		defer w.idle.mu.Unlock()
		return w.idle.closed
	}
	var finished atomic.Bool
	w.Go(func() {
		testenv.Eventually(t, 10*time.Second, "Close begun", closing)
		finished.Store(true)
	})
	w.Close()
	if !finished.Load() {
		t.Error("Close returned before the function running did")
	}
}

// TestWorkersGoWhileClosing: a function handed to Go while Close runs
// (a request still arriving as the server shuts down) runs, and Go does
// not add to the WaitGroup Close waits on once its Wait may have begun
// (the race detector reports an Add from zero concurrent with Wait).
func TestWorkersGoWhileClosing(t *testing.T) {
	for range 200 {
		w := NewWorkers(4, time.Hour)
		closed := make(chan struct{})
		go func() {
			w.Close()
			close(closed)
		}()
		ran := make(chan struct{})
		w.Go(func() { close(ran) })
		<-closed
		select {
		case <-ran:
		case <-time.After(10 * time.Second):
			t.Fatal("a function handed to Go during Close never ran")
		}
	}
}
