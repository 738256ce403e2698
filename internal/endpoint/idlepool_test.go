package endpoint

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/testenv"
)

// droppedSet records the connections a pool let go.
type droppedSet struct {
	mu sync.Mutex
	c  []int
}

func (d *droppedSet) drop(c int) { d.mu.Lock(); d.c = append(d.c, c); d.mu.Unlock() }

func (d *droppedSet) all() []int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Sorted(slices.Values(d.c))
}

func TestIdlePool(t *testing.T) {
	var d droppedSet
	p := &IdlePool[int]{Max: 2, IdleTimeout: time.Hour, Drop: d.drop}
	if _, ok := p.Get(); ok {
		t.Fatal("Get of an empty pool gave a connection")
	}
	p.Put(1)
	p.Put(2)
	p.Put(3) // beyond Max: dropped
	if got := d.all(); !slices.Equal(got, []int{3}) {
		t.Errorf("dropped %v, want [3]", got)
	}
	if c, ok := p.Get(); !ok || c != 2 {
		t.Errorf("Get = %d, %v; want 2, the last put", c, ok)
	}
	p.Close()
	p.Put(4)
	if _, ok := p.Get(); ok {
		t.Error("Get of a closed pool gave a connection")
	}
	if got := d.all(); !slices.Equal(got, []int{1, 3, 4}) {
		t.Errorf("dropped %v, want [1 3 4]", got)
	}
}

// TestIdlePoolExpires: idle connections are dropped by the timer, with
// no Get or Put to notice them.
func TestIdlePoolExpires(t *testing.T) {
	var d droppedSet
	p := &IdlePool[int]{Max: 8, IdleTimeout: 20 * time.Millisecond, Drop: d.drop}
	defer p.Close()
	p.Put(1)
	p.Put(2)
	testenv.Eventually(t, 10*time.Second, "both dropped", func() bool { return p.Idle() == 0 && len(d.all()) == 2 })
	p.Put(3) // the timer starts again
	testenv.Eventually(t, 10*time.Second, "the third dropped", func() bool { return len(d.all()) == 3 })
}
