package storage

import (
	"bufio"
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/testenv"
)

// hugeDirEntries is the size of the directory TestPropfindHugeDirectory
// lists: large enough that a whole-directory buffer shows (tens of MB).
const hugeDirEntries = 100_000

// makeHugeDir creates dir with n empty files.
func makeHugeDir(t testing.TB, dir string, n int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := os.WriteFile(filepath.Join(dir, "f"+strconv.Itoa(i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// fastDir returns a fresh directory on a tmpfs when one can be mounted
// (creating 100,000 files there takes a tenth of the time it takes on
// disk), else on disk. The mount is removed when the test ends, after the
// servers started later have stopped.
func fastDir(t *testing.T) string {
	dir := t.TempDir()
	if syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "size=256m") != nil {
		return dir
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("umount %s: %v", dir, err)
			syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
	return dir
}

// countResponses reads a multistatus body as a stream (so the client holds
// no copy of it) and returns how many DAV:response elements it has; the
// error is non-nil when the document is not well-formed or not a
// multistatus.
func countResponses(r io.Reader) (int, error) {
	d := xml.NewDecoder(r)
	n, depth := 0, 0
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			if depth != 0 {
				return n, fmt.Errorf("document ends at depth %d", depth)
			}
			return n, nil
		}
		if err != nil {
			return n, err
		}
		switch se := tok.(type) {
		case xml.StartElement:
			if depth == 0 && (se.Name.Space != "DAV:" || se.Name.Local != "multistatus") {
				return n, fmt.Errorf("root element %v, want DAV: multistatus", se.Name)
			}
			if depth == 1 && se.Name.Space == "DAV:" && se.Name.Local == "response" {
				n++
			}
			depth++
		case xml.EndElement:
			depth--
		}
	}
}

// heapPeak samples HeapInuse until stop is closed and returns the peak.
func heapPeak(stop <-chan struct{}) uint64 {
	var ms runtime.MemStats
	var peak uint64
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapInuse)
		select {
		case <-stop:
			return peak
		case <-tick.C:
		}
	}
}

// propResourcetype asks for one property: the whole-directory buffer the
// memory check catches does not depend on the properties asked for, and
// fewer make 400,000 responses affordable under the race detector.
const propResourcetype = `<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:prop><D:resourcetype/></D:prop></D:propfind>`

// propfindBodies are the request bodies the listing is checked with.
var propfindBodies = []struct{ name, body string }{
	{"no body (allprop)", ""},
	{"prop", `<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:prop><D:getcontentlength/><D:getetag/><D:resourcetype/></D:prop></D:propfind>`},
	{"propname", `<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:propname/></D:propfind>`},
}

// TestPropfindHugeDirectory lists a directory of 100,000 files with four
// PROPFIND Depth 1 at once: every document must be complete and
// well-formed, and the server's heap must not grow with the directory.
// Measured here (HeapInuse peak minus baseline, four at once): about
// 250 MB with x/net/webdav's walkFS, about 2-5 MB streamed. The bound,
// 40 MB, is a sixth of the old growth and leaves room for GC slack.
func TestPropfindHugeDirectory(t *testing.T) {
	if testing.Short() {
		t.Skip("creates 100,000 files")
	}
	root := fastDir(t)
	makeHugeDir(t, filepath.Join(root, "big"), hugeDirEntries)
	ts := startServer(t, Config{Root: root})

	t.Run("memory", func(t *testing.T) {
		const clients = 4
		const bound = 40 << 20
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		base := ms.HeapInuse
		stop := make(chan struct{})
		peakc := make(chan uint64, 1)
		go func() { peakc <- heapPeak(stop) }()
		var wg sync.WaitGroup
		counts := make([]int, clients)
		errs := make([]error, clients)
		for i := range clients {
			// One client checks the whole document with encoding/xml; the
			// others count with a byte scan, which costs a tenth as much
			// under the race detector.
			count := countResponses
			if i > 0 {
				count = scanResponses
			}
			wg.Go(func() { counts[i], errs[i] = propfind(ts.url+"/big/", propResourcetype, count) })
		}
		wg.Wait()
		close(stop)
		peak := <-peakc
		growth := int64(peak) - int64(base)
		t.Logf("heap in use: base %d MB, peak %d MB, growth %d MB", base>>20, peak>>20, growth>>20)
		for i := range clients {
			if errs[i] != nil {
				t.Errorf("client %d: %v", i, errs[i])
			} else if counts[i] != hugeDirEntries+1 {
				t.Errorf("client %d: %d responses, want %d", i, counts[i], hugeDirEntries+1)
			}
		}
		if growth > bound {
			t.Errorf("heap grew by %d MB during %d PROPFIND Depth 1 of %d entries, want at most %d MB",
				growth>>20, clients, hugeDirEntries, bound>>20)
		}
	})

	// The request bodies on a directory of a few batches (the huge one
	// takes seconds per listing).
	const smallEntries = 3*propfindBatch + 7
	makeHugeDir(t, filepath.Join(root, "small"), smallEntries)
	for _, tc := range propfindBodies {
		t.Run("complete/"+tc.name, func(t *testing.T) {
			n, err := propfindCount(ts.url+"/small/", tc.body)
			if err != nil || n != smallEntries+1 {
				t.Errorf("PROPFIND /small/ = %d responses, %v; want %d, nil", n, err, smallEntries+1)
			}
		})
	}

	t.Run("bounded concurrency", func(t *testing.T) {
		one := startServer(t, Config{Root: root, MaxListings: 1})
		// A listing whose client does not read holds its slot: the
		// server blocks writing long before 100,000 responses are out.
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "PROPFIND", one.url+"/big/", nil)
		req.Header.Set("Depth", "1")
		held, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer held.Body.Close()
		if held.StatusCode != http.StatusMultiStatus {
			t.Fatalf("first PROPFIND = %d, want 207", held.StatusCode)
		}
		for _, tc := range []struct{ name, method, path string }{
			{"propfind", "PROPFIND", "/big/"},
			{"get listing", "GET", "/big/"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				resp, body := one.do(t, tc.method, tc.path, nil, "Depth", "1")
				if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
					t.Errorf("%s %s while the only slot is taken = %d Retry-After %q (%.80q), want 503 with Retry-After",
						tc.method, tc.path, resp.StatusCode, resp.Header.Get("Retry-After"), body)
				}
			})
		}
		resp, body := one.do(t, "PROPFIND", "/big/f1", nil, "Depth", "1")
		wantStatus(t, resp, body, http.StatusMultiStatus) // a file is not a listing
		cancel()
		held.Body.Close()
		if !testenv.Within(10*time.Second, func() bool {
			resp, body = one.do(t, "GET", "/", nil)
			return resp.StatusCode == http.StatusOK
		}) {
			t.Fatalf("GET / after the listing was dropped = %d (%.80q), want 200 within 10s", resp.StatusCode, body)
		}
	})
}

// propfindCount sends PROPFIND Depth 1 and counts the responses with
// countResponses.
func propfindCount(u, body string) (int, error) { return propfind(u, body, countResponses) }

// propfind sends PROPFIND Depth 1 and counts the responses with count.
func propfind(u, body string, count func(io.Reader) (int, error)) (int, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest("PROPFIND", u, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Depth", "1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusMultiStatus {
		b, _ := io.ReadAll(resp.Body)
		return 0, fmt.Errorf("status %d (%.80q), want 207", resp.StatusCode, b)
	}
	return count(resp.Body)
}

// scanResponses counts "<D:response>" in a multistatus as x/net/webdav
// writes it and checks the envelope: a cheap stand-in for countResponses.
func scanResponses(r io.Reader) (int, error) {
	const tag = "<D:response>"
	br := bufio.NewReaderSize(r, 64<<10)
	head := make([]byte, len(msHead))
	if _, err := io.ReadFull(br, head); err != nil || string(head) != msHead {
		return 0, fmt.Errorf("document starts %q, want %q", head, msHead)
	}
	n := 0
	var carry, tail []byte
	buf := make([]byte, 64<<10)
	for {
		m, err := br.Read(buf)
		chunk := append(carry, buf[:m]...)
		n += bytes.Count(chunk, []byte(tag))
		// Keep what could be the start of a tag cut by the chunk boundary.
		keep := min(len(tag)-1, len(chunk))
		if i := bytes.LastIndex(chunk[len(chunk)-keep:], []byte("<")); i >= 0 {
			carry = append(carry[:0:0], chunk[len(chunk)-keep+i:]...)
		} else {
			carry = carry[:0]
		}
		tail = append(tail, buf[:m]...)
		if len(tail) > len(msTail) {
			tail = tail[len(tail)-len(msTail):]
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return n, err
		}
	}
	if string(tail) != msTail {
		return n, fmt.Errorf("document ends %q, want %q", tail, msTail)
	}
	return n, nil
}

// TestPropfindDepth1Members: the streamed listing names the collection
// and each member once (collections with a trailing slash), with the
// server's temp files and symlinks out of the root left out, as
// x/net/webdav's own walk did.
func TestPropfindDepth1Members(t *testing.T) {
	ts := startServer(t, Config{})
	ts.write(t, "d/file.txt", "x", time.Time{})
	ts.write(t, "d/sub/inner", "x", time.Time{})
	ts.write(t, "d/"+uploadPrefix+"1", "x", time.Time{})
	ts.write(t, "d/a b%.txt", "x", time.Time{})
	if err := os.Symlink(t.TempDir(), filepath.Join(ts.root, "d", "out")); err != nil {
		t.Fatal(err)
	}
	resp, body := ts.do(t, "PROPFIND", "/d/", nil, "Depth", "1")
	wantStatus(t, resp, body, http.StatusMultiStatus)
	if ct := resp.Header.Get("Content-Type"); ct != "text/xml; charset=utf-8" {
		t.Errorf("Content-Type = %q, want text/xml; charset=utf-8", ct)
	}
	var ms struct {
		Responses []struct {
			Href string `xml:"DAV: href"`
		} `xml:"DAV: response"`
	}
	if err := xml.Unmarshal([]byte(body), &ms); err != nil {
		t.Fatalf("PROPFIND body: %v\n%s", err, body)
	}
	var got []string
	for _, r := range ms.Responses {
		got = append(got, r.Href)
	}
	slices.Sort(got)
	want := []string{"/d/", "/d/a%20b%25.txt", "/d/file.txt", "/d/sub/"}
	if !slices.Equal(got, want) {
		t.Errorf("PROPFIND /d/ Depth 1 hrefs = %q, want %q", got, want)
	}
}
