package federation

import (
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/lakefed/lakefed/internal/testenv"
)

// xrdCounter is a TCP proxy in front of an XRootD server that counts the
// requests clients send through it, by request and path ("stat
// /base/d/f"), as a storage role's site counts its HTTP requests.
type xrdCounter struct {
	mu   sync.Mutex // guards reqs
	reqs map[string]int
}

// count returns how many requests of kind (kXR_stat is "stat",
// kXR_dirlist "dirlist") were sent for paths below prefix.
func (x *xrdCounter) count(kind, prefix string) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := 0
	for k, c := range x.reqs {
		if r, p, _ := strings.Cut(k, " "); r == kind && strings.HasPrefix(p, prefix) {
			n += c
		}
	}
	return n
}

// startXrdCounter serves the proxy to target and returns its address.
func startXrdCounter(t *testing.T, target string) (string, *xrdCounter) {
	t.Helper()
	x := &xrdCounter{reqs: map[string]int{}}
	return testenv.Relay(t, target, x.forward, nil), x
}

// forward copies a client's requests to the server, counting them: the
// 20-byte handshake, then requests of a 24-byte header and dlen bytes.
func (x *xrdCounter) forward(s io.Writer, c io.Reader) {
	hs := make([]byte, 20)
	if _, err := io.ReadFull(c, hs); err != nil {
		return
	}
	if _, err := s.Write(hs); err != nil {
		return
	}
	for {
		h := make([]byte, 24)
		if _, err := io.ReadFull(c, h); err != nil {
			return
		}
		body := make([]byte, binary.BigEndian.Uint32(h[20:]))
		if _, err := io.ReadFull(c, body); err != nil {
			return
		}
		kind := map[uint16]string{3017: "stat", 3004: "dirlist"}[binary.BigEndian.Uint16(h[2:])]
		if kind != "" {
			p, _, _ := strings.Cut(string(body), "?")
			x.mu.Lock()
			x.reqs[kind+" "+p]++
			x.mu.Unlock()
		}
		if _, err := s.Write(append(h, body...)); err != nil {
			return
		}
	}
}

// TestListingAnswersColdLookupsXRootD: the cold look-ups of every file
// of a directory reach a real XRootD data server (the root:// kind) as
// one kXR_dirlist and no kXR_stat of a file it listed, beside a storage
// role listed with one PROPFIND, and answer what Stat would have.
func TestListingAnswersColdLookupsXRootD(t *testing.T) {
	xrd := testenv.StartXRootDChecksum(t)
	a := startSite(t, "site-a")
	var paths []string
	for i := range 20 {
		p := fmt.Sprintf("/run/d/f%02d.root", i)
		paths = append(paths, p)
		a.write(t, p, []byte(p))
		if i%3 != 0 {
			full := filepath.Join(xrd.Dir, "base", filepath.FromSlash(p))
			if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(full, []byte(p), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.MkdirAll(filepath.Join(xrd.Dir, "base", "run", "d", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	testenv.ChownToXRootD(t, xrd.Dir)
	paths = append(paths, "/run/d/nowhere", "/run/d/sub")
	addr, cnt := startXrdCounter(t, strings.TrimSuffix(strings.TrimPrefix(xrd.RootURL, "root://"), "/"))

	fed := func(fedLines string) *testFed {
		return startFed(t, cfgYAML("health: {interval: 1h}\n"+fedLines,
			fmt.Sprintf("name: site-a\nurl: %s\npriority: 1", a.url()),
			fmt.Sprintf("name: xrootd\nurl: root://%s//base\npriority: 2\ntimeout: 5s", addr)))
	}
	tf := fed("metadata_cache: {list_after: 1}")
	got := map[string]lookupAnswer{}
	for _, p := range paths {
		got[p] = headAnswer(t, tf, p)
	}
	if n := cnt.count("dirlist", "/base/run/d"); n != 1 {
		t.Errorf("kXR_dirlists of /base/run/d = %d, want 1", n)
	}
	// The data server is asked a kXR_stat only for what its listing
	// does not say is a file there: the files it lacks (f00, f03, ...),
	// "nowhere", and the directory "sub".
	if n, want := cnt.count("stat", "/base/run/d/"), 7+1+1; n != want {
		t.Errorf("kXR_stats below /base/run/d = %d, want %d: one for each name the listing lacks, and the directory", n, want)
	}
	if h, l := a.count("HEAD"), a.count(listingReq); h != 2 || l != 1 {
		t.Errorf("the storage role got %d HEADs and %d PROPFINDs, want 2 and 1", h, l)
	}

	ref := fed("metadata_cache: {list_after: -1}")
	for _, p := range paths {
		if want := headAnswer(t, ref, p); !got[p].equal(want) {
			t.Errorf("HEAD %s from listings = %v; from Stat %v", p, got[p], want)
		}
	}
	// The XRootD replica is proxied, not in Link: ask the federators
	// which endpoints they hold each file on.
	for i, p := range paths[:20] {
		l, r := holders(t, tf, p), holders(t, ref, p)
		want := "site-a xrootd"
		if i%3 == 0 {
			want = "site-a" // f00, f03, ...: not on the data server
		}
		if l != want || r != want {
			t.Errorf("%s held by %q from listings, %q from Stat; want %q", p, l, r, want)
		}
	}
}

// holders is the names of the endpoints the federator ranks for p, in
// name order, from its debug answer ("1 site-a priority=1 ...; 2 ...").
func holders(t *testing.T, tf *testFed, p string) string {
	t.Helper()
	resp, _ := tf.do(t, "HEAD", p, http.Header{DebugHeader: {"1"}}, nil)
	choice, _, _ := strings.Cut(resp.Header.Get(ChoiceHeader), " | ")
	var names []string
	for _, r := range strings.Split(choice, "; ") {
		if f := strings.Fields(r); len(f) > 1 {
			names = append(names, f[1])
		}
	}
	slices.Sort(names)
	return strings.Join(names, " ")
}
