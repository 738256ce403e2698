package nemesis

import (
	"reflect"
	"testing"
	"time"
)

// TestScheduleReplays: one seed, one schedule; another seed, another;
// never two faults on one target at once, never more than two at once.
func TestScheduleReplays(t *testing.T) {
	targets := Targets{Kill: {"fed-0", "site-a"}, Pause: {"fed-1"}, Divergence: {"site-a"}, RedisKill: {"redis"}}
	a := Schedule(7, 10*time.Minute, targets)
	if len(a) < 50 {
		t.Fatalf("Schedule gave %d faults in 10 minutes", len(a))
	}
	if b := Schedule(7, 10*time.Minute, targets); !reflect.DeepEqual(a, b) {
		t.Fatal("Schedule(7) differs between two calls")
	}
	if c := Schedule(8, 10*time.Minute, targets); reflect.DeepEqual(a, c) {
		t.Fatal("Schedule(8) = Schedule(7)")
	}
	for i, f := range a {
		if n := active(a, f.At); n > 2 {
			t.Fatalf("%d faults at %v", n, f.At)
		}
		for _, g := range a[:i] {
			if g.Target == f.Target && g.At+g.For > f.At {
				t.Fatalf("%v on %s at %v while %v on it until %v", f.Kind, f.Target, f.At, g.Kind, g.At+g.For)
			}
		}
	}
}
