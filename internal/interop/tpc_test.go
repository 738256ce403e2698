package interop

// HTTP third-party copy (WLCG HTTP-TPC) driven by gfal-copy, as FTS drives
// it: `gfal-copy --copy-mode pull|push -K adler32 SRC DST` sends one COPY
// to the active side (the destination for pull, the source for push),
// reads the performance markers and the outcome, then compares the
// adler32 of both ends itself. The tests check that gfal2 really did a
// third-party copy (its TRANSFER:TYPE event; gfal2 could otherwise stream
// the bytes through itself), that davix parsed the performance markers
// (its -vvv log), and the bytes and adler32 at the destination.
//
// Between two lakefed storage roles, and between lakefed and XRootD's own
// HTTP-TPC (XrdHttp with libXrdHttpTPC, testenv.StartXRootDTPC) in all
// four directions, each side being the active one in turn.

import (
	"fmt"
	"hash/adler32"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/config"
	"github.com/lakefed/lakefed/internal/server/servertest"
	"github.com/lakefed/lakefed/internal/storage"
	"github.com/lakefed/lakefed/internal/storage/storagetest"
	"github.com/lakefed/lakefed/internal/testenv"
)

// tpcSize is the size of the file each third-party copy moves.
const tpcSize = 24<<20 + 3

// tpcEnd is one side of a third-party copy.
type tpcEnd struct {
	name string
	url  string // base URL, ending in "/"
	dir  string // the directory it serves
}

// tpcData writes tpcSize random bytes as name under the source's
// directory and returns them.
func tpcData(t *testing.T, src tpcEnd, name string, seed uint64) []byte {
	t.Helper()
	data := make([]byte, tpcSize)
	r := rand.New(rand.NewPCG(seed, 77))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	if err := os.WriteFile(filepath.Join(src.dir, name), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return data
}

// gfalTPC runs gfal-copy in the given mode from src to dst and checks the
// copy: a third-party copy of that mode, the same bytes at dst, and
// gfal2's adler32 check passed (it exits non-zero otherwise).
func gfalTPC(t *testing.T, mode string, src, dst tpcEnd, seed uint64) {
	t.Helper()
	gfal := testenv.Require(t, "gfal-copy")
	name := fmt.Sprintf("tpc-%s-%s-to-%s.bin", mode, src.name, dst.name)
	data := tpcData(t, src, name, seed)
	out := run(t, gfalEnv(&server{}), gfal, "-vvv", "--copy-mode", mode, "-K", "adler32",
		src.url+name, dst.url+name)
	// gfal2 may fall back to streaming through itself after a failed
	// third-party copy; that must not happen here.
	if !regexp.MustCompile(`TRANSFER:TYPE\s+3rd `+mode).MatchString(out) ||
		regexp.MustCompile(`TRANSFER:TYPE\s+streamed`).MatchString(out) {
		t.Fatalf("gfal-copy did not do a third-party %s copy:\n%s", mode, out)
	}
	// davix (under gfal2) logs each performance marker it parsed. A
	// lakefed active side sends one every 10 ms here; XRootD every 5 s,
	// so only its first.
	active, markers := dst, 2
	if mode == "push" {
		active = src
	}
	if active.name == "xrootd" {
		markers = 1
	}
	if n := strings.Count(out, "Davix: PerformanceMarker"); n < markers {
		t.Errorf("davix parsed %d performance markers from %s, want at least %d", n, active.name, markers)
	}
	got, err := os.ReadFile(filepath.Join(dst.dir, name))
	if err != nil {
		t.Fatalf("destination copy: %v", err)
	}
	want := fmt.Sprintf("%08x", adler32.Checksum(data))
	if len(got) != len(data) || string(got) != string(data) {
		t.Fatalf("destination holds %d bytes (adler32 %08x), want %d (adler32 %s)",
			len(got), adler32.Checksum(got), len(data), want)
	}
	// The destination's own answer, as gfal2 -K asked it.
	if d := serverDigest(t, &server{url: dst.url, client: &http.Client{Timeout: cmdTimeout}}, name); d != want {
		t.Errorf("HEAD %s%s with Want-Digest: adler32 %q, want %s", dst.url, name, d, want)
	}
}

// storageEnd starts a lakefed storage role.
func storageEnd(t *testing.T, name string) tpcEnd {
	t.Helper()
	// Markers far more often than the default 5 s, so that gfal2 parses
	// several during each copy and not only the first.
	s := storagetest.Start(t, storage.Config{TPC: true, TPCMarkerInterval: 10 * time.Millisecond})
	return tpcEnd{name: name, url: s.URL, dir: s.Dir}
}

// TestTPCGfalLakefed: gfal-copy pulls and pushes between two lakefed
// storage roles.
func TestTPCGfalLakefed(t *testing.T) {
	a, b := storageEnd(t, "a"), storageEnd(t, "b")
	t.Run("pull", func(t *testing.T) { gfalTPC(t, "pull", a, b, 1) })
	t.Run("push", func(t *testing.T) { gfalTPC(t, "push", a, b, 2) })
}

// TestTPCGfalXRootD: gfal-copy between lakefed and XRootD's HTTP-TPC, with
// each of them the active side in turn: lakefed pulls from XRootD and
// pushes to it; XRootD pulls from lakefed and pushes to it.
func TestTPCGfalXRootD(t *testing.T) {
	testenv.Require(t, "gfal-copy")
	xs := testenv.StartXRootDTPC(t)
	x := tpcEnd{name: "xrootd", url: xs.URL, dir: xs.Dir}
	l := storageEnd(t, "lakefed")
	for i, tc := range []struct {
		name     string
		mode     string
		src, dst tpcEnd
	}{
		{"lakefed pulls from xrootd", "pull", x, l},
		{"lakefed pushes to xrootd", "push", l, x},
		{"xrootd pulls from lakefed", "pull", l, x},
		{"xrootd pushes to lakefed", "push", x, l},
	} {
		t.Run(tc.name, func(t *testing.T) { gfalTPC(t, tc.mode, tc.src, tc.dst, uint64(10+i)) })
	}
}

// TestTPCGfalThroughFederator: FTS-style copies through a federator. A
// pull COPY to the federator is sent (307) to the storage site where the
// file is placed, a push COPY to the site holding the file; the sites
// run the copy with the remote lakefed storage role, and the bytes never
// pass the federator.
func TestTPCGfalThroughFederator(t *testing.T) {
	testenv.Require(t, "gfal-copy")
	fed := servertest.Start(t, servertest.Options{Sites: 1, Configure: func(c *config.Config) {
		c.Storage[0].TPC = true
		c.Storage[0].TPCMarkerInterval = config.Duration(10 * time.Millisecond)
	}})
	site := fed.Sites[0]
	f := tpcEnd{name: "federator", url: fed.URL + "/", dir: site.Dir}
	remote := storageEnd(t, "remote")
	t.Run("pull into the federation", func(t *testing.T) { gfalTPC(t, "pull", remote, f, 21) })
	t.Run("push out of the federation", func(t *testing.T) { gfalTPC(t, "push", f, remote, 22) })
}
