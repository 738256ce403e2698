package federation

import (
	"maps"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/config"
	"github.com/lakefed/lakefed/internal/endpoint"
)

// storageETag is the tag lakefed's storage role gives a file
// (storage.appendETag).
func storageETag(mod time.Time, size, ino int64, ctime time.Time) string {
	return strconv.FormatInt(mod.UnixNano(), 16) + strconv.FormatInt(size, 16) + "-" +
		strconv.FormatInt(ino, 16) + "-" + strconv.FormatInt(ctime.UnixNano(), 16)
}

// TestPackedEntry: an entry the cache packs comes back as the look-up
// made it (but for its answers' errors and times, which only 404 and
// 503 bodies show); one it cannot pack is kept whole.
func TestPackedEntry(t *testing.T) {
	mod := time.Date(2026, 11, 26, 4, 6, 11, 123456789, time.UTC)
	sec := mod.Truncate(time.Second)
	a := &member{name: "a", prefix: "/", path: "/"}
	b := &member{name: "b", prefix: "/", path: "/"}
	s3 := &member{name: "s3", prefix: "/", path: "/", presign: time.Hour}
	mapped := &member{name: "mapped", prefix: "/atlas", path: "/pnfs/atlas"}
	up := &member{name: "up", prefix: "/", path: "/", upstream: true}
	stranger := &member{name: "stranger", prefix: "/", path: "/"}
	members := []*member{a, b, s3, mapped, up}
	// Each member learns its URL base from a first URL.
	for _, m := range []*member{a, b, mapped, up} {
		m.derives("http://"+m.name+":1/base/x", "/x")
	}
	type rep struct {
		m   *member
		in  endpoint.Info
		url string
	}
	now := time.Now().UnixNano()
	mk := func(p string, reps []rep, answers []answer, tweak func(*entry)) *entry {
		e := &entry{status: http.StatusOK, expires: now + int64(time.Hour), answers: answers}
		for _, x := range reps {
			url := x.url
			if url == "derive" {
				url = *x.m.urlBase.Load() + x.m.endpointPath(p)
			}
			if x.in.Name == "" {
				x.in.Name = path.Base(x.m.endpointPath(p))
			}
			e.replicas = append(e.replicas, newReplica(x.m, p, x.in, url, now-5))
			if answers == nil {
				e.answers = append(e.answers, answer{m: x.m, kind: ansFound, us: 12})
			}
		}
		if len(e.replicas) > 0 {
			e.isDir, e.size = e.replicas[0].ver.isDir, e.replicas[0].ver.size
		}
		for i, r := range e.replicas {
			r.idx = uint8(i)
			r.learned.e = e
		}
		if tweak != nil {
			tweak(e)
		}
		if e.isDir {
			e.size = 0
		}
		e.setHeaders()
		return e
	}
	// file is a file's Info; mk names it after its path.
	file := func(size int64, mt time.Time, tag string) endpoint.Info {
		return endpoint.Info{Size: size, ModTime: mt, ETag: tag, Strong: true}
	}
	for _, c := range []struct {
		name string
		p    string
		e    *entry
		fat  bool
	}{
		{"storage role, three sites", "/atlas/data/f", mk("/atlas/data/f", []rep{
			{a, file(22, sec, storageETag(mod, 22, 0x1a2b3c, mod)), "derive"},
			{b, file(22, sec.Add(time.Hour), storageETag(mod.Add(time.Hour), 22, 0x77, mod.Add(time.Hour+time.Millisecond))), "derive"},
			{mapped, file(22, sec.Add(-time.Hour), storageETag(mod.Add(-time.Hour), 22, 0x1, mod)), "derive"},
		}, nil, nil), false},
		{"nginx, a proxied replica", "/atlas/f", mk("/atlas/f", []rep{
			{mapped, file(1<<40, sec, strconv.FormatInt(sec.Unix(), 16)+"-"+strconv.FormatInt(1<<40, 16)), "derive"},
			{b, file(1<<40, sec, "0"), ""},
		}, nil, nil), false},
		{"S3: digest tags, a pre-signed URL", "/f", mk("/f", []rep{
			{s3, endpoint.Info{Size: 5, ModTime: mod, ETag: "9e107d9d372bb6826bd81d3542a419d6", Checksums: map[string]string{"md5": "9e107d9d372bb6826bd81d3542a419d6"}}, "https://s3/b/f?X-Amz-Signature=abc"},
			{a, file(5, mod, "0009e107d9d372bb6826bd81d3542a419d6-3"), "http://elsewhere/f"},
		}, nil, func(e *entry) {
			e.sums.Store(&map[string]string{"md5": "9e107d9d372bb6826bd81d3542a419d6", "adler32": "0a0b0c0d"})
		}), false},
		{"every site has the same checksum", "/c", mk("/c", []rep{
			{a, endpoint.Info{Size: 5, ModTime: sec, Checksums: map[string]string{"adler32": "0a0b0c0d"}}, "derive"},
			{b, endpoint.Info{Size: 5, ModTime: sec, Checksums: map[string]string{"adler32": "0a0b0c0d"}}, "derive"},
		}, nil, func(e *entry) { e.sums.Store(&map[string]string{"adler32": "0a0b0c0d"}) }), false},
		{"odd tags", "/g", mk("/g", []rep{
			{a, file(3, time.Time{}, `W/"x"`), "derive"},
			{b, endpoint.Info{Size: 4, ModTime: time.Unix(0, 1), ETag: "\x01ABC-" + strings.Repeat("f", 300) + "-\xff"}, "derive"},
			{up, file(3, mod, "abc"), "derive"},
		}, nil, nil), false},
		{"some did not answer", "/h", mk("/h", []rep{
			{b, file(7, mod, ""), "derive"},
		}, []answer{{m: a, kind: ansNotFound, err: "not found", us: 3}, {m: b, kind: ansFound}, {m: s3, kind: ansDown}, {m: up, kind: ansHopLimit}},
			func(e *entry) { e.incomplete, e.epoch, e.shared = true, 42, true }), false},
		{"through an upstream", "/u", mk("/u", []rep{{up, file(1, mod, "t"), "derive"}}, nil, func(e *entry) { e.viaUpstream = true }), false},
		{"a directory", "/data", mk("/data", []rep{
			{a, endpoint.Info{IsDir: true, ModTime: sec}, "derive"},
		}, nil, func(e *entry) { e.isDir = true }), false},
		{"a virtual directory", "/", mk("/", nil, nil, func(e *entry) { e.isDir = true }), false},
		{"a member the cache does not know", "/s", mk("/s", []rep{{stranger, file(1, mod, "t"), ""}}, nil, nil), true},
		{"a posix kind's owner", "/p", mk("/p", []rep{{a, endpoint.Info{Size: 1, Owner: "alice"}, "derive"}}, nil, nil), true},
		{"a learned checksum", "/l", mk("/l", []rep{{a, file(1, mod, "t"), "derive"}}, nil, func(e *entry) { e.replicas[0].learn("adler32", "01020304") }), true},
		{"not found", "/n", &entry{status: http.StatusNotFound, negative: true, expires: now + int64(time.Second),
			answers: []answer{{m: a, kind: ansNotFound, err: "not found", us: 5}}}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			cache := newCache(1000, testHot, members)
			cache.put(c.p, c.e, now)
			got := cache.get(c.p, now)
			if got == nil {
				t.Fatalf("get(%q) = nil after put", c.p)
			}
			if c.fat {
				if got != c.e {
					t.Fatalf("get(%q) gave a copy of an entry that cannot be packed", c.p)
				}
				return
			}
			if got == c.e {
				t.Fatalf("get(%q) gave the entry put, want it packed", c.p)
			}
			checkSameEntry(t, got, c.e)
			if again := cache.get(c.p, now); again != got {
				t.Errorf("second get(%q) unpacked again, want the entry kept", c.p)
			}
		})
	}
}

// checkSameEntry fails unless got, unpacked, is what want was for its
// readers.
func checkSameEntry(t *testing.T, got, want *entry) {
	t.Helper()
	if got.expires != want.expires || got.status != want.status || got.negative != want.negative || got.pending != want.pending ||
		got.viaUpstream != want.viaUpstream || got.shared != want.shared || got.incomplete != want.incomplete ||
		got.isDir != want.isDir || got.size != want.size || got.hdr != want.hdr || (want.incomplete && got.epoch != want.epoch) {
		t.Errorf("entry = %+v, want %+v", got, want)
	}
	var gs, ws map[string]string
	if p := got.sums.Load(); p != nil {
		gs = *p
	}
	if p := want.sums.Load(); p != nil {
		ws = *p
	}
	if !maps.Equal(gs, ws) {
		t.Errorf("sums = %v, want %v", gs, ws)
	}
	if len(got.answers) != len(want.answers) {
		t.Fatalf("%d answers, want %d", len(got.answers), len(want.answers))
	}
	for i, a := range got.answers {
		if w := want.answers[i]; a.m != w.m || a.kind != w.kind {
			t.Errorf("answer %d = %s %s, want %s %s", i, a.m.name, a.kind, w.m.name, w.kind)
		}
	}
	if len(got.replicas) != len(want.replicas) {
		t.Fatalf("%d replicas, want %d", len(got.replicas), len(want.replicas))
	}
	for i, r := range got.replicas {
		w := want.replicas[i]
		if r.m != w.m || r.path != w.path || r.idx != w.idx || r.derived != w.derived || r.loc != w.loc || r.url() != w.url() ||
			(r.m.presign != 0 && r.born != w.born) || r.learned == nil || r.learned.e != got {
			t.Errorf("replica %d = %+v, want %+v", i, r, w)
		}
		gv, wv := r.ver, w.ver
		if gv.size != wv.size || gv.mod != wv.mod || gv.hasMod != wv.hasMod || gv.etag != wv.etag || gv.isDir != wv.isDir ||
			gv.strong != wv.strong || !maps.Equal(gv.sums, wv.sums) || gv.more != nil {
			t.Errorf("replica %d version = %+v, want %+v", i, gv, wv)
		}
	}
}

// TestPackedETag: every tag comes back as it was, and the tags of
// lakefed's storage role and nginx take a fraction of their length.
func TestPackedETag(t *testing.T) {
	mod := time.Date(2026, 11, 26, 4, 6, 11, 123456789, time.UTC)
	sec := mod.Truncate(time.Second)
	for _, c := range []struct {
		tag     string
		mod     time.Time
		size    int64
		maxSize int // of the packed tag, with its length; 0: no bound
	}{
		{storageETag(mod, 22, 0x1a2b3c, mod.Add(time.Microsecond)), sec, 22, 18},
		{storageETag(mod, 22, 0x1a2b3c, mod), mod, 22, 14},
		{strconv.FormatInt(sec.Unix(), 16) + "-16", sec, 22, 4},
		{"9e107d9d372bb6826bd81d3542a419d6", mod, 1, 19},
		{"", mod, 0, 0},
		{"0", time.Time{}, 0, 0},
		{"00", time.Time{}, 0, 0},
		{"0a1", mod, 10, 0},
		{"abc", time.Unix(0, 0xabc), 0, 0},
		{"ffffffffffffffff", mod, 0, 0},
		{"8000000000000000", mod, 0, 0},
		{"7fffffffffffffff0", mod, 0, 0},
		{strings.Repeat("0123456789abcdef", 20), mod, 0, 0},
		{"W/\"x\"", mod, 0, 0},
		{"\x00\x01\x07\x08\x1f\x20\x7f\x80\xff", mod, 0, 0},
		{"-1-", time.Unix(-5, 0), -1, 0},
		{"DEADBEEF", mod, 0, 0},
		{strconv.FormatInt(time.Unix(-1, 5).UnixNano(), 16), time.Unix(-1, 5), 0, 0},
	} {
		v := newVersion(endpoint.Info{ETag: c.tag, ModTime: c.mod, Size: c.size}, "/f")
		if c.tag == "" {
			continue
		}
		b := packETag(nil, c.tag, &v)
		u := unpacker{d: string(b)}
		if got := u.etag(&v); got != `"`+c.tag+`"` || u.i != len(b) {
			t.Errorf("packETag(%q) came back as %q (read %d of %d bytes)", c.tag, got, u.i, len(b))
		}
		if c.maxSize > 0 && len(b) > c.maxSize {
			t.Errorf("packETag(%q) took %d bytes, want at most %d", c.tag, len(b), c.maxSize)
		}
	}
}

// FuzzPackedETag: any tag, of any version, comes back as it was.
func FuzzPackedETag(f *testing.F) {
	f.Add("18e91efd632f4d1516-1a2b3c-18e91efd632f7d4e", int64(1795000000000000000), int64(22))
	f.Add("6745abcd-16", int64(1795000000000000000), int64(22))
	f.Add("0a0b", int64(0), int64(-1))
	f.Fuzz(func(t *testing.T, tag string, mod, size int64) {
		if tag == "" {
			return
		}
		v := version{etag: `"` + tag + `"`, mod: mod, hasMod: mod != 0, size: size}
		b := packETag(nil, tag, &v)
		u := unpacker{d: string(b)}
		if got := u.etag(&v); got != v.etag || u.i != len(b) {
			t.Fatalf("packETag(%q) came back as %q", tag, got)
		}
	})
}

// TestCacheKeepsHot: the cache keeps at most hotPerShard unpacked
// entries a shard, the ones hit again first; an entry that learned a
// checksum is kept whole whatever the bound.
func TestCacheKeepsHot(t *testing.T) {
	a := &member{name: "a", prefix: "/", path: "/"}
	c := newCache(100000, testHot, []*member{a})
	now := time.Now().UnixNano()
	s := c.shard("/k0")
	var keys []string
	for i := 0; len(keys) < hotPerShard+2; i++ {
		if k := "/k" + strconv.Itoa(i); c.shard(k) == s {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		e := &entry{status: http.StatusOK, expires: now + int64(time.Hour)}
		e.replicas = []*replica{newReplica(a, k, endpoint.Info{Name: path.Base(k), Size: 1}, "", 0)}
		e.answers = []answer{{m: a, kind: ansFound}}
		c.put(k, e, now)
	}
	first := c.get(keys[0], now)
	for _, k := range keys[1:hotPerShard] {
		c.get(k, now)
	}
	if c.get(keys[0], now) != first {
		t.Fatalf("a kept entry was dropped before the bound")
	}
	first.sums.Store(&map[string]string{"adler32": "01020304"})
	first.keep()
	// More unpacked entries than the bound: every other one goes.
	for _, k := range keys[hotPerShard:] {
		c.get(k, now)
		c.get(k, now)
	}
	kept := 0
	for i := range s.n {
		if s.slot(i).hot != nil {
			kept++
		}
	}

	if kept > hotPerShard+1 {
		t.Errorf("the shard keeps %d unpacked entries, want at most %d and the pinned one", kept, hotPerShard)
	}
	if got := c.get(keys[0], now); got != first {
		t.Errorf("an entry that learned a checksum was dropped")
	}
}

// TestCacheConcurrent: gets, puts, replacements, invalidations and
// learned checksums of a few paths at once, in a cache small enough to
// evict, never hand out one path's entry for another (run it with
// -race).
func TestCacheConcurrent(t *testing.T) {
	a := &member{name: "a", prefix: "/", path: "/"}
	c := newCache(2*cacheShards, testHot, []*member{a})
	c.hotMax = 1
	mk := func(k string) *entry {
		e := &entry{status: http.StatusOK, expires: time.Now().Add(time.Hour).UnixNano(), size: 1}
		e.replicas = []*replica{newReplica(a, k, endpoint.Info{Name: path.Base(k), Size: 1}, "", 0)}
		e.replicas[0].learned.e = e
		e.answers = []answer{{m: a, kind: ansFound}}
		e.setHeaders()
		return e
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				k := "/f" + strconv.Itoa((i*7+g)%300)
				now := time.Now().UnixNano()
				switch i % 6 {
				case 0:
					c.put(k, mk(k), now)
				case 1:
					if old := c.get(k, now); old != nil {
						c.replace(k, old, mk(k))
					}
				case 2:
					c.invalidate(k, time.Duration(i%2)*time.Hour)
				case 3:
					if e := c.get(k, now); e != nil {
						e.replicas[0].learn("adler32", "01020304")
					}
				default:
					if e := c.get(k, now); e != nil && e.replicas[0].path != k {
						t.Errorf("get(%q) = the entry of %q", k, e.replicas[0].path)
					}
				}
			}
		})
	}
	wg.Wait()
}

// testHot is the default bound of unpacked entries, hotPerShard a
// shard.
const (
	testHot     = config.DefaultHotEntries
	hotPerShard = testHot / cacheShards
)
