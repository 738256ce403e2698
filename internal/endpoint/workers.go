package endpoint

import (
	"sync"
	"time"
)

// Workers runs functions on goroutines kept between calls, as IdlePool
// keeps connections: a federator's cold look-up asks every endpoint on a
// goroutine of its own, and the root:// door answers each request on
// one, and a goroutine started for each grew its stack, copying it, at
// every level an endpoint request goes down (9–10 % of the door's CPU
// per cold open, `PROFILE=1 bench/xroot.sh`). A kept goroutine has
// already grown what the next one needs, until the garbage collector
// shrinks an idle one's stack.
//
// Go never waits for a worker: a function that finds none idle runs on
// a new goroutine, which is kept afterwards. At most max stay idle, for
// up to idle each (IdlePool); Close stops them and waits for every
// function started. Safe for concurrent use.
//
//	w := endpoint.NewWorkers(256, 30*time.Second)
//	defer w.Close()
//	w.Go(func() { res[i] = ask(i); done <- i })
type Workers struct {
	idle IdlePool[*worker]
	wg   sync.WaitGroup // every worker goroutine started before Close
	// mu orders wg.Add before Close's Wait: a WaitGroup may not be
	// added to once its Wait has begun.
	mu     sync.Mutex
	closed bool
}

// worker is one kept goroutine; run hands it its next function, and its
// closing (IdlePool.Drop) ends it.
type worker struct{ run chan func() }

// NewWorkers returns a pool that keeps at most max goroutines idle, each
// for up to idle.
func NewWorkers(max int, idle time.Duration) *Workers {
	w := &Workers{}
	w.idle = IdlePool[*worker]{Max: max, IdleTimeout: idle, Drop: func(k *worker) { close(k.run) }}
	return w
}

// Go runs fn on an idle worker, or on a new one when none is idle. Once
// Close has begun it still runs fn, on a goroutine of its own that
// Close does not wait for.
func (w *Workers) Go(fn func()) {
	if k, ok := w.idle.Get(); ok {
		k.run <- fn // room for one: the worker may not be receiving yet
		return
	}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		go fn()
		return
	}
	w.wg.Add(1)
	w.mu.Unlock()
	go w.work(&worker{run: make(chan func(), 1)}, fn)
}

// work runs fn, then whatever Go hands k, until k is dropped: the pool
// full, closed, or k idle too long.
func (w *Workers) work(k *worker, fn func()) {
	defer w.wg.Done()
	for ok := true; ok; fn, ok = <-k.run {
		fn()
		w.idle.Put(k)
	}
}

// Close ends the idle workers, and each busy one when its function
// returns, and waits for them all.
func (w *Workers) Close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.idle.Close()
	w.wg.Wait()
}
