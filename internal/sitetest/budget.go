package sitetest

import (
	"context"
	"sync"
	"time"
)

// budget is one site's load budget: a semaphore bounding the tests that
// run at once and a pacer spacing the operations at least 1/rate apart
// (no bursts: a tester has no reason to be bursty). Safe for concurrent
// use.
type budget struct {
	sem chan struct{}

	mu       sync.Mutex
	interval time.Duration // 0: no rate bound
	next     time.Time     // earliest start of the next operation
}

func newBudget(concurrent int, rate float64) *budget {
	b := &budget{sem: make(chan struct{}, max(concurrent, 1))}
	if rate > 0 {
		b.interval = time.Duration(float64(time.Second) / rate)
	}
	return b
}

// acquire takes a test slot of the site, or fails when ctx ends first.
func (b *budget) acquire(ctx context.Context) error {
	select {
	case b.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *budget) release() { <-b.sem }

// wait blocks until the site's rate allows one more operation, or fails
// when ctx ends first (the slot it reserved is then lost, which only
// makes the tester gentler).
func (b *budget) wait(ctx context.Context) error {
	if b.interval == 0 {
		return ctx.Err()
	}
	b.mu.Lock()
	now := time.Now()
	at := b.next
	if at.Before(now) {
		at = now
	}
	b.next = at.Add(b.interval)
	b.mu.Unlock()
	d := time.Until(at)
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
