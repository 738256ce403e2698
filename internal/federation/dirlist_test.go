package federation

import (
	"context"
	"fmt"
	"hash/maphash"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/testenv"
)

// lookupAnswer is what a HEAD of the federator says of a path, replicas
// as a set (their order follows recent latency).
type lookupAnswer struct {
	status          int
	size, etag, mod string
	replicas        []string
}

func headAnswer(t *testing.T, tf *testFed, p string) lookupAnswer {
	t.Helper()
	resp, _ := tf.do(t, "HEAD", p, nil, nil)
	a := lookupAnswer{status: resp.StatusCode, size: resp.Header.Get("Content-Length"),
		etag: resp.Header.Get("ETag"), mod: resp.Header.Get("Last-Modified")}
	for _, l := range strings.Split(resp.Header.Get("Link"), ",") {
		if u, _, ok := strings.Cut(strings.TrimSpace(l), ";"); ok {
			a.replicas = append(a.replicas, u)
		}
	}
	slices.Sort(a.replicas)
	return a
}

func (a lookupAnswer) String() string {
	return fmt.Sprintf("%d size %s etag %s mod %s replicas %q", a.status, a.size, a.etag, a.mod, a.replicas)
}

// equal compares two answers; the body of an error (its size) says
// what each endpoint answered, in words that differ.
func (a lookupAnswer) equal(b lookupAnswer) bool {
	return a.status == b.status && (a.status != http.StatusOK || a.size == b.size) && a.etag == b.etag && a.mod == b.mod && slices.Equal(a.replicas, b.replicas)
}

// listingReq is how site.count names a PROPFIND of depth 1.
const listingReq = "PROPFIND depth 1"

// counts returns each site's count of method.
func counts(method string, sites ...*site) []int {
	var n []int
	for _, s := range sites {
		n = append(n, s.count(method))
	}
	return n
}

// TestListingAnswersColdLookups: the cold look-ups of every file of a
// directory reach each storage role with one PROPFIND and no HEAD, and
// answer what Stat would have: files on some sites only, on one only, on
// none.
func TestListingAnswersColdLookups(t *testing.T) {
	a, b, c := startSite(t, "site-a"), startSite(t, "site-b"), startSite(t, "site-c")
	var paths []string
	for i := range 20 {
		p := fmt.Sprintf("/run/d/f%02d.root", i)
		paths = append(paths, p)
		a.write(t, p, []byte(p))
		if i%2 == 0 {
			b.write(t, p, []byte(p))
		}
		if i != 3 {
			c.write(t, p, []byte(p))
		}
	}
	b.write(t, "/run/d/only-b", []byte("b"))
	c.write(t, "/run/d/sub/x", []byte("x"))
	paths = append(paths, "/run/d/only-b", "/run/d/nowhere", "/run/d/sub")

	tf := realFed(t, "metadata_cache: {list_after: 1}", a, b, c)
	got := map[string]lookupAnswer{}
	for _, p := range paths {
		got[p] = headAnswer(t, tf, p)
	}
	sites := []*site{a, b, c}
	if n := counts(listingReq, sites...); !slices.Equal(n, []int{1, 1, 1}) {
		t.Errorf("PROPFINDs by site = %v, want one each", n)
	}
	// A site is asked with Stat only for what its listing does not say
	// is a file there: a name it lacks (which may have been written at
	// the site since), and the directory /run/d/sub, the one entry a
	// listing is unsure of. site-a lacks only-b, nowhere and sub; site-b
	// the ten odd files, nowhere and sub; site-c f03, only-b and nowhere,
	// and has sub.
	if n := counts("HEAD", sites...); !slices.Equal(n, []int{3, 12, 4}) {
		t.Errorf("HEADs by site = %v, want [3 12 4]: one for each name a listing lacks, and the directory", n)
	}

	// The same look-ups through a federator that never lists.
	ref := realFed(t, "metadata_cache: {list_after: -1}", a, b, c)
	for _, p := range paths {
		if want := headAnswer(t, ref, p); !got[p].equal(want) {
			t.Errorf("HEAD %s from listings = %v; from Stat %v", p, got[p], want)
		}
	}
	if g := got["/run/d/nowhere"]; g.status != http.StatusNotFound {
		t.Errorf("HEAD of a file on no site = %v, want 404", g)
	}
	if g := got["/run/d/only-b"]; g.status != http.StatusOK || len(g.replicas) != 1 || !strings.Contains(g.replicas[0], b.addr) {
		t.Errorf("HEAD of a file on site-b only = %v, want 200 with site-b alone", g)
	}
}

// TestListingAfterSecondMiss: with list_after 2 a single file read
// alone is asked with a HEAD per site, as before; the second new path of
// its directory lists it, and the rest are answered from the listing.
func TestListingAfterSecondMiss(t *testing.T) {
	a, b := startSite(t, "site-a"), startSite(t, "site-b")
	for i := range 10 {
		p := fmt.Sprintf("/d/f%d", i)
		a.write(t, p, []byte(p))
		b.write(t, p, []byte(p))
	}
	tf := realFed(t, "metadata_cache: {list_after: 2}", a, b)
	if g := headAnswer(t, tf, "/d/f0"); g.status != http.StatusOK {
		t.Fatalf("HEAD /d/f0 = %v", g)
	}
	if h, l := counts("HEAD", a, b), counts(listingReq, a, b); !slices.Equal(h, []int{1, 1}) || !slices.Equal(l, []int{0, 0}) {
		t.Errorf("one look-up: HEADs %v, PROPFINDs %v; want one HEAD each, no PROPFIND", h, l)
	}
	for i := 1; i < 10; i++ {
		if g := headAnswer(t, tf, fmt.Sprintf("/d/f%d", i)); g.status != http.StatusOK || len(g.replicas) != 2 {
			t.Fatalf("HEAD /d/f%d = %v", i, g)
		}
	}
	if h, l := counts("HEAD", a, b), counts(listingReq, a, b); !slices.Equal(h, []int{1, 1}) || !slices.Equal(l, []int{1, 1}) {
		t.Errorf("ten look-ups: HEADs %v, PROPFINDs %v; want one of each on each site", h, l)
	}
}

// TestListingNotForNginx: nginx's PROPFIND has no ETag, so its listing
// is not what its HEAD says: it is asked a HEAD per path while the
// storage role beside it is listed.
func TestListingNotForNginx(t *testing.T) {
	ng := testenv.StartNginx(t)
	a := startSite(t, "site-a")
	for i := range 10 {
		p := fmt.Sprintf("/d/f%d", i)
		a.write(t, p, []byte(p))
		full := filepath.Join(ng.Dir, "d", fmt.Sprintf("f%d", i))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Count nginx's requests on their way to it.
	var mu sync.Mutex
	ngReqs := map[string]int{}
	target, err := url.Parse(ng.URL)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		ngReqs[r.Method]++
		mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	tf := startFed(t, cfgYAML("health: {interval: 1h}\nmetadata_cache: {list_after: 1}",
		fmt.Sprintf("name: site-a\nurl: %s\npriority: 1", a.url()),
		fmt.Sprintf("name: nginx\nurl: %s/\npriority: 2", front.URL)))
	for i := range 10 {
		if g := headAnswer(t, tf, fmt.Sprintf("/d/f%d", i)); g.status != http.StatusOK || len(g.replicas) != 2 {
			t.Fatalf("HEAD /d/f%d = %v, want both sites", i, g)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if ngReqs["HEAD"] != 10 || ngReqs["PROPFIND"] > 1 {
		t.Errorf("nginx got %d HEADs and %d PROPFINDs, want 10 and at most 1 (that tells it apart)", ngReqs["HEAD"], ngReqs["PROPFIND"])
	}
	if h, l := a.count("HEAD"), a.count(listingReq); h != 0 || l != 1 {
		t.Errorf("the storage role got %d HEADs and %d PROPFINDs, want 0 and 1", h, l)
	}
}

// TestListingOlderThanAWrite: a file written through the federator while
// a listing of its directory is on its way is never answered from that
// listing afterwards.
func TestListingOlderThanAWrite(t *testing.T) {
	a := startSite(t, "site-a")
	a.write(t, "/d/f", []byte("old"))
	a.write(t, "/d/g", []byte("g"))
	tf := realFed(t, "metadata_cache: {list_after: 1}", a)
	listed, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	a.serveAround(func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		if r.Method != "PROPFIND" {
			next.ServeHTTP(w, r)
			return
		}
		// The listing as the directory is now, delivered after the
		// write below.
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		once.Do(func() {
			close(listed)
			<-release
		})
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
	})
	done := make(chan int)
	go func() {
		req, _ := http.NewRequest("HEAD", tf.srv.URL+"/d/g", nil)
		resp, err := noFollow.Do(req)
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	select {
	case <-listed:
	case code := <-done:
		t.Fatalf("HEAD /d/g = %d without listing /d", code)
	}
	const fresh = "new, and longer"
	if resp, body := tf.do(t, "PUT", "/d/f", nil, strings.NewReader(fresh)); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("PUT /d/f = %d %s", resp.StatusCode, body)
	}
	close(release)
	if code := <-done; code != http.StatusOK {
		t.Fatalf("HEAD /d/g = %d", code)
	}
	if a.count(listingReq) != 1 {
		t.Fatalf("PROPFINDs = %d, want the one listing", a.count(listingReq))
	}
	if g := headAnswer(t, tf, "/d/f"); g.status != http.StatusOK || g.size != fmt.Sprint(len(fresh)) {
		t.Errorf("HEAD /d/f after the write = %v, want the new version (%d bytes)", g, len(fresh))
	}
}

// TestListingFailureFallsBackToStat: a listing that fails, arrives cut
// short or is over list_max_entries answers nothing: each path is asked
// with Stat, and the listing is not asked again at once.
func TestListingFailureFallsBackToStat(t *testing.T) {
	for _, tc := range []struct {
		name   string
		config string
		around func(w http.ResponseWriter, r *http.Request, next http.Handler)
	}{
		{"error", "metadata_cache: {list_after: 1}", func(w http.ResponseWriter, r *http.Request, next http.Handler) {
			if r.Method == "PROPFIND" {
				http.Error(w, "busy", http.StatusServiceUnavailable)
				return
			}
			next.ServeHTTP(w, r)
		}},
		{"truncated", "metadata_cache: {list_after: 1}", func(w http.ResponseWriter, r *http.Request, next http.Handler) {
			if r.Method != "PROPFIND" {
				next.ServeHTTP(w, r)
				return
			}
			rec := httptest.NewRecorder()
			next.ServeHTTP(rec, r)
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.Header().Del("Content-Length")
			w.WriteHeader(rec.Code)
			body := rec.Body.Bytes()
			w.Write(body[:len(body)/2])
			w.(http.Flusher).Flush() // the client has the answer's start
			panic(http.ErrAbortHandler)
		}},
		{"too large", "metadata_cache: {list_after: 1, list_max_entries: 5}", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := startSite(t, "site-a")
			for i := range 10 {
				a.write(t, fmt.Sprintf("/d/f%d", i), []byte("data"))
			}
			if tc.around != nil {
				a.serveAround(tc.around)
			}
			tf := realFed(t, tc.config, a)
			for i := range 10 {
				if g := headAnswer(t, tf, fmt.Sprintf("/d/f%d", i)); g.status != http.StatusOK || g.size != "4" {
					t.Fatalf("HEAD /d/f%d = %v", i, g)
				}
			}
			if g := headAnswer(t, tf, "/d/nowhere"); g.status != http.StatusNotFound {
				t.Errorf("HEAD /d/nowhere = %v, want 404", g)
			}
			if h, l := a.count("HEAD"), a.count(listingReq); h != 11 || l != 1 {
				t.Errorf("HEADs %d, PROPFINDs %d; want 11 and the one that failed", h, l)
			}
		})
	}
}

// TestListingOlderThanAnotherFederatorsWrite: federator A answers from a
// listing taken before federator B's write while B's invalidation is on
// its way to A (B has not acknowledged its write yet), but that answer
// must not reach the second level, where B and every other federator
// would find it after the write.
func TestListingOlderThanAnotherFederatorsWrite(t *testing.T) {
	s := startSite(t, "site-a")
	s.write(t, "/d/f", []byte("old"))
	s.write(t, "/d/g", []byte("g"))
	arrived, release := make(chan struct{}), make(chan struct{})
	var armed atomic.Bool
	hold := func(i int, paths []string) {
		if i == 0 && armed.CompareAndSwap(true, false) {
			close(arrived)
			<-release
		}
	}
	feds := sharedRealFeds(t, 2, cfgYAML(slowHealth+"\nmetadata_cache: {list_after: 1}",
		fmt.Sprintf("name: site-a\nurl: %s\nwritable: true", s.url())), hold)
	fa, fb := feds[0], feds[1]
	size := func(f *Federator) int64 {
		e := f.lookup(t.Context(), f.snap.Load(), "/d/f", 0)
		if e.status != http.StatusOK {
			t.Fatalf("lookup /d/f = %d", e.status)
		}
		return e.size
	}
	if e := fa.lookup(t.Context(), fa.snap.Load(), "/d/g", 0); e.status != http.StatusOK || s.count(listingReq) != 1 {
		t.Fatalf("lookup /d/g = %d after %d listings, want 200 from one", e.status, s.count(listingReq))
	}

	armed.Store(true)
	const fresh = "new, and longer"
	wrote := make(chan error, 1)
	go func() {
		_, err := fb.Put(context.Background(), "/d/f", strings.NewReader(fresh), int64(len(fresh)), WriteOptions{})
		wrote <- err
	}()
	<-arrived
	// B's write is on the site and its versions bumped in Redis, but A
	// has not dropped the path yet: A answers from its listing, as it
	// would have a moment before. That answer is older than the write.
	if got := size(fa); got != 3 {
		t.Fatalf("A's look-up while B's write is unacknowledged: size %d, want the listing's 3", got)
	}
	close(release)
	if err := <-wrote; err != nil {
		t.Fatalf("B's PUT = %v", err)
	}
	for i, f := range feds {
		if got := size(f); got != int64(len(fresh)) {
			t.Errorf("federator %d after B's write: size %d, want %d", i, got, len(fresh))
		}
	}
}

// sharedRealFeds starts n federators over real endpoints, sharing state
// through one Redis; onInval(i, paths) runs before federator i drops
// paths another one wrote.
func sharedRealFeds(t *testing.T, n int, yamlText string, onInval func(i int, paths []string)) []*Federator {
	t.Helper()
	return sharedFedsWith(t, n, yamlText, nil, 5*time.Second, onInval)
}

// TestListedAnswerExpiresAsItsListing: an entry made from a listing
// expires when one made by a Stat at the time of the listing would, not
// a full TTL after it was used; a name the listing lacks is no answer of
// the listing's at all.
func TestListedAnswerExpiresAsItsListing(t *testing.T) {
	a := startSite(t, "site-a")
	a.write(t, "/d/f", []byte("f"))
	tf := realFed(t, "metadata_cache: {list_after: 1, ttl: 1h, negative_ttl: 30m}", a)
	s := tf.snap.Load()
	found := tf.lookup(t.Context(), s, "/d/f", 0)
	missing := tf.lookup(t.Context(), s, "/d/nowhere", 0)
	l := s.dirs.current(dirKey{s.members[0], "/d"}, time.Now().UnixNano())
	if l == nil || a.count(listingReq) != 1 {
		t.Fatalf("no listing of /d kept (%d listings)", a.count(listingReq))
	}
	if found.status != http.StatusOK || found.expires != l.taken+int64(time.Hour) {
		t.Errorf("found: %d, expires %d after the listing, want 200 and ttl (%d)", found.status, found.expires-l.taken, int64(time.Hour))
	}
	// A name the listing lacks is asked with Stat, whose 404 expires
	// negative_ttl after it was asked, after the listing.
	if missing.status != http.StatusNotFound || a.count("HEAD") != 1 || missing.expires < l.taken+int64(30*time.Minute) {
		t.Errorf("missing: %d, %d HEADs, expires %d after the listing, want 404 from one HEAD, at least negative_ttl (%d)",
			missing.status, a.count("HEAD"), missing.expires-l.taken, int64(30*time.Minute))
	}
}

// TestWrittenAtSiteAfterListingFound: a file written at a site itself,
// behind the lake's back (as a transfer service writes), after the
// federator listed its directory, is found when it is first asked for:
// a listing never makes a "not found" of a path nobody asked about.
func TestWrittenAtSiteAfterListingFound(t *testing.T) {
	a := startSite(t, "site-a")
	for i := range 3 {
		a.write(t, fmt.Sprintf("/d/f%d", i), []byte("f"))
	}
	tf := realFed(t, "metadata_cache: {list_after: 1, negative_ttl: 1h}", a)
	if g := headAnswer(t, tf, "/d/f0"); g.status != http.StatusOK || a.count(listingReq) != 1 {
		t.Fatalf("HEAD /d/f0 = %v after %d listings, want 200 from one listing", g, a.count(listingReq))
	}
	a.write(t, "/d/late", []byte("late"))
	if g := headAnswer(t, tf, "/d/late"); g.status != http.StatusOK {
		t.Errorf("HEAD of a file written at the site after the listing = %v, want 200", g)
	}
	if g := headAnswer(t, tf, "/d/f1"); g.status != http.StatusOK || a.count(listingReq) != 1 {
		t.Errorf("HEAD /d/f1 = %v after %d listings, want 200 from the same listing", g, a.count(listingReq))
	}
}

// TestPendingMarkLostStillRefusesListing: a pending mark (a client sent
// to PUT the path) that leaves the cache before it expires, evicted by
// a full shard or replaced by a found answer that is evicted in turn,
// still refuses an answer from a listing taken while it stood: the
// client's write may land after the listing, which would then hide it
// for negative_ttl.
func TestPendingMarkLostStillRefusesListing(t *testing.T) {
	for _, tc := range []struct {
		name string
		lose func(c *mdCache, now int64)
	}{
		{"evicted", func(c *mdCache, now int64) {}},
		{"replaced, then evicted", func(c *mdCache, now int64) {
			c.put("/d/f", &entry{status: 200, expires: now + int64(time.Hour)}, now)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCache(cacheShards, testHot, nil) // one entry a shard
			c.invalidate("/d/f", time.Hour)          // the 307: a hold of negative_ttl
			taken := time.Now().UnixNano()           // a listing of /d begins
			if !c.pendingAfter("/d/f", taken) {
				t.Fatal("pendingAfter with the mark in place = false")
			}
			tc.lose(c, taken)
			// Fill /d/f's shard: its one slot goes to another path.
			s := c.shard("/d/f")
			holds := func() bool {
				s.mu.RLock()
				defer s.mu.RUnlock()
				return s.findLocked(maphash.String(c.seed, "/d/f"), "/d/f") >= 0
			}
			for i := 0; holds(); i++ {
				if k := fmt.Sprintf("/other/%d", i); c.shard(k) == s {
					c.put(k, &entry{status: 200, expires: taken + int64(time.Hour)}, taken)
				}
			}
			if !c.pendingAfter("/d/f", taken) {
				t.Error("pendingAfter after the mark left the cache = false, want true while it would have stood")
			}
			if c.pendingAfter("/d/f", taken+int64(2*time.Hour)) {
				t.Error("pendingAfter a listing taken after the mark's expiry = true, want false")
			}
		})
	}
}
