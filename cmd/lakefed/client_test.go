package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/adler32"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/storage"
	"github.com/lakefed/lakefed/internal/storage/storagetest"
	"github.com/lakefed/lakefed/internal/testenv"
)

// lakefedBin is the binary the tests run, built once in TestMain, so each
// test sees stdout, stderr and the exit code as a user would.
var lakefedBin string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "lakefed-test-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	lakefedBin = filepath.Join(dir, "lakefed")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", lakefedBin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// result is what one run of the binary gave.
type result struct {
	stdout, stderr string
	code           int
}

// lakefed runs the binary with args, bounded by two minutes.
func lakefed(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, lakefedBin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("run lakefed %q: %v", args, err)
	}
	return r
}

// mustRun runs the binary and fails the test unless it exits 0.
func mustRun(t *testing.T, args ...string) result {
	t.Helper()
	r := lakefed(t, args...)
	if r.code != 0 {
		t.Fatalf("lakefed %q: exit %d, stderr %q", args, r.code, r.stderr)
	}
	return r
}

// startStorage runs the storage role on a fresh directory on a loopback
// port; with tl it serves HTTPS. It returns the base URL ("http://…/"),
// the directory and the role's handler.
func startStorage(t *testing.T, tl *testenv.TLS) (string, string, http.Handler) {
	t.Helper()
	var cfg storage.Config
	if tl != nil {
		cfg.TLSCert, cfg.TLSKey = tl.CertFile, tl.KeyFile
	}
	site := storagetest.Start(t, cfg)
	return site.URL, site.Dir, site.Server.Handler()
}

// randomFile writes n random bytes to dir/name and returns them.
func randomFile(t *testing.T, dir, name string, n int, seed uint64) []byte {
	t.Helper()
	data := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, seed+1))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return data
}

func sameFile(t *testing.T, p string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("read %s: %v", p, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: %d bytes, adler32 %08x; want %d bytes, adler32 %08x",
			p, len(got), adler32.Checksum(got), len(want), adler32.Checksum(want))
	}
}

func noFile(t *testing.T, p string) {
	t.Helper()
	if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s: want no file, stat says %v", p, err)
	}
}

func TestCpUploadDownload(t *testing.T) {
	base, root, _ := startStorage(t, nil)
	local := t.TempDir()
	data := randomFile(t, local, "f.root", 3<<20+17, 1)
	src := filepath.Join(local, "f.root")

	// Up, into a directory that does not exist yet (Put makes parents).
	// stderr is not a terminal here: no progress bar, nothing at all.
	if r := mustRun(t, "cp", src, base+"atlas/run1/f.root"); r.stderr != "" || r.stdout != "" {
		t.Errorf("cp: stdout %q, stderr %q; want both empty when not on a terminal", r.stdout, r.stderr)
	}
	sameFile(t, filepath.Join(root, "atlas/run1/f.root"), data)

	// A second upload without -f is refused; with -f it replaces.
	if r := lakefed(t, "cp", src, base+"atlas/run1/f.root"); r.code != exitRefused ||
		!strings.Contains(r.stderr, "already exists") {
		t.Errorf("cp onto an existing URL without -f: exit %d, stderr %q; want %d, already exists", r.code, r.stderr, exitRefused)
	}
	mustRun(t, "cp", "-f", src, base+"atlas/run1/f.root")

	// Up into a URL ending in "/": the base name is kept.
	mustRun(t, "cp", src, base+"atlas/run2/")
	sameFile(t, filepath.Join(root, "atlas/run2/f.root"), data)

	// Down to a file, to a file:// URL, and into an existing directory.
	out := t.TempDir()
	mustRun(t, "cp", base+"atlas/run1/f.root", filepath.Join(out, "a.root"))
	sameFile(t, filepath.Join(out, "a.root"), data)
	mustRun(t, "cp", base+"atlas/run1/f.root", "file://"+filepath.Join(out, "b.root"))
	sameFile(t, filepath.Join(out, "b.root"), data)
	mustRun(t, "cp", base+"atlas/run1/f.root", out)
	sameFile(t, filepath.Join(out, "f.root"), data)

	// An existing local file is kept without -f, replaced with it.
	if err := os.WriteFile(filepath.Join(out, "old"), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := lakefed(t, "cp", base+"atlas/run1/f.root", filepath.Join(out, "old")); r.code != exitRefused {
		t.Errorf("cp onto an existing file without -f: exit %d, want %d", r.code, exitRefused)
	}
	sameFile(t, filepath.Join(out, "old"), []byte("old"))
	mustRun(t, "cp", "-f", base+"atlas/run1/f.root", filepath.Join(out, "old"))
	sameFile(t, filepath.Join(out, "old"), data)

	// Local to local goes through the posix kind.
	mustRun(t, "cp", src, filepath.Join(out, "sub", "c.root"))
	sameFile(t, filepath.Join(out, "sub", "c.root"), data)

	// A missing source is "not found" and leaves nothing behind.
	r := lakefed(t, "cp", base+"atlas/nope.root", filepath.Join(out, "nope.root"))
	if r.code != exitNotFound {
		t.Errorf("cp of a missing URL: exit %d, want %d (stderr %q)", r.code, exitNotFound, r.stderr)
	}
	noFile(t, filepath.Join(out, "nope.root"))
}

func TestCpHTTPS(t *testing.T) {
	tl := testenv.NewTLS(t)
	base, root, _ := startStorage(t, tl)
	local := t.TempDir()
	data := randomFile(t, local, "f", 1<<20+3, 2)
	src := filepath.Join(local, "f")

	mustRun(t, "cp", "--ca-file", tl.CAFile, src, base+"d/f")
	sameFile(t, filepath.Join(root, "d/f"), data)
	mustRun(t, "cp", "--ca-file", tl.CAFile, base+"d/f", filepath.Join(local, "g"))
	sameFile(t, filepath.Join(local, "g"), data)
	// davs:// is https:// for WebDAV clients.
	mustRun(t, "cp", "--ca-file", tl.CAFile, strings.Replace(base, "https", "davs", 1)+"d/f", filepath.Join(local, "h"))
	sameFile(t, filepath.Join(local, "h"), data)
	mustRun(t, "cp", "--insecure", base+"d/f", filepath.Join(local, "i"))
	sameFile(t, filepath.Join(local, "i"), data)

	// Without the CA the server is not trusted.
	if r := lakefed(t, "cp", base+"d/f", filepath.Join(local, "j")); r.code == 0 {
		t.Errorf("cp from HTTPS without --ca-file succeeded; want a certificate error")
	}
	noFile(t, filepath.Join(local, "j"))
}

func TestCpURLToURL(t *testing.T) {
	a, rootA, _ := startStorage(t, nil)
	b, rootB, _ := startStorage(t, nil)
	data := randomFile(t, rootA, "x/f", 2<<20+5, 3)
	mustRun(t, "cp", a+"x/f", b+"y/g")
	sameFile(t, filepath.Join(rootB, "y/g"), data)
	mustRun(t, "cp", a+"x/f", b+"y/")
	sameFile(t, filepath.Join(rootB, "y/f"), data)
}

// TestCpNginx copies to and from a server that offers no checksums (nginx
// answers Want-Digest with nothing): cp still copies, and the bytes match.
func TestCpNginx(t *testing.T) {
	ng := testenv.StartNginx(t)
	local := t.TempDir()
	data := randomFile(t, local, "f", 2<<20+9, 11)
	mustRun(t, "cp", filepath.Join(local, "f"), ng.URL+"a/b/f")
	sameFile(t, filepath.Join(ng.Dir, "a/b/f"), data)
	mustRun(t, "cp", ng.URL+"a/b/f", filepath.Join(local, "g"))
	sameFile(t, filepath.Join(local, "g"), data)
	if got := mustRun(t, "ls", ng.URL+"a/").stdout; got != "b/\n" {
		t.Errorf("ls %sa/ = %q, want %q", ng.URL, got, "b/\n")
	}
	if got := fields(mustRun(t, "stat", ng.URL+"a/b/f").stdout); got["size"] != "2097161" || got["adler32"] != "" {
		t.Errorf("stat on nginx = %v, want size 2097161 and no adler32", got)
	}
}

// corruption says what a corrupting server mangles.
type corruption struct {
	get, put bool // flip the first byte of GET answers / PUT bodies
	// hideDigest drops the Digest the server returns on PUT answers, so
	// only a later Want-Digest can tell the stored bytes are wrong.
	hideDigest bool
}

// corrupt wraps h so that it mangles data as c says, while every other
// header (Digest on GET and HEAD included) stays what h says: a server
// whose disk or network corrupts data.
func corrupt(h http.Handler, c corruption) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c.put && r.Method == http.MethodPut {
			r.Body = &flipReader{r: r.Body}
		}
		if c.get && r.Method == http.MethodGet {
			w = &flipWriter{ResponseWriter: w}
		}
		if c.hideDigest && r.Method == http.MethodPut {
			w = &hideDigestWriter{ResponseWriter: w}
		}
		h.ServeHTTP(w, r)
	})
}

type hideDigestWriter struct{ http.ResponseWriter }

func (h *hideDigestWriter) WriteHeader(code int) {
	h.Header().Del("Digest")
	h.ResponseWriter.WriteHeader(code)
}

func (h *hideDigestWriter) Write(p []byte) (int, error) {
	h.Header().Del("Digest")
	return h.ResponseWriter.Write(p)
}

type flipWriter struct {
	http.ResponseWriter
	done bool
}

func (f *flipWriter) Write(p []byte) (int, error) {
	if !f.done && len(p) > 0 {
		f.done = true
		q := append([]byte(nil), p...)
		q[0] ^= 0xff
		return f.ResponseWriter.Write(q)
	}
	return f.ResponseWriter.Write(p)
}

type flipReader struct {
	r    io.ReadCloser
	done bool
}

func (f *flipReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if !f.done && n > 0 {
		f.done = true
		p[0] ^= 0xff
	}
	return n, err
}

func (f *flipReader) Close() error { return f.r.Close() }

func TestCpCorruptSource(t *testing.T) {
	_, root, h := startStorage(t, nil)
	bad := httptest.NewServer(corrupt(h, corruption{get: true}))
	defer bad.Close()
	randomFile(t, root, "f", 1<<20, 4)
	out := t.TempDir()

	r := lakefed(t, "cp", bad.URL+"/f", filepath.Join(out, "f"))
	if r.code == 0 || !strings.Contains(r.stderr, "adler32 mismatch") {
		t.Errorf("cp from a corrupting server: exit %d, stderr %q; want non-zero and an adler32 mismatch", r.code, r.stderr)
	}
	noFile(t, filepath.Join(out, "f"))

	// URL to URL: the destination must not keep the bad copy either.
	good, rootGood, _ := startStorage(t, nil)
	if r := lakefed(t, "cp", bad.URL+"/f", good+"f"); r.code == 0 {
		t.Errorf("cp URL→URL from a corrupting server: exit 0, want non-zero")
	}
	noFile(t, filepath.Join(rootGood, "f"))
}

func TestCpCorruptDestination(t *testing.T) {
	local := t.TempDir()
	randomFile(t, local, "small", 100<<10, 5)
	randomFile(t, local, "big", 3<<20, 6)
	tests := []struct {
		name, file string
		c          corruption
		stderr     string
	}{
		// The server checks the Digest a small upload carries, or
		// returns its own on PUT; a big one is checked by cp afterwards.
		{"small", "small", corruption{put: true}, "mismatch"},
		{"big", "big", corruption{put: true}, "mismatch"},
		{"big, no digest on PUT", "big", corruption{put: true, hideDigest: true},
			"adler32 mismatch: sent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, root, h := startStorage(t, nil)
			bad := httptest.NewServer(corrupt(h, tt.c))
			defer bad.Close()
			r := lakefed(t, "cp", filepath.Join(local, tt.file), bad.URL+"/f")
			if r.code == 0 || !strings.Contains(r.stderr, tt.stderr) {
				t.Errorf("cp to a corrupting server: exit %d, stderr %q; want non-zero and %q", r.code, r.stderr, tt.stderr)
			}
			noFile(t, filepath.Join(root, "f"))
		})
	}
}

func TestLs(t *testing.T) {
	base, root, _ := startStorage(t, nil)
	randomFile(t, root, "d/b.root", 10, 6)
	randomFile(t, root, "d/a.root", 1234, 7)
	randomFile(t, root, "d/sub/x", 1, 8)
	mtime := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	if err := os.Chtimes(filepath.Join(root, "d/a.root"), mtime, mtime); err != nil {
		t.Fatal(err)
	}

	for _, u := range []string{base + "d", base + "d/", filepath.Join(root, "d")} {
		if got, want := mustRun(t, "ls", u).stdout, "a.root\nb.root\nsub/\n"; got != want {
			t.Errorf("ls %s = %q, want %q", u, got, want)
		}
	}

	long := mustRun(t, "ls", "-l", base+"d").stdout
	lines := strings.Split(strings.TrimSuffix(long, "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("ls -l: %d lines, want 3:\n%s", len(lines), long)
	}
	f := strings.Fields(lines[0])
	if len(f) != 3 || f[0] != "1234" || f[1] != mtime.Format(time.RFC3339) || f[2] != "a.root" {
		t.Errorf("ls -l first line = %q, want size 1234, mtime %s, name a.root", lines[0], mtime.Format(time.RFC3339))
	}
	if !strings.HasSuffix(lines[2], " sub/") {
		t.Errorf("ls -l third line = %q, want the directory sub/", lines[2])
	}

	if r := lakefed(t, "ls", base+"nope/"); r.code != exitNotFound {
		t.Errorf("ls of a missing directory: exit %d, want %d", r.code, exitNotFound)
	}
}

// fields parses "key: value" lines.
func fields(s string) map[string]string {
	m := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m
}

func TestStat(t *testing.T) {
	base, root, _ := startStorage(t, nil)
	data := randomFile(t, root, "d/f", 4321, 9)
	want := fmt.Sprintf("%08x", adler32.Checksum(data))

	for _, u := range []string{base + "d/f", filepath.Join(root, "d/f")} {
		got := fields(mustRun(t, "stat", u).stdout)
		if got["name"] != "f" || got["size"] != "4321" || got["type"] != "file" || got["adler32"] != want {
			t.Errorf("stat %s = %v, want name f, size 4321, type file, adler32 %s", u, got, want)
		}
		if _, err := time.Parse(time.RFC3339, got["mtime"]); err != nil {
			t.Errorf("stat %s: mtime %q is not RFC 3339", u, got["mtime"])
		}
	}
	if got := fields(mustRun(t, "stat", base+"d").stdout); got["type"] != "directory" || got["name"] != "d" {
		t.Errorf("stat of a directory = %v, want name d, type directory", got)
	}
}

func TestMkdirRm(t *testing.T) {
	base, root, _ := startStorage(t, nil)
	mustRun(t, "mkdir", base+"a/b/c")
	if fi, err := os.Stat(filepath.Join(root, "a/b/c")); err != nil || !fi.IsDir() {
		t.Fatalf("after mkdir a/b/c: stat = %v, %v; want a directory", fi, err)
	}
	mustRun(t, "mkdir", base+"a/b/c") // existing: fine

	randomFile(t, root, "a/f", 10, 10)
	mustRun(t, "rm", base+"a/f")
	noFile(t, filepath.Join(root, "a/f"))
	if r := lakefed(t, "rm", base+"a/f"); r.code != exitNotFound {
		t.Errorf("rm of a missing file: exit %d, want %d", r.code, exitNotFound)
	}
	mustRun(t, "rm", base+"a/b/c")
	noFile(t, filepath.Join(root, "a/b/c"))

	local := filepath.Join(t.TempDir(), "x", "y")
	mustRun(t, "mkdir", local)
	if fi, err := os.Stat(local); err != nil || !fi.IsDir() {
		t.Fatalf("after local mkdir: stat = %v, %v; want a directory", fi, err)
	}
}

func TestErrors(t *testing.T) {
	base, _, _ := startStorage(t, nil)

	// A port nothing listens on: the endpoint is down.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String() + "/"
	ln.Close()

	forbidden := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "go away", http.StatusForbidden)
	}))
	defer forbidden.Close()

	out := t.TempDir()
	tests := []struct {
		name   string
		args   []string
		code   int
		stderr string // exact, or "" to check the prefix only
	}{
		{"stat missing", []string{"stat", base + "x"}, exitNotFound, "lakefed: stat " + base + "x: not found\n"},
		{"cp missing", []string{"cp", base + "x", filepath.Join(out, "x")}, exitNotFound, "lakefed: stat " + base + "x: not found\n"},
		{"ls missing", []string{"ls", base + "x/"}, exitNotFound, "lakefed: ls " + base + "x/: not found\n"},
		{"rm missing", []string{"rm", base + "x"}, exitNotFound, "lakefed: rm " + base + "x: not found\n"},
		{"stat down", []string{"stat", down + "x"}, exitUnavailable, ""},
		{"cp down", []string{"cp", down + "x", filepath.Join(out, "y")}, exitUnavailable, ""},
		{"ls down", []string{"ls", down}, exitUnavailable, ""},
		{"stat forbidden", []string{"stat", forbidden.URL + "/x"}, exitRefused, ""},
		{"cp forbidden", []string{"cp", forbidden.URL + "/x", filepath.Join(out, "z")}, exitRefused, ""},
		{"mkdir forbidden", []string{"mkdir", forbidden.URL + "/x"}, exitRefused, ""},
		{"no args", []string{"cp", "a"}, exitUsage, ""},
		{"bad scheme", []string{"stat", "gopher://h/x"}, exitUsage, ""},
		{"bad path", []string{"stat", base + "a/../b"}, exitUsage, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := lakefed(t, tt.args...)
			if r.code != tt.code {
				t.Errorf("lakefed %q: exit %d, want %d (stderr %q)", tt.args, r.code, tt.code, r.stderr)
			}
			if !strings.HasPrefix(r.stderr, "lakefed: ") || strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("lakefed %q: stderr %q, want one line starting with \"lakefed: \"", tt.args, r.stderr)
			}
			if tt.stderr != "" && r.stderr != tt.stderr {
				t.Errorf("lakefed %q: stderr %q, want %q", tt.args, r.stderr, tt.stderr)
			}
		})
	}
	noFile(t, filepath.Join(out, "x"))
	noFile(t, filepath.Join(out, "y"))
	noFile(t, filepath.Join(out, "z"))
}

func TestReason(t *testing.T) {
	refused := fmt.Errorf("permission denied: %w", endpoint.ErrRefused)
	open := &endpoint.OpError{Kind: endpoint.KindPosix, Op: "open", Path: "/a/b", Err: refused}
	tests := []struct {
		in   error
		want string
	}{
		{&endpoint.OpError{Kind: endpoint.KindHTTP, Op: "stat", Path: "/x", Err: endpoint.ErrNotFound}, "not found"},
		{&endpoint.OpError{Kind: endpoint.KindPosix, Op: "put", Path: "/a/b", Err: refused}, "permission denied: refused"},
		{&endpoint.OpError{Kind: endpoint.KindPosix, Op: "checksum", Path: "/a/b", Err: open}, "permission denied: refused"},
		{&endpoint.OpError{Kind: endpoint.KindUpstream, Op: "probe", Err: refused}, "permission denied: refused"},
		{fmt.Errorf("copy: %w", &endpoint.OpError{Kind: endpoint.KindS3, Op: "read", Path: "/f", Err: refused}), "copy: permission denied: refused"},
		{endpoint.ErrNotFound, "not found"},
		{errors.New("http: 403 Forbidden: refused"), "http: 403 Forbidden: refused"},
	}
	for _, tt := range tests {
		if got := reason(tt.in); got != tt.want {
			t.Errorf("reason(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
