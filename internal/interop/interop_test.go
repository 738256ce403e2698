// Package interop tests the storage role with the real clients of the
// field (curl, davix, gfal2, rclone) over HTTP and HTTPS: each uploads and
// downloads a 100 MiB file of random bytes, and the test checks the adler32
// of the server's copy, of the downloaded copy and of the server's
// RFC 3230 Digest answer against the original. It holds tests only.
//
// The clients need these to trust the test CA over HTTPS:
//
//	curl        --cacert ca.pem
//	davix-*     --capath DIR   (DIR holds ca.pem and its `openssl rehash` link)
//	gfal-*      env X509_CERT_DIR=DIR (the same hashed directory)
//	rclone      --ca-cert ca.pem
package interop

import (
	"bytes"
	"context"
	"fmt"
	"hash/adler32"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/httpx"
	"github.com/lakefed/lakefed/internal/storage"
	"github.com/lakefed/lakefed/internal/storage/storagetest"
	"github.com/lakefed/lakefed/internal/testenv"
)

// fileSize is the size of the file each client moves up and down.
const fileSize = 100 << 20

// cmdTimeout bounds every client command.
const cmdTimeout = 2 * time.Minute

// server is one storage role under test.
type server struct {
	url    string // base URL, ending in "/"
	root   string // the directory it serves
	client *http.Client
	tls    *testenv.TLS // nil for plain HTTP
	caDir  string       // hashed CA directory (HTTPS only) for davix and gfal2
}

// startStorage runs the storage role on a loopback port, over HTTPS when
// secure is set.
func startStorage(t *testing.T, secure bool) *server {
	t.Helper()
	s := &server{client: &http.Client{Timeout: cmdTimeout}}
	var cfg storage.Config
	if secure {
		s.tls = testenv.NewTLS(t)
		cfg.TLSCert, cfg.TLSKey = s.tls.CertFile, s.tls.KeyFile
		s.client = s.tls.Client()
		s.client.Timeout = cmdTimeout
		s.caDir = hashedCADir(t, s.tls.CAFile)
	}
	site := storagetest.Start(t, cfg)
	s.url, s.root = site.URL, site.Dir
	return s
}

// hashedCADir makes the OpenSSL CA directory davix (--capath) and gfal2
// (X509_CERT_DIR) read: the CA and its <subject-hash>.0 link.
func hashedCADir(t *testing.T, caFile string) string {
	t.Helper()
	openssl := testenv.Require(t, "openssl")
	dir := t.TempDir()
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "lakefed-test-ca.pem"), pem, 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, nil, openssl, "rehash", dir)
	links, _ := filepath.Glob(filepath.Join(dir, "*.0"))
	if len(links) != 1 {
		t.Fatalf("openssl rehash %s made %d hash links, want 1", dir, len(links))
	}
	return dir
}

// run runs a command with extra environment env, bounded by cmdTimeout,
// and fails the test with its output when it does not exit 0.
func run(t *testing.T, env []string, name string, args ...string) string {
	t.Helper()
	out, err := tryRun(env, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return out
}

func tryRun(env []string, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		err = fmt.Errorf("%w (killed after %v)", err, cmdTimeout)
	}
	return string(out), err
}

// original is the 100 MiB file a test moves around.
type original struct {
	path    string
	size    int64
	adler32 string
}

// makeOriginal writes fileSize random bytes into a fresh directory.
func makeOriginal(t *testing.T, seed uint64) original {
	t.Helper()
	p := filepath.Join(t.TempDir(), "original.bin")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	h := adler32.New()
	r := rand.New(rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)}))
	buf := make([]byte, 1<<20)
	for range fileSize / len(buf) {
		for i := 0; i < len(buf); i += 8 {
			v := r.Uint64()
			for j := range 8 {
				buf[i+j] = byte(v >> (8 * j))
			}
		}
		h.Write(buf)
		if _, err := f.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return original{path: p, size: fileSize, adler32: fmt.Sprintf("%08x", h.Sum32())}
}

// fileAdler32 returns the size and adler32 of a local file.
func fileAdler32(t *testing.T, p string) (int64, string) {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatalf("open %s: %v", p, err)
	}
	defer f.Close()
	sums, n, err := httpx.Sums(f, httpx.Adler32)
	if err != nil {
		t.Fatalf("read %s: %v", p, err)
	}
	return n, sums[httpx.Adler32]
}

// checkSame asserts the local file p is the original by size and adler32.
func checkSame(t *testing.T, what, p string, o original) {
	t.Helper()
	n, sum := fileAdler32(t, p)
	if n != o.size || sum != o.adler32 {
		t.Errorf("%s: %d bytes, adler32 %s; want %d bytes, adler32 %s", what, n, sum, o.size, o.adler32)
	}
}

// serverDigest asks the server for the file's adler32 with Want-Digest.
func serverDigest(t *testing.T, s *server, name string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodHead, s.url+name, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Want-Digest", "adler32")
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatalf("HEAD %s: %v", name, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("HEAD %s: %s", name, resp.Status)
	}
	return httpx.ParseDigest(resp.Header.Get("Digest"))[httpx.Adler32]
}

// checkServer asserts the server's copy of name is the original, on disk
// and in its Digest answer.
func checkServer(t *testing.T, s *server, name string, o original) {
	t.Helper()
	checkSame(t, "server's "+name, filepath.Join(s.root, filepath.FromSlash(name)), o)
	if d := serverDigest(t, s, name); d != o.adler32 {
		t.Errorf("HEAD %s with Want-Digest: adler32 %q, want %s", name, d, o.adler32)
	}
}

// client is how one tool uploads and downloads, given the server.
type client struct {
	tools    []string
	env      func(s *server) []string
	upload   func(s *server, local, url string) []string // argv
	download func(s *server, url, local string) []string
}

// gfalEnv points gfal2 at the CA and at Debian's python3, which has the
// gfal2 bindings (the python first on PATH may be another one).
func gfalEnv(s *server) []string {
	var env []string
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		env = append(env, "GFAL_PYTHONBIN=/usr/bin/python3")
	}
	if s.caDir != "" {
		env = append(env, "X509_CERT_DIR="+s.caDir)
	}
	return env
}

var clients = map[string]client{
	"curl": {
		tools: []string{"curl"},
		upload: func(s *server, local, url string) []string {
			return withTLS(s, []string{"curl", "-sS", "--fail-with-body", "-T", local, url}, "--cacert", s.caFile())
		},
		download: func(s *server, url, local string) []string {
			return withTLS(s, []string{"curl", "-sS", "--fail", "-o", local, url}, "--cacert", s.caFile())
		},
	},
	"davix": {
		tools: []string{"davix-put", "davix-get"},
		upload: func(s *server, local, url string) []string {
			return withTLS(s, []string{"davix-put", "--retry", "0", local, url}, "--capath", s.caDir)
		},
		download: func(s *server, url, local string) []string {
			return withTLS(s, []string{"davix-get", "--retry", "0", url, local}, "--capath", s.caDir)
		},
	},
	"gfal": {
		tools: []string{"gfal-copy"},
		env:   gfalEnv,
		upload: func(s *server, local, url string) []string {
			return []string{"gfal-copy", "-f", "file://" + local, url}
		},
		download: func(s *server, url, local string) []string {
			return []string{"gfal-copy", "-f", url, "file://" + local}
		},
	},
	"rclone": {
		tools: []string{"rclone"},
		// A webdav remote "lf" from the environment alone; the config
		// file named does not exist, so no user config is read.
		env: func(s *server) []string {
			return []string{
				"RCLONE_CONFIG=" + filepath.Join(s.root, "..", "no-rclone.conf"),
				"RCLONE_CONFIG_LF_TYPE=webdav",
				"RCLONE_CONFIG_LF_URL=" + s.url,
				"RCLONE_CONFIG_LF_VENDOR=other",
			}
		},
		upload: func(s *server, local, url string) []string {
			return withTLS(s, []string{"rclone", "copyto", "--retries", "1", local, rcloneRemote(s, url)}, "--ca-cert", s.caFile())
		},
		download: func(s *server, url, local string) []string {
			return withTLS(s, []string{"rclone", "copyto", "--retries", "1", rcloneRemote(s, url), local}, "--ca-cert", s.caFile())
		},
	},
}

func (s *server) caFile() string {
	if s.tls == nil {
		return ""
	}
	return s.tls.CAFile
}

// withTLS appends the flag and its value when s serves HTTPS.
func withTLS(s *server, argv []string, flag, value string) []string {
	if s.tls == nil {
		return argv
	}
	return append(argv[:1:1], append([]string{flag, value}, argv[1:]...)...)
}

func rcloneRemote(s *server, url string) string {
	return "lf:" + strings.TrimPrefix(url, s.url)
}

// testClient moves one original up and down with the named client, over
// HTTP and over HTTPS.
func testClient(t *testing.T, name string, seed uint64) {
	c := clients[name]
	tools := map[string]string{}
	for _, tool := range c.tools {
		tools[tool] = testenv.Require(t, tool)
	}
	o := makeOriginal(t, seed)
	for _, scheme := range []string{"http", "https"} {
		t.Run(scheme, func(t *testing.T) {
			s := startStorage(t, scheme == "https")
			var env []string
			if c.env != nil {
				env = c.env(s)
			}
			remote := name + "/dir/file.bin"
			argv := c.upload(s, o.path, s.url+remote)
			run(t, env, tools[argv[0]], argv[1:]...)
			checkServer(t, s, remote, o)

			local := filepath.Join(t.TempDir(), "download.bin")
			argv = c.download(s, s.url+remote, local)
			run(t, env, tools[argv[0]], argv[1:]...)
			checkSame(t, name+" download", local, o)
		})
	}
}

func TestCurl(t *testing.T)   { testClient(t, "curl", 1) }
func TestDavix(t *testing.T)  { testClient(t, "davix", 2) }
func TestGfal(t *testing.T)   { testClient(t, "gfal", 3) }
func TestRclone(t *testing.T) { testClient(t, "rclone", 4) }

// certProblem matches how each client says it does not trust the server.
var certProblem = regexp.MustCompile(`(?i)certificate|issuer|x509`)

// TestHTTPSNeedsCA makes sure the HTTPS runs above prove something: each
// client, without the CA flag, refuses the server.
func TestHTTPSNeedsCA(t *testing.T) {
	s := startStorage(t, true)
	if err := os.WriteFile(filepath.Join(s.root, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	tests := []struct {
		tool string
		env  []string
		args []string
	}{
		{"curl", nil, []string{"-sS", "--fail", "-o", filepath.Join(out, "curl"), s.url + "f"}},
		{"davix-get", nil, []string{"--retry", "0", s.url + "f", filepath.Join(out, "davix")}},
		{"gfal-copy", gfalEnv(&server{}), []string{s.url + "f", "file://" + filepath.Join(out, "gfal")}},
		{"rclone", clients["rclone"].env(s), []string{"copyto", "--retries", "1", "--low-level-retries", "1",
			"lf:f", filepath.Join(out, "rclone")}},
	}
	for _, tt := range tests {
		t.Run(tt.tool, func(t *testing.T) {
			bin := testenv.Require(t, tt.tool)
			// An empty X509_CERT_DIR keeps gfal2 from finding a CA by chance.
			env := append(tt.env, "X509_CERT_DIR="+t.TempDir())
			out, err := tryRun(env, bin, tt.args...)
			if err == nil || !certProblem.MatchString(out) {
				t.Errorf("%s without the CA: err %v; want a certificate error\n%s", tt.tool, err, out)
			}
		})
	}
}

// TestGfalSum checks gfal-sum's ADLER32 (asked with Want-Digest) over HTTP
// and HTTPS against the adler32 of the bytes.
func TestGfalSum(t *testing.T) {
	bin := testenv.Require(t, "gfal-sum")
	data := make([]byte, 3<<20+11)
	r := rand.New(rand.NewPCG(5, 6))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	want := fmt.Sprintf("%08x", adler32.Checksum(data))
	for _, scheme := range []string{"http", "https"} {
		t.Run(scheme, func(t *testing.T) {
			s := startStorage(t, scheme == "https")
			if err := os.WriteFile(filepath.Join(s.root, "f.bin"), data, 0o644); err != nil {
				t.Fatal(err)
			}
			out := run(t, gfalEnv(s), bin, s.url+"f.bin", "ADLER32")
			// gfal-sum prints "URL CHECKSUM".
			f := strings.Fields(out)
			if len(f) != 2 || f[0] != s.url+"f.bin" || !strings.EqualFold(f[1], want) {
				t.Errorf("gfal-sum = %q, want %q", strings.TrimSpace(out), s.url+"f.bin "+want)
			}
		})
	}
}

// TestCurlDigest asks for the checksum the way scripts do, with curl and
// Want-Digest, so the header is checked from a client that is not Go's.
func TestCurlDigest(t *testing.T) {
	bin := testenv.Require(t, "curl")
	s := startStorage(t, false)
	data := bytes.Repeat([]byte("lakefed "), 1000)
	if err := os.WriteFile(filepath.Join(s.root, "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	out := run(t, nil, bin, "-sS", "--fail", "-I", "-H", "Want-Digest: adler32", s.url+"f")
	want := fmt.Sprintf("adler32=%08x", adler32.Checksum(data))
	found := false
	for _, line := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && strings.EqualFold(k, "Digest") {
			found = true
			if got := httpx.ParseDigest(v)[httpx.Adler32]; "adler32="+got != want {
				t.Errorf("curl -I Want-Digest: Digest %q, want %s", strings.TrimSpace(v), want)
			}
		}
	}
	if !found {
		t.Errorf("curl -I Want-Digest: no Digest header in\n%s", out)
	}
}
