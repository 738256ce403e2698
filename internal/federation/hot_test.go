package federation

import (
	"math"
	"net/netip"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/config"
)

// TestCacheSecondChance: when a full shard must evict, an entry hit
// since it was stored survives and one never hit goes.
func TestCacheSecondChance(t *testing.T) {
	c := newCache(2 * cacheShards) // two entries per shard
	now := time.Now().UnixNano()
	live := now + int64(time.Hour)
	// Three keys of one shard.
	var keys []string
	want := c.shard("/k0")
	for i := 0; len(keys) < 3 && i < 100000; i++ {
		k := "/k" + string(rune('0'+i%10)) + string(rune('a'+i/10%26)) + string(rune('a'+i/260%26))
		if c.shard(k) == want {
			keys = append(keys, k)
		}
	}
	if len(keys) < 3 {
		t.Fatal("no three keys of one shard found")
	}
	old, other, fresh := keys[0], keys[1], keys[2]
	c.put(old, &entry{expires: live}, now)
	c.put(other, &entry{expires: live}, now)
	if c.get(old, now) == nil { // old is now referenced
		t.Fatalf("get(%q) = nil after put", old)
	}
	c.put(fresh, &entry{expires: live}, now)
	if c.get(old, now) == nil {
		t.Errorf("referenced %q was evicted", old)
	}
	if c.get(other, now) != nil {
		t.Errorf("unreferenced %q survived, want it evicted", other)
	}
	if c.get(fresh, now) == nil {
		t.Errorf("new %q not stored", fresh)
	}
}

// TestLinkValueCached: the Link value is made once per replica order and
// shared; another order gets its own; a ranking holding a refreshed
// (copied) replica is not served from the cache.
func TestLinkValueCached(t *testing.T) {
	e := &entry{}
	for i, u := range []string{"http://a/f", "http://b/f", "http://c/f"} {
		e.replicas = append(e.replicas, &replica{url: u, idx: uint8(i)})
	}
	rk := func(order ...int) []ranked {
		var out []ranked
		for _, i := range order {
			out = append(out, ranked{r: e.replicas[i]})
		}
		return out
	}
	v1 := e.linkValue(rk(0, 1, 2))
	v2 := e.linkValue(rk(0, 1, 2))
	if len(v1) != 1 || v1[0] != "<http://a/f>; rel=duplicate; pri=1, <http://b/f>; rel=duplicate; pri=2, <http://c/f>; rel=duplicate; pri=3" {
		t.Fatalf("linkValue(0,1,2) = %q", v1)
	}
	if &v1[0] != &v2[0] {
		t.Error("linkValue of the same order built a new value, want the cached one")
	}
	if v := e.linkValue(rk(2, 0)); len(v) != 1 || v[0] != "<http://c/f>; rel=duplicate; pri=1, <http://a/f>; rel=duplicate; pri=2" {
		t.Errorf("linkValue(2,0) = %q", v)
	}
	refreshed := *e.replicas[1]
	refreshed.url = "http://b/f?sig=new"
	r := rk(1, 0)
	r[0].r = &refreshed
	if v := e.linkValue(r); len(v) != 1 || v[0] != "<http://b/f?sig=new>; rel=duplicate; pri=1, <http://a/f>; rel=duplicate; pri=2" {
		t.Errorf("linkValue with a refreshed URL = %q", v)
	}
	if v := e.linkValue(rk(1, 0)); v[0] != "<http://b/f>; rel=duplicate; pri=1, <http://a/f>; rel=duplicate; pri=2" {
		t.Errorf("linkValue(1,0) after a refreshed ranking = %q, want the entry's own URLs", v)
	}
}

// TestClientLoc: the most specific configured network places the client,
// and distances are those of greatCircleKM, +Inf for unlocated members.
func TestClientLoc(t *testing.T) {
	gva := &member{name: "gva", located: true, lat: 46.23, lon: 6.05}
	nowhere := &member{name: "nowhere"}
	s := &snapshot{members: []*member{gva, nowhere}}
	var err error
	s.nets, err = parseNets([]config.ClientNetwork{
		{Networks: []string{"10.0.0.0/8"}, Location: config.Location{0, 0}},
		{Networks: []string{"10.1.0.0/16"}, Location: config.Location{41.85, -88.27}},
	}, s.members)
	if err != nil {
		t.Fatalf("parseNets = %v", err)
	}
	l := s.locateClient(netip.MustParseAddr("10.1.2.3"))
	if l == nil || l.lat != 41.85 {
		t.Fatalf("locateClient(10.1.2.3) = %+v, want the 10.1.0.0/16 position", l)
	}
	if got, want := l.distTo(gva), greatCircleKM(41.85, -88.27, 46.23, 6.05); got != want {
		t.Errorf("distTo(gva) = %v, want %v", got, want)
	}
	if got := l.distTo(nowhere); !math.IsInf(got, 1) {
		t.Errorf("distTo(unlocated) = %v, want +Inf", got)
	}
	if l := s.locateClient(netip.MustParseAddr("192.0.2.1")); l != nil {
		t.Errorf("locateClient(192.0.2.1) = %+v, want nil", l)
	}
}
