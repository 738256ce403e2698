package interop

// Real clients writing through the write buffer: gfal-copy and curl -T
// upload a file to the federator under a buffered prefix, over HTTP and
// HTTPS; rclone copies a tree of 200 small files; uproot reads back a
// ROOT file written through the buffer, through the cache on the same
// listener, while it is pending and after it has migrated. Each test
// runs a federation in a box (servertest: two storage sites and a
// federator, started as `lakefed serve` starts them) whose federator has
// a `buffer:` section sending /out to site-b. site-a is the federator's
// own choice for unbuffered writes (best priority), so a file found on
// site-b got there through the buffer's mover, not through the
// federator's 307.
//
// Client flags needed beyond the obvious:
//
//	gfal-copy   -K ADLER32: gfal compares the source's adler32 with the
//	            one the federator answers (Want-Digest) for the destination;
//	            -vvv: davix logs the PUT's status and Digest, which the test reads
//	curl        -D FILE to read the 201 and its Digest
//	rclone      a webdav remote with vendor "other" on the federator's URL,
//	            as in TestFederationRclone
//	uproot      handler=uproot.source.http.HTTPSource (demoUprootScript)

import (
	"encoding/json"
	"fmt"
	"hash/adler32"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/bench"
	"github.com/lakefed/lakefed/internal/buffer"
	"github.com/lakefed/lakefed/internal/config"
	"github.com/lakefed/lakefed/internal/demo"
	"github.com/lakefed/lakefed/internal/httpx"
	"github.com/lakefed/lakefed/internal/server/servertest"
	"github.com/lakefed/lakefed/internal/testenv"
)

// bufPrefix is the buffered prefix of the tests' federations; bufTarget
// the site its files migrate to.
const (
	bufPrefix = "/out"
	bufTarget = "site-b"
)

// bufferFed is a federation whose federator buffers writes under
// bufPrefix, and the client settings to reach it.
type bufferFed struct {
	fed *servertest.Fed
	// srv describes the federator for the clients' TLS flags: url is the
	// federator's base URL with a trailing "/", tls and caDir are set over
	// HTTPS.
	srv *server
}

// startBufferFed runs two sites and a federator with a write buffer in
// front of it sending bufPrefix to bufTarget, over HTTPS when secure is
// set, and with a cache on the federator's listener reading the
// federation when withCache is set. Migrated files are retired after a
// millisecond and failed copies retried within 200 ms, so the tests see
// both states quickly.
func startBufferFed(t *testing.T, secure, withCache bool) *bufferFed {
	t.Helper()
	s := &server{client: &http.Client{Timeout: cmdTimeout}}
	if secure {
		s.tls = testenv.NewTLS(t)
		s.client = s.tls.Client()
		s.client.Timeout = cmdTimeout
		s.caDir = hashedCADir(t, s.tls.CAFile)
	}
	fed := servertest.Start(t, servertest.Options{Sites: 2, Configure: func(c *config.Config) {
		c.Buffer = &config.Buffer{
			Dir:                t.TempDir(),
			KeepAfterMigration: config.Duration(time.Millisecond),
			Parallel:           4,
			Retry:              config.Retry{Initial: config.Duration(50 * time.Millisecond), Max: config.Duration(200 * time.Millisecond)},
			Prefixes:           []config.BufferPrefix{{Prefix: bufPrefix, Targets: []string{bufTarget}}},
		}
		if withCache {
			c.Cache = &config.Cache{Dir: t.TempDir(), Origin: config.OriginFederation}
		}
		if secure {
			c.TLSCert, c.TLSKey = s.tls.CertFile, s.tls.KeyFile
		}
		// A stopped target is seen down, and back, within a tenth of a
		// second; what the federator knew of a path is forgotten soon.
		c.Federation.Health.Interval = config.Duration(50 * time.Millisecond)
		c.Federation.Health.Timeout = config.Duration(time.Second)
		c.Federation.Health.FailAfter = 1
		c.Federation.Health.RecoverAfter = 1
		c.Federation.MetadataCache.TTL = config.Duration(time.Millisecond)
	}})
	s.url, s.root = fed.URL+"/", fed.Site(bufTarget).Dir
	return &bufferFed{fed: fed, srv: s}
}

// status returns the buffer's GET /api/buffer.
func (b *bufferFed) status(t *testing.T) buffer.Status {
	t.Helper()
	resp, err := b.srv.client.Get(b.fed.URL + "/api/buffer")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/buffer: %s", resp.Status)
	}
	var st buffer.Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("GET /api/buffer: %v", err)
	}
	return st
}

// waitMigrated polls /api/buffer until nothing is pending and nothing is
// held (every file verified on its target and its local copy retired),
// and returns the last status.
func (b *bufferFed) waitMigrated(t *testing.T) buffer.Status {
	t.Helper()
	var st buffer.Status
	if testenv.Within(30*time.Second, func() bool {
		st = b.status(t)
		return st.PendingFiles == 0 && st.HeldFiles == 0
	}) {
		return st
	}
	t.Fatalf("after 30 s the buffer still has %d files pending and %d held; failures: %+v", st.PendingFiles, st.HeldFiles, st.Failures)
	return st
}

// targetFile is where logical path p lands on the target's disk.
func (b *bufferFed) targetFile(p string) string {
	return filepath.Join(b.fed.Site(bufTarget).Dir, filepath.FromSlash(p))
}

// checkMigrated asserts that p migrated to the target with o's bytes, and
// did not land on site-a (where an unbuffered write would have gone).
func (b *bufferFed) checkMigrated(t *testing.T, p string, o original) {
	t.Helper()
	checkSame(t, bufTarget+"'s copy of "+p, b.targetFile(p), o)
	if _, err := os.Stat(filepath.Join(b.fed.Site("site-a").Dir, filepath.FromSlash(p))); !os.IsNotExist(err) {
		t.Errorf("%s is on site-a too (%v): the write went around the buffer", p, err)
	}
}

// checkPendingDigest asserts that the federator answers a HEAD of p with
// the buffer's copy (pending, so no replica exists yet) and o's adler32.
func (b *bufferFed) checkPendingDigest(t *testing.T, p string, o original) {
	t.Helper()
	if d := serverDigest(t, b.srv, strings.TrimPrefix(p, "/")); d != o.adler32 {
		t.Errorf("HEAD %s with Want-Digest through the federator: adler32 %q, want %s", p, d, o.adler32)
	}
}

// smallFile writes n random bytes (seeded) to a fresh file.
func smallFile(t *testing.T, n int, seed uint64) original {
	t.Helper()
	data := cacheData(n, seed)
	p := filepath.Join(t.TempDir(), fmt.Sprintf("f%d.bin", seed))
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return original{path: p, size: int64(n), adler32: fmt.Sprintf("%08x", adler32.Checksum(data))}
}

// bufferFileSize is the size of the file curl and gfal-copy write: many
// of the buffer's 1 MiB receive chunks, the last one short.
const bufferFileSize = 6<<20 + 12345

// stopTarget takes the target down so that what is written stays
// pending, and returns the function that brings it back.
func (b *bufferFed) stopTarget(t *testing.T) func() {
	t.Helper()
	site := b.fed.Site(bufTarget)
	if err := site.Stop(); err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		if err := site.Restart(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBufferCurl: curl -T writes through the buffer; the answer is 201
// with a Digest holding the file's adler32; while the target is down the
// file is pending and the federator shows it; once the target is back it
// migrates and site-b holds the same bytes.
func TestBufferCurl(t *testing.T) {
	curl := testenv.Require(t, "curl")
	o := smallFile(t, bufferFileSize, 31)
	for _, scheme := range []string{"http", "https"} {
		t.Run(scheme, func(t *testing.T) {
			b := startBufferFed(t, scheme == "https", false)
			restart := b.stopTarget(t)
			const p = bufPrefix + "/curl/run1/file.bin"
			hdr := filepath.Join(t.TempDir(), "headers")
			argv := withTLS(b.srv, []string{"curl", "-sS", "--fail-with-body", "-T", o.path, "-D", hdr, b.fed.URL + p},
				"--cacert", b.srv.caFile())
			run(t, nil, curl, argv[1:]...)
			a := curlHeaders(t, hdr)
			if a.status != http.StatusCreated {
				t.Errorf("curl -T: status %d, want 201", a.status)
			}
			if got := httpx.ParseDigest(a.h.Get("Digest"))[httpx.Adler32]; got != o.adler32 {
				t.Errorf("curl -T: Digest %q, want adler32=%s", a.h.Get("Digest"), o.adler32)
			}
			if st := b.status(t); st.PendingFiles != 1 || st.PendingBytes != o.size {
				t.Errorf("with the target down: %d files, %d bytes pending; want 1 and %d", st.PendingFiles, st.PendingBytes, o.size)
			}
			b.checkPendingDigest(t, p, o)
			restart()
			if st := b.waitMigrated(t); st.Migrated != 1 {
				t.Errorf("the buffer migrated %d files, want 1", st.Migrated)
			}
			b.checkMigrated(t, p, o)
		})
	}
}

// TestBufferGfal: gfal-copy file:// → the federator under the buffered
// prefix, with -K ADLER32 so gfal2 itself compares the source's adler32
// with the one the federator answers for the destination; the buffer
// takes the PUT (its migrated count goes up, site-a never sees the file)
// and site-b holds the bytes after migration. The target stays up here:
// gfal-copy -f asks about the destination before it writes, and with
// site-b down the federator cannot say the path is absent (503).
func TestBufferGfal(t *testing.T) {
	gfal := testenv.Require(t, "gfal-copy")
	o := smallFile(t, bufferFileSize, 32)
	for _, scheme := range []string{"http", "https"} {
		t.Run(scheme, func(t *testing.T) {
			b := startBufferFed(t, scheme == "https", false)
			const p = bufPrefix + "/gfal/run1/file.bin"
			out := run(t, gfalEnv(b.srv), gfal, "-f", "-vvv", "-K", "ADLER32", "file://"+o.path, b.fed.URL+p)
			status, digest := davixPutAnswer(out)
			if status != "201 Created" || httpx.ParseDigest(digest)[httpx.Adler32] != o.adler32 {
				t.Errorf("gfal-copy's PUT was answered %q with Digest %q; want 201 Created and adler32=%s\n%s",
					status, digest, o.adler32, out)
			}
			if st := b.waitMigrated(t); st.Migrated != 1 {
				t.Errorf("the buffer migrated %d files, want 1 (did the PUT go around it?)", st.Migrated)
			}
			b.checkMigrated(t, p, o)
		})
	}
}

// davixPutAnswer returns the status and the Digest header of the answer
// to the PUT in a gfal-copy -vvv log, where davix writes the requests it
// sends ("Davix: > PUT /path HTTP/1.1") and the heads of the answers
// ("Davix: < HTTP/1.1 201 Created", "Davix: < Digest: adler32=…").
func davixPutAnswer(log string) (status, digest string) {
	inPut := false
	for line := range strings.SplitSeq(log, "\n") {
		_, rest, ok := strings.Cut(line, "Davix: ")
		if !ok {
			continue
		}
		switch {
		case strings.HasPrefix(rest, "> "):
			if inPut && status != "" {
				return status, digest // the next request
			}
			inPut = strings.HasPrefix(rest, "> PUT ")
		case inPut && strings.HasPrefix(rest, "< HTTP/"):
			_, status, _ = strings.Cut(strings.TrimSpace(rest[2:]), " ")
		case inPut && strings.HasPrefix(strings.ToLower(rest), "< digest:"):
			digest = strings.TrimSpace(rest[len("< digest:"):])
		}
	}
	return status, digest
}

// rcloneFiles is the size of the tree rclone copies.
const rcloneFiles = 200

// TestBufferRcloneTree: rclone copy writes a tree of 200 small files (10
// directories, sizes from 0 bytes to 40 KB) through the buffer. Right
// after it, whatever has or has not migrated yet, rclone lsf through the
// federator lists every file (read your writes); after migration every
// one is on site-b with its adler32, none on site-a. The target stays up:
// rclone stats the destination directory first, and with site-b down the
// federator cannot say it is absent (503).
func TestBufferRcloneTree(t *testing.T) {
	rclone := testenv.Require(t, "rclone")
	b := startBufferFed(t, false, false)
	src := filepath.Join(t.TempDir(), "tree")
	want := map[string]original{} // by path relative to src
	r := rand.New(rand.NewPCG(13, 14))
	for i := range rcloneFiles {
		rel := fmt.Sprintf("d%02d/f%03d.dat", i%10, i)
		n := 0
		if i > 0 { // one empty file
			n = r.IntN(40_000)
		}
		data := cacheData(n, uint64(1000+i))
		writeUnder(t, src, rel, data)
		want[rel] = original{size: int64(n), adler32: fmt.Sprintf("%08x", adler32.Checksum(data))}
	}
	env := []string{
		"RCLONE_CONFIG=" + filepath.Join(t.TempDir(), "no-rclone.conf"),
		"RCLONE_CONFIG_LF_TYPE=webdav",
		"RCLONE_CONFIG_LF_URL=" + b.srv.url,
		"RCLONE_CONFIG_LF_VENDOR=other",
	}
	dst := "lf:" + strings.TrimPrefix(bufPrefix, "/") + "/tree"
	run(t, env, rclone, "copy", "--retries", "1", "--transfers", "8", src, dst)
	listed := func(when string) {
		t.Helper()
		out := run(t, env, rclone, "lsf", "-R", "--files-only", "--retries", "1", dst)
		n := 0
		for l := range strings.SplitSeq(out, "\n") {
			if _, ok := want[strings.TrimSpace(l)]; ok {
				n++
			}
		}
		if n != rcloneFiles {
			t.Errorf("rclone lsf -R of the tree %s lists %d of the %d files:\n%s", when, n, rcloneFiles, out)
		}
	}
	listed("just written")
	if st := b.waitMigrated(t); st.Migrated != rcloneFiles {
		t.Errorf("the buffer migrated %d files, want %d", st.Migrated, rcloneFiles)
	}
	bad := 0
	for rel, o := range want {
		p := bufPrefix + "/tree/" + rel
		n, sum := fileAdler32(t, b.targetFile(p))
		if n != o.size || sum != o.adler32 {
			bad++
			t.Errorf("%s's %s: %d bytes, adler32 %s; want %d bytes, adler32 %s", bufTarget, p, n, sum, o.size, o.adler32)
		}
	}
	if _, err := os.Stat(filepath.Join(b.fed.Site("site-a").Dir, "out", "tree", "d00", "f000.dat")); !os.IsNotExist(err) {
		t.Errorf("the tree reached site-a too (%v): rclone's writes went around the buffer", err)
	}
	listed("migrated")
	t.Logf("rclone copy through the buffer: %d of %d files on %s with the right adler32", rcloneFiles-bad, rcloneFiles, bufTarget)
}

// TestBufferUprootThroughCache: a ROOT file (internal/bench's writer) is
// written through the buffer with the target down, and uproot reads its
// jagged branch from the federator's listener, where the cache answers
// GETs reading the federation through the buffer: first while the file
// is pending (the buffer's copy), then after it migrated and the buffer
// let its copy go (site-b's replica). Both reads get the values groot
// reads from the file written, and the cache saw both.
func TestBufferUprootThroughCache(t *testing.T) {
	python := testenv.Require(t, "python3")
	if out, err := tryRun(nil, python, "-c", "import uproot, awkward"); err != nil {
		testenv.Missing(t, "python3 cannot import uproot and awkward: "+strings.TrimSpace(out))
	}
	b := startBufferFed(t, false, true)
	local := filepath.Join(t.TempDir(), "events.root")
	if err := bench.WriteSampleROOT(local, demo.DefaultEvents, 17); err != nil {
		t.Fatal(err)
	}
	want := demoGroundTruth(t, local)
	n, sum := fileAdler32(t, local)
	o := original{path: local, size: n, adler32: sum}
	script := filepath.Join(t.TempDir(), "read.py")
	if err := os.WriteFile(script, []byte(demoUprootScript), 0o644); err != nil {
		t.Fatal(err)
	}

	restart := b.stopTarget(t)
	const p = bufPrefix + "/analysis/events.root"
	f, err := os.Open(local)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPut, b.fed.URL+p, f)
	req.ContentLength = n
	resp, err := b.srv.client.Do(req)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || httpx.ParseDigest(resp.Header.Get("Digest"))[httpx.Adler32] != sum {
		t.Fatalf("PUT %s = %s, Digest %q; want 201 and adler32=%s", p, resp.Status, resp.Header.Get("Digest"), sum)
	}
	cs := &cacheSite{url: b.fed.URL}
	read := func(when string) {
		t.Helper()
		got := strings.TrimSpace(run(t, nil, python, script, b.fed.URL+p, demo.ROOTTree, demo.ROOTBranch))
		if got != want {
			t.Errorf("uproot through the cache, %s, read (events, values, sha256 counts, sha256 values)\n %s\nwant (groot on the file written)\n %s",
				when, got, want)
		}
	}

	read("pending")
	if st := b.status(t); st.PendingFiles != 1 {
		t.Errorf("after the read while pending: %d files pending, want 1 (the test needs the target down)", st.PendingFiles)
	}
	pending := cs.pattern(t, p)
	if pending.Requests == 0 || pending.Size != n {
		t.Errorf("the cache saw %d requests of %s (%d bytes) while it was pending; want uproot's reads of the %d bytes",
			pending.Requests, p, pending.Size, n)
	}

	restart()
	b.waitMigrated(t)
	b.checkMigrated(t, p, o)
	read("migrated")
	after := cs.pattern(t, p)
	if after.Requests == 0 || after.Size != n {
		t.Errorf("the cache saw %d requests of %s (%d bytes) after migration; want uproot's reads of the %d bytes",
			after.Requests, p, after.Size, n)
	}
	t.Logf("uproot through the cache: %d requests while pending, %d after migration (%d multi-range)",
		pending.Requests, after.Requests, after.MultiRange)
}
