package s3_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/adler32"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/endpoint/endpointtest"
	"github.com/lakefed/lakefed/internal/endpoint/s3"
	"github.com/lakefed/lakefed/internal/testenv"
)

var quiet = slog.New(slog.DiscardHandler)

// config returns the endpoint config for srv under prefix, changed by mod.
func config(srv *testenv.S3Server, prefix string, mod func(*endpoint.Config)) endpoint.Config {
	cfg := endpoint.Config{
		Name: "s3-" + prefix,
		URL:  "s3://" + srv.Bucket + "/" + prefix,
		S3: &endpoint.S3Config{
			Endpoint: srv.URL, Region: srv.Region, PathStyle: true,
			AccessKey: srv.AccessKey, SecretKey: srv.SecretKey,
		},
	}
	if mod != nil {
		mod(&cfg)
	}
	return cfg
}

func newEP(t *testing.T, cfg endpoint.Config) *s3.Endpoint {
	t.Helper()
	ep, err := s3.New(context.Background(), cfg, quiet)
	if err != nil {
		t.Fatalf("New(%+v) = %v", cfg, err)
	}
	return ep
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// data returns n deterministic pseudo-random bytes.
func data(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 3))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// onlyReader hides everything but Read: a stream of unknown length.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

func readAll(t *testing.T, ep endpoint.Endpoint, p string, off, n int64) ([]byte, error) {
	t.Helper()
	rc, err := ep.Open(ctxFor(t), p, off, n)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

func adler(b []byte) string { return fmt.Sprintf("%08x", adler32.Checksum(b)) }

// curl runs curl with no credentials and returns the HTTP status and the
// body.
func curl(t *testing.T, args ...string) (int, []byte) {
	t.Helper()
	bin := testenv.Require(t, "curl")
	body := filepath.Join(t.TempDir(), "body")
	args = append([]string{"-s", "-o", body, "-w", "%{http_code}"}, args...)
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()} // no AWS_* variables
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("curl %q: %v", args, err)
	}
	var code int
	fmt.Sscan(string(out), &code)
	b, _ := os.ReadFile(body)
	return code, b
}

// TestS3 runs everything that needs a live server against one s3proxy
// (or moto, with LAKEFED_S3_IMPL=moto), each case under its own prefix.
func TestS3(t *testing.T) {
	srv := testenv.StartS3(t)
	t.Logf("S3 server: %s at %s", srv.Impl, srv.URL)

	t.Run("Conformance", func(t *testing.T) {
		endpointtest.Run(t, func(t *testing.T) endpointtest.Target {
			return endpointtest.Target{
				Endpoint: newEP(t, config(srv, "conformance", nil)),
				Caps:     endpointtest.Caps{Checksums: []string{"adler32", "md5"}},
			}
		})
	})
	// The same with every file above 1 MiB sent as a multipart upload.
	t.Run("ConformanceMultipart", func(t *testing.T) {
		endpointtest.Run(t, func(t *testing.T) endpointtest.Target {
			return endpointtest.Target{
				Endpoint: newEP(t, config(srv, "conformance-mp", func(c *endpoint.Config) {
					c.S3.MultipartThreshold = "1MiB"
					c.S3.PartSize = "5MiB"
				})),
				Caps: endpointtest.Caps{Checksums: []string{"adler32"}},
			}
		})
	})
	// An endpoint on the root of the bucket, without prefix.
	t.Run("BucketRoot", func(t *testing.T) {
		ep := newEP(t, config(srv, "", nil))
		ctx := ctxFor(t)
		if err := ep.Put(ctx, "/at-root", strings.NewReader("r"), 1); err != nil {
			t.Fatalf("Put = %v", err)
		}
		ents, err := ep.List(ctx, "/")
		if err != nil {
			t.Fatalf("List(/) = %v", err)
		}
		var names []string
		for _, e := range ents {
			names = append(names, e.Name)
		}
		if !strings.Contains(","+strings.Join(names, ",")+",", ",at-root,") {
			t.Errorf("List(/) = %q, want at-root among them", names)
		}
		if in, err := ep.Stat(ctx, "/"); err != nil || !in.IsDir {
			t.Errorf("Stat(/) = %+v, %v, want a dir", in, err)
		}
	})
	t.Run("Adler32Metadata", func(t *testing.T) { testAdler32(t, srv) })
	t.Run("Multipart", func(t *testing.T) { testMultipart(t, srv) })
	t.Run("PresignedGet", func(t *testing.T) { testPresignedGet(t, srv) })
	t.Run("PresignedExpired", func(t *testing.T) { testPresignedExpired(t, srv) })
	t.Run("PresignedPutDelete", func(t *testing.T) { testPresignedPutDelete(t, srv) })
	t.Run("NotFoundRefusedUnavailable", func(t *testing.T) { testClasses(t, srv) })
	t.Run("Splice", func(t *testing.T) { testSplice(t, srv) })
	t.Run("ConformanceSplice", func(t *testing.T) { testSpliceConformance(t, srv) })
}

// testAdler32: lakefed's Put stores the adler32; Stat and Checksum give it
// back from the server's metadata. An object written by another client
// has none, and Checksum says ErrUnsupported rather than a wrong value.
func testAdler32(t *testing.T, srv *testenv.S3Server) {
	ctx := ctxFor(t)
	ep := newEP(t, config(srv, "adler", nil))
	b := data(100_000, 1)
	if err := ep.Put(ctx, "/f", bytes.NewReader(b), int64(len(b))); err != nil {
		t.Fatalf("Put = %v", err)
	}
	in, err := ep.Stat(ctx, "/f")
	if err != nil {
		t.Fatalf("Stat = %v", err)
	}
	sum := md5.Sum(b)
	if in.Checksums["adler32"] != adler(b) || in.Checksums["md5"] != hex.EncodeToString(sum[:]) {
		t.Errorf("Stat.Checksums = %v, want adler32 %s, md5 %x", in.Checksums, adler(b), sum)
	}
	if in.ETag == "" || strings.Contains(in.ETag, `"`) {
		t.Errorf("Stat.ETag = %q, want an unquoted ETag", in.ETag)
	}
	if got, err := ep.Checksum(ctx, "/f", "adler32"); err != nil || got != adler(b) {
		t.Errorf("Checksum(adler32) = %q, %v, want %s", got, err, adler(b))
	}
	if _, err := ep.Checksum(ctx, "/f", "crc32c"); !errors.Is(err, endpoint.ErrUnsupported) {
		t.Errorf("Checksum(crc32c) = %v, want ErrUnsupported", err)
	}

	// Written through a pre-signed PUT: no metadata.
	u, err := ep.RedirectURL(ctx, "/foreign", endpoint.OpWrite)
	if err != nil {
		t.Fatalf("RedirectURL(write) = %v", err)
	}
	src := filepath.Join(t.TempDir(), "src")
	if err := os.WriteFile(src, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, body := curl(t, "-T", src, u.String()); code != 200 {
		t.Fatalf("curl PUT = %d %s", code, body)
	}
	in, err = ep.Stat(ctx, "/foreign")
	if err != nil || in.Size != int64(len(b)) {
		t.Fatalf("Stat(foreign) = %+v, %v", in, err)
	}
	if _, ok := in.Checksums["adler32"]; ok {
		t.Errorf("Stat(foreign).Checksums = %v, want no adler32 (nobody stored one)", in.Checksums)
	}
	if _, err := ep.Checksum(ctx, "/foreign", "adler32"); !errors.Is(err, endpoint.ErrUnsupported) {
		t.Errorf("Checksum(foreign, adler32) = %v, want ErrUnsupported", err)
	}
}

// counter is a reverse proxy in front of the S3 server that counts the
// kinds of request going through, to show which upload path a Put took.
type counter struct {
	mu     sync.Mutex
	counts map[string]int // guarded by mu
	URL    string
}

func newCounter(t *testing.T, target string) *counter {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	c := &counter{counts: map[string]int{}}
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(u)
		r.Out.Host = r.In.Host // the signature covers the host the client used
	}}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		kind := r.Method
		switch {
		case q.Has("uploads"):
			kind = "initiate"
		case q.Has("partNumber") && r.Header.Get("X-Amz-Copy-Source") != "":
			kind = "copy-part"
		case q.Has("partNumber"):
			kind = "part"
		case r.Method == http.MethodPost && q.Has("uploadId"):
			kind = "complete"
		case r.Method == http.MethodDelete && q.Has("uploadId"):
			kind = "abort"
		case r.Header.Get("X-Amz-Copy-Source") != "":
			kind = "copy"
		}
		c.mu.Lock()
		c.counts[kind]++
		c.mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	c.URL = hs.URL
	return c
}

// take returns the counts so far and starts again.
func (c *counter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.counts
	c.counts = map[string]int{}
	return m
}

// testMultipart sends a 12 MiB stream with 5 MiB parts (three parts, the
// last short), of unknown and of known size, checks content and adler32,
// and counts the requests: the parts, then one server-side copy that adds
// the adler32. With the copy limits made small it takes the multipart-copy
// path that objects above 5 GiB take.
func testMultipart(t *testing.T, srv *testenv.S3Server) {
	ctx := ctxFor(t)
	cnt := newCounter(t, srv.URL)
	ep := newEP(t, config(srv, "multipart", func(c *endpoint.Config) {
		c.S3.Endpoint = cnt.URL
		c.S3.MultipartThreshold = "5MiB"
		c.S3.PartSize = "5MiB"
	}))
	b := data(12<<20, 2)
	tests := []struct {
		name       string
		size       int64
		smallCopy  bool
		wantCounts map[string]int
	}{
		{"unknown-size", -1, false, map[string]int{"initiate": 1, "part": 3, "complete": 1, "copy": 1}},
		{"known-size", int64(len(b)), false, map[string]int{"initiate": 1, "part": 3, "complete": 1, "copy": 1}},
		{"multipart-copy", -1, true, map[string]int{"initiate": 2, "part": 3, "complete": 2, "copy-part": 3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.smallCopy {
				defer s3.SetCopyLimits(4<<20, 5<<20)()
			}
			p := "/" + tc.name
			cnt.take()
			if err := ep.Put(ctx, p, onlyReader{bytes.NewReader(b)}, tc.size); err != nil {
				t.Fatalf("Put(12 MiB, %d) = %v", tc.size, err)
			}
			got := cnt.take()
			for k, v := range tc.wantCounts {
				if got[k] != v {
					t.Errorf("Put made %v requests, want %v", got, tc.wantCounts)
					break
				}
			}
			if got["PUT"] != 0 || got["abort"] != 0 {
				t.Errorf("Put made %v requests, want no single PUT and no abort", got)
			}
			in, err := ep.Stat(ctx, p)
			if err != nil || in.Size != int64(len(b)) {
				t.Fatalf("Stat = %+v, %v, want size %d", in, err, len(b))
			}
			if in.Checksums["adler32"] != adler(b) {
				t.Errorf("Stat.Checksums[adler32] = %q, want %s (stored after the upload)", in.Checksums["adler32"], adler(b))
			}
			if v, ok := in.Checksums["md5"]; ok {
				if sum := md5.Sum(b); v != hex.EncodeToString(sum[:]) {
					t.Errorf("Stat.Checksums[md5] = %s, want %x or none", v, sum)
				}
			}
			got2, err := readAll(t, ep, p, 0, -1)
			if err != nil || !bytes.Equal(got2, b) {
				t.Errorf("read back %d bytes, %v, want %d equal", len(got2), err, len(b))
			}
			// A range across the part boundary at 5 MiB.
			got2, err = readAll(t, ep, p, 5<<20-10, 20)
			if err != nil || !bytes.Equal(got2, b[5<<20-10:5<<20+10]) {
				t.Errorf("read across parts = %v, %v", got2, err)
			}
		})
	}
	// A small file of unknown size is one PUT.
	cnt.take()
	if err := ep.Put(ctx, "/small", onlyReader{bytes.NewReader(b[:1<<20])}, -1); err != nil {
		t.Fatalf("Put(small) = %v", err)
	}
	if got := cnt.take(); got["PUT"] != 1 || got["initiate"] != 0 || got["copy"] != 0 {
		t.Errorf("Put(1 MiB, unknown size) made %v requests, want one PUT", got)
	}
	// A stream that breaks in the second part leaves nothing, and the
	// upload is aborted.
	broken := io.MultiReader(bytes.NewReader(b[:7<<20]), iotestErr{})
	if err := ep.Put(ctx, "/broken", onlyReader{broken}, -1); err == nil {
		t.Errorf("Put(broken stream) = nil, want an error")
	}
	if got := cnt.take(); got["abort"] != 1 {
		t.Errorf("Put(broken stream) made %v requests, want one abort", got)
	}
	if _, err := ep.Stat(ctx, "/broken"); !errors.Is(err, endpoint.ErrNotFound) {
		t.Errorf("Stat(after broken Put) = %v, want ErrNotFound", err)
	}
}

type iotestErr struct{}

func (iotestErr) Read([]byte) (int, error) { return 0, errors.New("source broke") }

// testPresignedGet: a client without credentials reads through the
// pre-signed URL (curl, and davix when installed); the URL carries a
// signature, never the secret key.
func testPresignedGet(t *testing.T, srv *testenv.S3Server) {
	ctx := ctxFor(t)
	ep := newEP(t, config(srv, "presign-get", nil))
	b := data(70_000, 3)
	if err := ep.Put(ctx, "/dir/with space.bin", bytes.NewReader(b), int64(len(b))); err != nil {
		t.Fatalf("Put = %v", err)
	}
	u, err := ep.RedirectURL(ctx, "/dir/with space.bin", endpoint.OpRead)
	if err != nil {
		t.Fatalf("RedirectURL = %v", err)
	}
	q := u.Query()
	if strings.Contains(u.String(), srv.SecretKey) || q.Get("X-Amz-Signature") == "" || q.Get("X-Amz-Expires") != "3600" {
		t.Errorf("RedirectURL = %s, want a SigV4 signature, expiry 3600 s, no secret", u)
	}
	code, got := curl(t, u.String())
	if code != 200 || !bytes.Equal(got, b) {
		t.Errorf("curl GET pre-signed = %d, %d bytes (equal %v), want 200 and the file", code, len(got), bytes.Equal(got, b))
	}
	code, got = curl(t, "-r", "100-199", u.String())
	if code != 206 || !bytes.Equal(got, b[100:200]) {
		t.Errorf("curl ranged GET pre-signed = %d, %d bytes, want 206 and bytes 100-199", code, len(got))
	}
	// Tampering with the path breaks the signature.
	bad := *u
	bad.Path = strings.Replace(bad.Path, "with space.bin", "other.bin", 1)
	if code, _ := curl(t, bad.String()); code != 403 {
		t.Errorf("curl GET with a changed path = %d, want 403", code)
	}
	if _, err := exec.LookPath("davix-get"); err != nil {
		testenv.Missing(t, "davix-get not found on PATH")
	}
	out := filepath.Join(t.TempDir(), "davix.out")
	if o, err := exec.Command("davix-get", u.String(), out).CombinedOutput(); err != nil {
		t.Fatalf("davix-get pre-signed: %v\n%s", err, o)
	}
	if got, _ := os.ReadFile(out); !bytes.Equal(got, b) {
		t.Errorf("davix-get read %d bytes, want the %d of the file", len(got), len(b))
	}
}

// testPresignedExpired: the server refuses a pre-signed URL once its
// expiry has passed. The wait is bounded by a deadline; this checks the
// server's behaviour, not timing.
func testPresignedExpired(t *testing.T, srv *testenv.S3Server) {
	ctx := ctxFor(t)
	ep := newEP(t, config(srv, "presign-exp", func(c *endpoint.Config) { c.S3.PresignExpiry = time.Second }))
	if err := ep.Put(ctx, "/f", strings.NewReader("short-lived"), 11); err != nil {
		t.Fatalf("Put = %v", err)
	}
	u, err := ep.RedirectURL(ctx, "/f", endpoint.OpRead)
	if err != nil {
		t.Fatalf("RedirectURL = %v", err)
	}
	if got := u.Query().Get("X-Amz-Expires"); got != "1" {
		t.Fatalf("X-Amz-Expires = %q, want 1", got)
	}
	signed, err := time.Parse("20060102T150405Z", u.Query().Get("X-Amz-Date"))
	if err != nil {
		t.Fatal(err)
	}
	code := 200
	testenv.Within(20*time.Second, func() bool { // until the 1s expiry has passed
		code, _ = curl(t, u.String())
		return code != 200
	})
	if code != 403 {
		t.Errorf("curl GET of an expired URL = %d, want 403", code)
	}
	if age := time.Since(signed); age < time.Second {
		t.Errorf("the URL was refused %v after signing, before its 1 s expiry", age)
	}
}

// testPresignedPutDelete: a client uploads and deletes through pre-signed
// URLs.
func testPresignedPutDelete(t *testing.T, srv *testenv.S3Server) {
	ctx := ctxFor(t)
	ep := newEP(t, config(srv, "presign-put", nil))
	b := data(50_000, 4)
	src := filepath.Join(t.TempDir(), "src")
	if err := os.WriteFile(src, b, 0o644); err != nil {
		t.Fatal(err)
	}
	u, err := ep.RedirectURL(ctx, "/up/f.bin", endpoint.OpWrite)
	if err != nil {
		t.Fatalf("RedirectURL(write) = %v", err)
	}
	if code, body := curl(t, "-T", src, u.String()); code != 200 {
		t.Fatalf("curl PUT pre-signed = %d %s", code, body)
	}
	if got, err := readAll(t, ep, "/up/f.bin", 0, -1); err != nil || !bytes.Equal(got, b) {
		t.Errorf("after a pre-signed PUT, read %d bytes, %v", len(got), err)
	}
	// The PUT URL does not read.
	if code, _ := curl(t, u.String()); code != 403 {
		t.Errorf("GET with a PUT URL = %d, want 403", code)
	}
	u, err = ep.RedirectURL(ctx, "/up/f.bin", endpoint.OpDelete)
	if err != nil {
		t.Fatalf("RedirectURL(delete) = %v", err)
	}
	if code, body := curl(t, "-X", "DELETE", u.String()); code != 204 {
		t.Errorf("curl DELETE pre-signed = %d %s, want 204", code, body)
	}
	if _, err := ep.Stat(ctx, "/up/f.bin"); !errors.Is(err, endpoint.ErrNotFound) {
		t.Errorf("Stat after a pre-signed DELETE = %v, want ErrNotFound", err)
	}
	if _, err := ep.RedirectURL(ctx, "/", endpoint.OpRead); !errors.Is(err, endpoint.ErrRefused) {
		t.Errorf("RedirectURL(/) = %v, want ErrRefused", err)
	}
}

// testClasses: not found, refused (bad credentials) and unavailable (a
// missing bucket: never "not found") are told apart.
func testClasses(t *testing.T, srv *testenv.S3Server) {
	ctx := ctxFor(t)
	good := newEP(t, config(srv, "classes", nil))
	if err := good.Put(ctx, "/f", strings.NewReader("x"), 1); err != nil {
		t.Fatalf("Put = %v", err)
	}
	badKey := newEP(t, config(srv, "classes", func(c *endpoint.Config) { c.S3.SecretKey = "wrong" }))
	noBucket := newEP(t, config(srv, "classes", func(c *endpoint.Config) { c.URL = "s3://no-such-bucket-here/x" }))
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"missing file", func() error { _, err := good.Stat(ctx, "/nope"); return err }(), endpoint.ErrNotFound},
		{"missing open", func() error { _, err := good.Open(ctx, "/nope", 0, -1); return err }(), endpoint.ErrNotFound},
		{"open a dir", func() error { _, err := good.Open(ctx, "/", 0, -1); return err }(), endpoint.ErrRefused},
		{"bad key stat", func() error { _, err := badKey.Stat(ctx, "/f"); return err }(), endpoint.ErrRefused},
		{"bad key list", func() error { _, err := badKey.List(ctx, "/"); return err }(), endpoint.ErrRefused},
		{"bad key open", func() error { _, err := badKey.Open(ctx, "/f", 0, -1); return err }(), endpoint.ErrRefused},
		{"bad key put", badKey.Put(ctx, "/g", strings.NewReader("y"), 1), endpoint.ErrRefused},
		{"no bucket stat", func() error { _, err := noBucket.Stat(ctx, "/f"); return err }(), endpoint.ErrUnavailable},
		{"no bucket list", func() error { _, err := noBucket.List(ctx, "/"); return err }(), endpoint.ErrUnavailable},
		{"no bucket probe", noBucket.Probe(ctx), endpoint.ErrUnavailable},
	}
	for _, tt := range tests {
		if got := endpoint.Class(tt.err); got != tt.want {
			t.Errorf("%s: error %v has class %v, want %v", tt.name, tt.err, got, tt.want)
		}
	}
}

// TestUnavailable stops the server under an endpoint: every operation then
// wraps ErrUnavailable, never ErrNotFound, and a read cut mid-body fails
// with ErrUnavailable too.
func TestUnavailable(t *testing.T) {
	srv := testenv.StartS3(t)
	ctx := ctxFor(t)
	ep := newEP(t, config(srv, "down", func(c *endpoint.Config) { c.Timeout = 3 * time.Second }))
	big := data(48<<20, 5)
	if err := ep.Put(ctx, "/big", bytes.NewReader(big), int64(len(big))); err != nil {
		t.Fatalf("Put = %v", err)
	}
	rc, err := ep.Open(ctx, "/big", 0, -1)
	if err != nil {
		t.Fatalf("Open = %v", err)
	}
	defer rc.Close()
	if _, err := io.ReadFull(rc, make([]byte, 1000)); err != nil {
		t.Fatalf("first read = %v", err)
	}
	srv.Stop()
	n, err := io.Copy(io.Discard, rc)
	if err == nil || !errors.Is(err, endpoint.ErrUnavailable) {
		t.Errorf("reading on after the server stopped: %d bytes, %v; want an error wrapping ErrUnavailable", n, err)
	}
	ops := map[string]error{
		"Probe":  ep.Probe(ctx),
		"Stat":   func() error { _, err := ep.Stat(ctx, "/big"); return err }(),
		"List":   func() error { _, err := ep.List(ctx, "/"); return err }(),
		"Open":   func() error { _, err := ep.Open(ctx, "/big", 0, 10); return err }(),
		"Put":    ep.Put(ctx, "/new", strings.NewReader("x"), 1),
		"Delete": ep.Delete(ctx, "/big"),
		"Mkdir":  ep.Mkdir(ctx, "/d"),
	}
	for op, err := range ops {
		if !errors.Is(err, endpoint.ErrUnavailable) {
			t.Errorf("%s on a stopped server = %v, want ErrUnavailable", op, err)
		}
	}
}

// TestHungServer: a server that accepts connections and never answers
// makes metadata operations and Open fail with ErrUnavailable once the
// endpoint's timeout has passed, instead of hanging.
func TestHungServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { <-done; c.Close() }()
		}
	}()
	ep := newEP(t, endpoint.Config{Name: "hung", URL: "s3://bucket/p", Timeout: 300 * time.Millisecond,
		S3: &endpoint.S3Config{Endpoint: "http://" + l.Addr().String(), PathStyle: true, AccessKey: "a", SecretKey: "b"}})
	ctx := ctxFor(t)
	ops := map[string]error{
		"Probe": ep.Probe(ctx),
		"Stat":  func() error { _, err := ep.Stat(ctx, "/f"); return err }(),
		"List":  func() error { _, err := ep.List(ctx, "/"); return err }(),
		"Open":  func() error { _, err := ep.Open(ctx, "/f", 0, -1); return err }(),
	}
	for op, err := range ops {
		if !errors.Is(err, endpoint.ErrUnavailable) {
			t.Errorf("%s against a hung server = %v, want ErrUnavailable", op, err)
		}
	}
}

func TestNew(t *testing.T) {
	base := func() endpoint.Config {
		return endpoint.Config{Name: "c", URL: "s3://my-bucket/some/prefix",
			S3: &endpoint.S3Config{Endpoint: "http://127.0.0.1:1", AccessKey: "AKID", SecretKey: "SECRET"}}
	}
	bad := []struct {
		name string
		mod  func(*endpoint.Config)
	}{
		{"no name", func(c *endpoint.Config) { c.Name = "" }},
		{"not s3", func(c *endpoint.Config) { c.URL = "http://my-bucket/x" }},
		{"bad bucket", func(c *endpoint.Config) { c.URL = "s3://My_Bucket/x" }},
		{"credentials in url", func(c *endpoint.Config) { c.URL = "s3://a:b@my-bucket/x" }},
		{"query", func(c *endpoint.Config) { c.URL = "s3://my-bucket/x?y=1" }},
		{"no s3 options", func(c *endpoint.Config) { c.S3 = nil }},
		{"no server", func(c *endpoint.Config) { c.S3.Endpoint = "" }},
		{"server scheme", func(c *endpoint.Config) { c.S3.Endpoint = "ftp://h:1" }},
		{"server path", func(c *endpoint.Config) { c.S3.Endpoint = "http://h:1/path" }},
		{"half credentials", func(c *endpoint.Config) { c.S3.SecretKey = "" }},
		{"part too small", func(c *endpoint.Config) { c.S3.PartSize = "1MiB" }},
		{"part too large", func(c *endpoint.Config) { c.S3.PartSize = "6GiB" }},
		{"threshold too large", func(c *endpoint.Config) { c.S3.MultipartThreshold = "6GiB" }},
		{"bad size", func(c *endpoint.Config) { c.S3.PartSize = "lots" }},
		{"bad unit", func(c *endpoint.Config) { c.S3.PartSize = "5XB" }},
		{"expiry too short", func(c *endpoint.Config) { c.S3.PresignExpiry = time.Millisecond }},
		{"expiry too long", func(c *endpoint.Config) { c.S3.PresignExpiry = 8 * 24 * time.Hour }},
		{"bad ca file", func(c *endpoint.Config) { c.CAFile = "/nonexistent/ca.pem" }},
	}
	for _, tt := range bad {
		cfg := base()
		tt.mod(&cfg)
		if _, err := s3.New(context.Background(), cfg, quiet); err == nil || !strings.HasPrefix(err.Error(), "s3: ") {
			t.Errorf("%s: New = %v, want an error starting with \"s3: \"", tt.name, err)
		}
	}
	ep, err := s3.New(context.Background(), base(), nil)
	if err != nil {
		t.Fatalf("New(valid) = %v", err)
	}
	if ep.Name() != "c" || ep.PresignExpiry() != time.Hour {
		t.Errorf("Name, PresignExpiry = %q, %v, want c, 1h", ep.Name(), ep.PresignExpiry())
	}
}

// TestRedirectURLOffline: pre-signing needs no server (the region is
// known), puts the prefix in the key, and takes credentials from the
// environment when the config has none.
func TestRedirectURLOffline(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "ENVKEYID")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "envsecret")
	t.Setenv("AWS_SESSION_TOKEN", "")
	ep, err := s3.New(context.Background(), endpoint.Config{Name: "o", URL: "s3://bkt/pre/fix/",
		S3: &endpoint.S3Config{Endpoint: "http://127.0.0.1:1", Region: "eu-west-3", PathStyle: true, PresignExpiry: 90 * time.Second}}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		op     endpoint.Op
		path   string
		method string
	}{
		{endpoint.OpRead, "/a/b.root", "GET"},
		{endpoint.OpWrite, "/a/b.root", "PUT"},
		{endpoint.OpDelete, "/a/b.root", "DELETE"},
	}
	for _, tt := range tests {
		u, err := ep.RedirectURL(context.Background(), tt.path, tt.op)
		if err != nil {
			t.Fatalf("RedirectURL(%v) = %v", tt.op, err)
		}
		q := u.Query()
		if u.Path != "/bkt/pre/fix/a/b.root" || q.Get("X-Amz-Expires") != "90" ||
			!strings.HasPrefix(q.Get("X-Amz-Credential"), "ENVKEYID/") || !strings.Contains(q.Get("X-Amz-Credential"), "/eu-west-3/s3/") ||
			strings.Contains(u.String(), "envsecret") {
			t.Errorf("RedirectURL(%v) = %s, want path /bkt/pre/fix/a/b.root, 90 s, env key id, region eu-west-3, no secret", tt.op, u)
		}
	}
	if _, err := ep.RedirectURL(context.Background(), "/a", endpoint.Op(42)); !errors.Is(err, endpoint.ErrUnsupported) {
		t.Errorf("RedirectURL(unknown op) = %v, want ErrUnsupported", err)
	}
}

func ExampleNew() {
	ep, err := s3.New(context.Background(), endpoint.Config{
		Name: "cloud",
		URL:  "s3://lake/atlas",
		S3:   &endpoint.S3Config{Endpoint: "http://127.0.0.1:9000", PathStyle: true, AccessKey: "AKID", SecretKey: "SECRET"},
	}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	u, _ := ep.RedirectURL(context.Background(), "/f.root", endpoint.OpRead) // offline
	fmt.Println(u.Scheme, u.Host, u.Path, u.Query().Get("X-Amz-Expires"))
	// Output: http 127.0.0.1:9000 /lake/atlas/f.root 3600
}
