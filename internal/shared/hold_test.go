package shared

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/testenv"
)

// Holds: one holder per path, its versions only go up, a drop of an
// older version or of another's hold changes nothing, and a reader sees
// whether the holder is alive.
func TestHolds(t *testing.T) {
	r := testenv.StartRedis(t)
	a := startMember(t, r.URL, "a", time.Second)
	b := startMember(t, r.URL, "b", time.Second)
	ctx := context.Background()
	const p, ua, ub = "/buf/f", "http://a:8080", "http://b:8080"

	// First, on a server that has not seen the hold script.
	if m, err := b.LoadMeta(ctx, p); err != nil || m.Hold != nil || b.Degraded() {
		t.Fatalf("LoadMeta of a path nobody holds, first = %+v, %v (degraded %v); want no hold", m, err, b.Degraded())
	}
	if h, err := b.LoadHold(ctx, p); err != nil || h != nil {
		t.Fatalf("LoadHold of a path nobody holds = %+v, %v; want nil", h, err)
	}
	if ok, _, err := a.ClaimHold(ctx, p, ua); !ok || err != nil {
		t.Fatalf("a's first claim = %v, %v; want it granted", ok, err)
	}
	if ok, other, err := b.ClaimHold(ctx, p, ub); ok || other != ua || err != nil {
		t.Fatalf("b's claim of a path a claimed = %v, %q, %v; want refused, naming %s", ok, other, err, ua)
	}
	if h, _ := b.LoadHold(ctx, p); h == nil || h.Seq != 0 || h.Owner != ua || !h.Live {
		t.Fatalf("a claim, as b loads it = %+v; want a's claim (seq 0), live", h)
	}
	v7 := Hold{Owner: ua, Seq: 7, Size: 12, ETag: "lfb-7-x", ModTime: 99, Sums: map[string]string{"adler32": "0badcafe"}}
	if err := a.PutHold(ctx, p, v7); err != nil {
		t.Fatal(err)
	}
	if err := b.PutHold(ctx, p, Hold{Owner: ub, Seq: 9}); !errors.Is(err, ErrHeldElsewhere) {
		t.Fatalf("b's PutHold over a's hold = %v, want ErrHeldElsewhere", err)
	}
	if err := a.PutHold(ctx, p, Hold{Owner: ua, Seq: 5, Size: 1}); err != nil { // older: ignored
		t.Fatal(err)
	}
	h, err := b.LoadHold(ctx, p)
	if err != nil || h == nil || h.Seq != 7 || h.Size != 12 || h.ETag != "lfb-7-x" || h.ModTime != 99 ||
		h.Sums["adler32"] != "0badcafe" || h.Node != "a" || h.Deleted || !h.Live {
		t.Fatalf("LoadHold = %+v, %v; want a's version 7, live", h, err)
	}
	if m, err := b.LoadMeta(ctx, p); err != nil || m.Hold == nil || m.Hold.Seq != 7 || m.Hold.ETag != "lfb-7-x" || !m.Hold.Live {
		t.Fatalf("LoadMeta's hold = %+v, %v; want a's version 7, live", m.Hold, err)
	}
	if m, err := b.LoadMeta(ctx, "/other"); err != nil || m.Hold != nil {
		t.Fatalf("LoadMeta's hold of a path nobody holds = %+v, %v; want nil", m.Hold, err)
	}
	if err := a.DropHold(ctx, p, ua, 6); err != nil { // not the version held
		t.Fatal(err)
	}
	if err := b.DropHold(ctx, p, ub, -1); err != nil { // not b's
		t.Fatal(err)
	}
	if h, _ := b.LoadHold(ctx, p); h == nil || h.Seq != 7 {
		t.Fatalf("after drops of another version and by another process, LoadHold = %+v; want a's version 7", h)
	}
	if err := a.PutHold(ctx, p, Hold{Owner: ua, Seq: 8, Deleted: true}); err != nil {
		t.Fatal(err)
	}
	if h, _ := b.LoadHold(ctx, p); h == nil || !h.Deleted || h.Seq != 8 {
		t.Fatalf("a pending delete, as b loads it = %+v", h)
	}
	if held, err := a.HeldBy(ctx, ua); err != nil || !slices.Equal(held, []string{p}) {
		t.Fatalf("HeldBy(a) = %v, %v; want [%s]", held, err, p)
	}
	if err := a.DropHold(ctx, p, ua, 8); err != nil {
		t.Fatal(err)
	}
	if h, _ := b.LoadHold(ctx, p); h != nil {
		t.Fatalf("after a dropped its hold, LoadHold = %+v; want nil", h)
	}
	if held, _ := a.HeldBy(ctx, ua); len(held) != 0 {
		t.Fatalf("HeldBy(a) after the drop = %v, want none", held)
	}
	// A holder that is no member any more (it died) still holds, not live.
	if ok, _, _ := a.ClaimHold(ctx, p, ua); !ok {
		t.Fatal("a's claim refused")
	}
	a.Close()
	if h, _ := b.LoadHold(ctx, p); h == nil || h.Live {
		t.Fatalf("the hold of a process that left, as b loads it = %+v; want held, not live", h)
	}
}
