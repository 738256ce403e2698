package cache

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"
)

// fakeMembership is a registry the test edits: who is registered.
type fakeMembership struct {
	mu      sync.Mutex
	members []string
	beats   int
}

func (f *fakeMembership) Heartbeat(_ context.Context, self string, _ time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.beats++
	if !slices.Contains(f.members, self) {
		f.members = append(f.members, self)
	}
	return nil
}

func (f *fakeMembership) Members(context.Context) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.members), nil
}

// A group found through a membership: a node registered joins the
// rendezvous with no config change, one whose registration ran out
// leaves it, and this node registers itself on every refresh.
func TestDynamicGroupMembership(t *testing.T) {
	reg := &fakeMembership{}
	g, err := newDynamicGroup(reg, "http://127.0.0.1:1", nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	urls := func() []string {
		var out []string
		for _, m := range g.status() {
			out = append(out, m.URL)
		}
		slices.Sort(out)
		return out
	}
	g.refresh(t.Context())
	if got := urls(); !slices.Equal(got, []string{"http://127.0.0.1:1"}) || reg.beats != 1 {
		t.Fatalf("alone: members %v after %d heartbeats", got, reg.beats)
	}
	reg.mu.Lock()
	reg.members = append(reg.members, "http://127.0.0.1:2", "http://127.0.0.1:3")
	reg.mu.Unlock()
	g.refresh(t.Context())
	if got := urls(); len(got) != 3 {
		t.Fatalf("after two joined: members %v", got)
	}
	owners := map[string]bool{}
	for i := range 100 {
		owners[g.owner("/f"+string(rune('a'+i%26))+string(rune('a'+i/26))).url] = true
	}
	if len(owners) != 3 {
		t.Errorf("100 paths are owned by %d members, want all 3", len(owners))
	}
	reg.mu.Lock()
	reg.members = slices.DeleteFunc(reg.members, func(u string) bool { return u == "http://127.0.0.1:2" })
	reg.mu.Unlock()
	g.refresh(t.Context())
	if got := urls(); slices.Contains(got, "http://127.0.0.1:2") || len(got) != 2 {
		t.Fatalf("after one left: members %v", got)
	}
}
