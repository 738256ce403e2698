package xroot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/httpx"
	"github.com/lakefed/lakefed/internal/testenv"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// xrd is a real XRootD server with a base directory for one test.
type xrd struct {
	srv  *testenv.Server
	base string // local directory behind the endpoint's root
}

// startXRootD starts a real xrootd and returns it with a fresh base
// directory "/base" the server may write into.
func startXRootD(t testing.TB) *xrd {
	t.Helper()
	srv := testenv.StartXRootDChecksum(t)
	base := filepath.Join(srv.Dir, "base")
	if err := os.MkdirAll(base, 0o755); err != nil {
		t.Fatal(err)
	}
	testenv.ChownToXRootD(t, base)
	return &xrd{srv: srv, base: base}
}

// seed writes a world-readable file below the base directory.
func (x *xrd) seed(t testing.TB, rel string, data []byte) {
	t.Helper()
	p := filepath.Join(x.base, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	testenv.ChownToXRootD(t, x.base)
}

func newEndpoint(t testing.TB, rawURL string, timeout time.Duration) *Endpoint {
	t.Helper()
	e, err := New(context.Background(), endpoint.Config{Name: "xrd", URL: rawURL, Timeout: timeout}, quiet)
	if err != nil {
		t.Fatalf("New(%q): %v", rawURL, err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func (x *xrd) endpoint(t testing.TB) *Endpoint {
	return newEndpoint(t, x.srv.RootURL+"/base", 10*time.Second)
}

func randomData(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func readAll(t testing.TB, e *Endpoint, p string, off, n int64) ([]byte, error) {
	t.Helper()
	rc, err := e.Open(context.Background(), p, off, n)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

func TestNewRefusesBadConfig(t *testing.T) {
	for _, tc := range []struct{ name, url, httpURL string }{
		{"scheme", "http://h:1094//x", ""},
		{"tls", "roots://h:1094//x", ""},
		{"no host", "root:///x", ""},
		{"dotdot base", "root://h//a/../../etc", ""},
		{"bad http url", "root://h//x", "ftp://h/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(context.Background(), endpoint.Config{Name: "x", URL: tc.url, HTTPURL: tc.httpURL}, quiet)
			if err == nil {
				t.Fatalf("New(%q, http_url %q) = nil error, want one", tc.url, tc.httpURL)
			}
		})
	}
}

func TestNewParsesURL(t *testing.T) {
	e, err := New(context.Background(), endpoint.Config{Name: "x", URL: "root://alice@xrd.example.org//store/./mc/?x=1"}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if e.addr != "xrd.example.org:1094" || e.base != "/store/mc" || e.user != "alice" {
		t.Errorf("New: addr %q base %q user %q, want xrd.example.org:1094 /store/mc alice", e.addr, e.base, e.user)
	}
}

func TestStatListOpen(t *testing.T) {
	x := startXRootD(t)
	data := randomData(ChunkSize+3<<20+17, 1)
	x.seed(t, "dir/f.bin", data)
	x.seed(t, "dir/sub/g.txt", []byte("hello"))
	e := x.endpoint(t)
	ctx := context.Background()

	in, err := e.Stat(ctx, "/dir/f.bin")
	if err != nil {
		t.Fatalf("Stat: %v", err)
	}
	if in.Name != "f.bin" || in.Size != int64(len(data)) || in.IsDir || in.ModTime.IsZero() {
		t.Errorf("Stat(/dir/f.bin) = %+v, want f.bin size %d file", in, len(data))
	}
	in, err = e.Stat(ctx, "/")
	if err != nil || !in.IsDir || in.Name != "/" {
		t.Errorf("Stat(/) = %+v, %v, want the root directory", in, err)
	}
	if _, err := e.Stat(ctx, "/dir/nope"); !errors.Is(err, endpoint.ErrNotFound) {
		t.Errorf("Stat(missing) = %v, want ErrNotFound", err)
	}

	ents, err := e.List(ctx, "/dir")
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	var names []string
	for _, en := range ents {
		names = append(names, en.Name)
		if en.Name == "f.bin" && (en.Size != int64(len(data)) || en.IsDir) {
			t.Errorf("List entry %+v, want size %d file", en, len(data))
		}
		if en.Name == "sub" && !en.IsDir {
			t.Errorf("List entry %+v, want a directory", en)
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"f.bin", "sub"}) {
		t.Errorf("List(/dir) names = %q, want [f.bin sub]", names)
	}
	if _, err := e.List(ctx, "/nope"); !errors.Is(err, endpoint.ErrNotFound) {
		t.Errorf("List(missing) = %v, want ErrNotFound", err)
	}
	if _, err := e.List(ctx, "/dir/f.bin"); !errors.Is(err, endpoint.ErrRefused) {
		t.Errorf("List(file) = %v, want ErrRefused", err)
	}

	for _, tc := range []struct {
		name   string
		off, n int64
	}{
		{"whole", 0, -1},
		{"head", 0, 100},
		{"middle across chunks", ChunkSize - 10, 1 << 20},
		{"tail", int64(len(data)) - 5, -1},
		{"empty at end", int64(len(data)), -1},
		{"zero length", 10, 0},
	} {
		t.Run("open "+tc.name, func(t *testing.T) {
			got, err := readAll(t, e, "/dir/f.bin", tc.off, tc.n)
			if err != nil {
				t.Fatalf("Open(%d, %d): %v", tc.off, tc.n, err)
			}
			end := int64(len(data))
			if tc.n >= 0 {
				end = tc.off + tc.n
			}
			if !bytes.Equal(got, data[tc.off:end]) {
				t.Errorf("Open(%d, %d) gave %d bytes, want %d (content differs)", tc.off, tc.n, len(got), end-tc.off)
			}
		})
	}
	if got, err := readAll(t, e, "/dir/f.bin", int64(len(data))-10, 20); err != nil || !bytes.Equal(got, data[len(data)-10:]) {
		t.Errorf("Open(running past the end) = %d bytes, %v; want the last 10", len(got), err)
	}
	if _, err := e.Open(ctx, "/dir/f.bin", int64(len(data))+1, -1); !errors.Is(err, endpoint.ErrRefused) {
		t.Errorf("Open(off > size) = %v, want ErrRefused", err)
	}
	if _, err := e.Open(ctx, "/dir", 0, -1); !errors.Is(err, endpoint.ErrRefused) {
		t.Errorf("Open(dir) = %v, want ErrRefused", err)
	}
	if _, err := e.Open(ctx, "/dir/none", 0, -1); !errors.Is(err, endpoint.ErrNotFound) {
		t.Errorf("Open(missing) = %v, want ErrNotFound", err)
	}
}

func TestPutDeleteMkdir(t *testing.T) {
	x := startXRootD(t)
	e := x.endpoint(t)
	ctx := context.Background()
	data := randomData(ChunkSize*2+123, 2)

	if err := e.Put(ctx, "/a/b/c.bin", bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatalf("Put new with parents: %v", err)
	}
	got, err := os.ReadFile(filepath.Join(x.base, "a/b/c.bin"))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("after Put the server has %d bytes (%v), want %d equal", len(got), err, len(data))
	}
	if err := e.Put(ctx, "/a/b/c.bin", strings.NewReader("short"), -1); err != nil {
		t.Fatalf("Put replace (unknown size): %v", err)
	}
	if got, _ := readAll(t, e, "/a/b/c.bin", 0, -1); string(got) != "short" {
		t.Errorf("after replace read %q, want %q", got, "short")
	}

	// A Put that fails leaves the old content and no temporary file.
	err = e.Put(ctx, "/a/b/c.bin", strings.NewReader("too long for the size"), 3)
	if !errors.Is(err, endpoint.ErrRefused) {
		t.Errorf("Put with wrong size = %v, want ErrRefused", err)
	}
	err = e.Put(ctx, "/a/b/c.bin", io.MultiReader(strings.NewReader("partial"), errReader{}), -1)
	if !errors.Is(err, endpoint.ErrRefused) {
		t.Errorf("Put with failing body = %v, want ErrRefused", err)
	}
	if got, _ := readAll(t, e, "/a/b/c.bin", 0, -1); string(got) != "short" {
		t.Errorf("after failed Puts read %q, want the old %q", got, "short")
	}
	waitNoTemp(t, filepath.Join(x.base, "a/b"))

	if err := e.Put(ctx, "/a", strings.NewReader("x"), 1); !errors.Is(err, endpoint.ErrRefused) {
		t.Errorf("Put onto a directory = %v, want ErrRefused", err)
	}
	if err := e.Put(ctx, "/a/b/c.bin/under", strings.NewReader("x"), 1); !errors.Is(err, endpoint.ErrRefused) {
		t.Errorf("Put below a file = %v, want ErrRefused", err)
	}

	if err := e.Mkdir(ctx, "/m/n/o"); err != nil {
		t.Fatalf("Mkdir -p: %v", err)
	}
	if err := e.Mkdir(ctx, "/m/n/o"); err != nil {
		t.Errorf("Mkdir existing: %v, want nil", err)
	}
	if in, err := e.Stat(ctx, "/m/n/o"); err != nil || !in.IsDir {
		t.Errorf("Stat after Mkdir = %+v, %v, want a directory", in, err)
	}
	if err := e.Mkdir(ctx, "/a/b/c.bin"); !errors.Is(err, endpoint.ErrExist) {
		t.Errorf("Mkdir over a file = %v, want ErrExist", err)
	}

	if err := e.Delete(ctx, "/a/b/c.bin"); err != nil {
		t.Fatalf("Delete file: %v", err)
	}
	if _, err := e.Stat(ctx, "/a/b/c.bin"); !errors.Is(err, endpoint.ErrNotFound) {
		t.Errorf("Stat after Delete = %v, want ErrNotFound", err)
	}
	if err := e.Delete(ctx, "/a/b/c.bin"); !errors.Is(err, endpoint.ErrNotFound) {
		t.Errorf("Delete missing = %v, want ErrNotFound", err)
	}
	if err := e.Delete(ctx, "/m/n/o"); err != nil {
		t.Errorf("Delete empty dir: %v", err)
	}
	if err := e.Delete(ctx, "/m"); !errors.Is(err, endpoint.ErrRefused) {
		t.Errorf("Delete non-empty dir = %v, want ErrRefused", err)
	}
	if err := e.Delete(ctx, "/"); !errors.Is(err, endpoint.ErrRefused) {
		t.Errorf("Delete root = %v, want ErrRefused", err)
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("body broke") }

// waitNoTemp waits (bounded) until dir holds no temporary upload files:
// a failed Put removes them in the background.
func waitNoTemp(t *testing.T, dir string) {
	t.Helper()
	var tmp []string
	if !testenv.Within(10*time.Second, func() bool {
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		tmp = nil
		for _, en := range ents {
			if strings.Contains(en.Name(), ".lakefed-") {
				tmp = append(tmp, en.Name())
			}
		}
		return len(tmp) == 0
	}) {
		t.Fatalf("temporary files left in %s: %q", dir, tmp)
	}
}

func TestChecksum(t *testing.T) {
	x := startXRootD(t)
	data := randomData(5<<20+3, 3)
	x.seed(t, "f.bin", data)
	e := x.endpoint(t)
	want, _, err := httpx.Sums(bytes.NewReader(data), httpx.Adler32)
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.Checksum(context.Background(), "/f.bin", "adler32")
	if err != nil {
		t.Fatalf("Checksum: %v", err)
	}
	if got != want[httpx.Adler32] {
		t.Errorf("Checksum(adler32) = %q, want %q", got, want[httpx.Adler32])
	}
	if got, err := endpoint.Checksum(context.Background(), e, "/f.bin", "adler32"); err != nil || got != want[httpx.Adler32] {
		t.Errorf("endpoint.Checksum = %q, %v, want %q", got, err, want[httpx.Adler32])
	}
	if _, err := e.Checksum(context.Background(), "/f.bin", "md5"); !errors.Is(err, endpoint.ErrUnsupported) {
		t.Errorf("Checksum(md5) = %v, want ErrUnsupported", err)
	}
	if _, err := e.Checksum(context.Background(), "/none", "adler32"); !errors.Is(err, endpoint.ErrNotFound) {
		t.Errorf("Checksum(missing) = %v, want ErrNotFound", err)
	}
}

func TestReadV(t *testing.T) {
	x := startXRootD(t)
	data := randomData(1<<20, 4)
	x.seed(t, "f.bin", data)
	e := x.endpoint(t)
	ranges := []Range{{0, 10}, {500000, 4096}, {100, 0}, {int64(len(data)) - 7, 7}, {3, 65536}}
	got, err := e.ReadV(context.Background(), "/f.bin", ranges)
	if err != nil {
		t.Fatalf("ReadV: %v", err)
	}
	for i, rg := range ranges {
		if !bytes.Equal(got[i], data[rg.Off:rg.Off+rg.Len]) {
			t.Errorf("ReadV range %d (%d+%d): content differs", i, rg.Off, rg.Len)
		}
	}
	if _, err := e.ReadV(context.Background(), "/f.bin", []Range{{int64(len(data)) - 1, 2}}); !errors.Is(err, endpoint.ErrRefused) {
		t.Errorf("ReadV past end = %v, want ErrRefused", err)
	}
	if _, err := e.ReadV(context.Background(), "/none", []Range{{0, 1}}); !errors.Is(err, endpoint.ErrNotFound) {
		t.Errorf("ReadV(missing) = %v, want ErrNotFound", err)
	}
}

func TestRedirectURL(t *testing.T) {
	x := startXRootD(t)
	x.seed(t, "d/f.txt", []byte("through the http door"))
	e, err := New(context.Background(), endpoint.Config{Name: "xrd", URL: x.srv.RootURL + "/base", HTTPURL: x.srv.URL}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	u, err := e.RedirectURL(context.Background(), "/d/f.txt?authz=secret", endpoint.OpRead)
	if err != nil {
		t.Fatalf("RedirectURL: %v", err)
	}
	if want := x.srv.URL + "base/d/f.txt"; u.String() != want {
		t.Errorf("RedirectURL = %q, want %q", u, want)
	}
	resp, err := httpGet(u.String())
	if err != nil || resp != "through the http door" {
		t.Errorf("GET %s = %q, %v, want the file", u, resp, err)
	}
	plain := x.endpoint(t)
	if _, err := plain.RedirectURL(context.Background(), "/d/f.txt", endpoint.OpRead); !errors.Is(err, endpoint.ErrUnsupported) {
		t.Errorf("RedirectURL without http_url = %v, want ErrUnsupported", err)
	}
}

func TestServerKilled(t *testing.T) {
	x := startXRootD(t)
	x.seed(t, "f.bin", randomData(1000, 5))
	e := newEndpoint(t, x.srv.RootURL+"/base", 2*time.Second)
	ctx := context.Background()
	if _, err := e.Stat(ctx, "/f.bin"); err != nil {
		t.Fatalf("Stat before kill: %v", err)
	}
	rc, err := e.Open(ctx, "/f.bin", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	x.srv.Stop()
	for _, op := range []struct {
		name string
		f    func() error
	}{
		{"stat", func() error { _, err := e.Stat(ctx, "/f.bin"); return err }},
		{"list", func() error { _, err := e.List(ctx, "/"); return err }},
		{"open", func() error { _, err := e.Open(ctx, "/f.bin", 0, -1); return err }},
		{"read of an open file", func() error { _, err := io.ReadAll(rc); return err }},
		{"put", func() error { return e.Put(ctx, "/g", strings.NewReader("x"), 1) }},
		{"probe", func() error { return e.Probe(ctx) }},
	} {
		err := within(t, 30*time.Second, op.f)
		if !errors.Is(err, endpoint.ErrUnavailable) || errors.Is(err, endpoint.ErrNotFound) {
			t.Errorf("%s after the server died = %v, want ErrUnavailable", op.name, err)
		}
	}
	rc.Close()
}

// within runs f and fails the test if it has not returned after d: a
// hang detector, not a speed test (the bound is far above the timeouts).
func within(t *testing.T, d time.Duration, f func() error) error {
	t.Helper()
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	select {
	case err := <-ch:
		return err
	case <-time.After(d):
		t.Fatalf("call still blocked after %v", d)
		return nil
	}
}

func httpGet(u string) (string, error) {
	resp, err := http.Get(u)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return string(b), fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return string(b), err
}
