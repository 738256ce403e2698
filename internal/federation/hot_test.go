package federation

import (
	"math"
	"net/netip"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/config"
	"github.com/lakefed/lakefed/internal/endpoint"
)

// TestCacheSecondChance: when a full shard must evict, an entry hit
// since it was stored survives and one never hit goes.
func TestCacheSecondChance(t *testing.T) {
	c := newCache(2*cacheShards, testHot, nil) // two entries per shard
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

// TestLinkValueCached: the Link value and the Location are made once
// per replica order and shared; another order gets its own; a ranking
// holding a refreshed (copied) replica is not served from the cache; a
// proxied first replica has no Location. Replicas whose URL is their
// member's base and their path (a, c) keep no copy of it.
func TestLinkValueCached(t *testing.T) {
	e := &entry{}
	ma, mb, mc, mp := &member{name: "a"}, &member{name: "b"}, &member{name: "c"}, &member{name: "p"}
	for i, x := range []struct {
		m   *member
		url string
	}{{ma, "http://a/f"}, {mb, "http://b/f?sig=1"}, {mc, "http://c/f"}, {mp, ""}} {
		r := newReplica(x.m, "/f", endpoint.Info{Size: 1}, x.url, 0)
		r.idx = uint8(i)
		e.replicas = append(e.replicas, r)
	}
	for i, derived := range []bool{true, false, true, false} {
		if r := e.replicas[i]; r.derived != derived || (derived && r.loc[0] != "") {
			t.Fatalf("replica %s: derived = %v, loc %q; want derived %v", r.m.name, r.derived, r.loc[0], derived)
		}
	}
	rk := func(order ...int) []ranked {
		var out []ranked
		for _, i := range order {
			out = append(out, ranked{r: e.replicas[i]})
		}
		return out
	}
	v1, l1 := e.linkValue(rk(0, 1, 2))
	v2, l2 := e.linkValue(rk(0, 1, 2))
	if len(v1) != 1 || v1[0] != "<http://a/f>; rel=duplicate; pri=1, <http://b/f?sig=1>; rel=duplicate; pri=2, <http://c/f>; rel=duplicate; pri=3" {
		t.Fatalf("linkValue(0,1,2) = %q", v1)
	}
	if len(l1) != 1 || l1[0] != "http://a/f" {
		t.Errorf("Location of (0,1,2) = %q, want http://a/f", l1)
	}
	if &v1[0] != &v2[0] || &l1[0] != &l2[0] {
		t.Error("linkValue of the same order built new values, want the cached ones")
	}
	if v, l := e.linkValue(rk(2, 0)); len(v) != 1 || v[0] != "<http://c/f>; rel=duplicate; pri=1, <http://a/f>; rel=duplicate; pri=2" || l[0] != "http://c/f" {
		t.Errorf("linkValue(2,0) = %q, %q", v, l)
	}
	if v, l := e.linkValue(rk(3, 2)); len(v) != 1 || v[0] != "<http://c/f>; rel=duplicate; pri=1" || l != nil {
		t.Errorf("linkValue(3,2) = %q, %q; want c alone and no Location (3 is proxied)", v, l)
	}
	refreshed := *e.replicas[1]
	refreshed.loc[0] = "http://b/f?sig=new"
	r := rk(1, 0)
	r[0].r = &refreshed
	if v, l := e.linkValue(r); len(v) != 1 || v[0] != "<http://b/f?sig=new>; rel=duplicate; pri=1, <http://a/f>; rel=duplicate; pri=2" || l[0] != "http://b/f?sig=new" {
		t.Errorf("linkValue with a refreshed URL = %q, %q", v, l)
	}
	if v, l := e.linkValue(rk(1, 0)); v[0] != "<http://b/f?sig=1>; rel=duplicate; pri=1, <http://a/f>; rel=duplicate; pri=2" || l[0] != "http://b/f?sig=1" {
		t.Errorf("linkValue(1,0) after a refreshed ranking = %q, %q, want the entry's own URLs", v, l)
	}
}

// TestReplicaURL: a replica keeps its URL unless it is its member's base
// (learned from the first URL that ends with its path) followed by its
// path; url gives it back either way.
func TestReplicaURL(t *testing.T) {
	m := &member{name: "a"}
	for _, c := range []struct {
		p, url  string
		derived bool
	}{
		{"/d/f1", "http://a:1/base/d/f1", true}, // learns http://a:1/base
		{"/d/f2", "http://a:1/base/d/f2", true},
		{"/d/f 3", "http://a:1/base/d/f%203", false}, // escaped: kept
		{"/d/f4", "http://other/d/f4", false},
		{"/d/f5", "http://a:1/base/d/f5?sig=x", false},
		{"/d/f6", "", false},
	} {
		r := newReplica(m, c.p, endpoint.Info{}, c.url, 0)
		if r.derived != c.derived || r.url() != c.url || r.urlLen() != len(c.url) || r.redirectable() != (c.url != "") {
			t.Errorf("newReplica(%q, %q): derived %v, url() %q, urlLen %d, redirectable %v; want derived %v",
				c.p, c.url, r.derived, r.url(), r.urlLen(), r.redirectable(), c.derived)
		}
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

// TestCacheHotBound: metadata_cache.hot bounds the entries each shard
// keeps unpacked, a share of it a shard, and never less than one.
func TestCacheHotBound(t *testing.T) {
	for _, tc := range []struct{ max, hot, want int }{
		{100000, 16384, 256},
		{100000, 64 * cacheShards, 64},
		{100000, 1, 1},
		{64, 16384, 1}, // never more than a shard holds
	} {
		if got := newCache(tc.max, tc.hot, nil).hotMax; got != tc.want {
			t.Errorf("max_entries %d, hot %d: a shard keeps %d unpacked, want %d", tc.max, tc.hot, got, tc.want)
		}
	}
}
