package interop

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io/fs"
	"log"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/lakefed/lakefed/internal/auth"
	"github.com/lakefed/lakefed/internal/storage"
	"github.com/lakefed/lakefed/internal/testenv"
)

// janeDN is the test user's DN as OpenSSL prints it and rules name it.
const janeDN = "/O=lakefed test/OU=Users/CN=Jane Doe"

// secureSite is a storage role behind auth.Middleware, over TLS from
// auth.ServerTLS, with client certificates checked against a grid CA made
// by openssl.
type secureSite struct {
	url   string // https://127.0.0.1:PORT/
	root  string
	tls   *testenv.TLS // the server certificate's CA, for clients
	caDir string       // hashed dir of that CA (davix --capath, gfal X509_CERT_DIR)
}

// startSecure runs the storage role behind an Authorizer on cfg; the
// grid CA file (client certificates) is added to cfg.
func startSecure(t *testing.T, cfg auth.Config, gridCA string) *secureSite {
	t.Helper()
	s := &secureSite{root: t.TempDir(), tls: testenv.NewTLS(t)}
	s.caDir = hashedCADir(t, s.tls.CAFile)
	st, err := storage.New(storage.Config{Root: s.root}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg.CAFile = gridCA
	a, err := auth.New(context.Background(), cfg, auth.Options{Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	exists := func(_ context.Context, p string) (bool, error) {
		_, err := os.Lstat(filepath.Join(s.root, filepath.FromSlash(p)))
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return err == nil, err
	}
	tlsCfg, _, err := auth.ServerTLS(s.tls.CertFile, s.tls.KeyFile, gridCA, "")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(a.Middleware(st.Handler(), exists))
	srv.TLS = tlsCfg
	srv.Config.ErrorLog = log.New(testWriter{t}, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	s.url = srv.URL + "/"
	return s
}

// testWriter sends the server's log (refused handshakes) to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// gridPKI is a CA, a user certificate and RFC 3820 proxies made by the
// openssl command, as a grid user's credentials would be.
type gridPKI struct {
	caFile                 string
	userCert, userKey      string
	proxyChain, proxyKey   string // proxy certificate then the user's
	proxy2Chain, proxy2Key string // a proxy of the proxy, then the proxy, then the user
	fakeChain, fakeKey     string // like a proxy, but without proxyCertInfo
}

const opensslExt = `[usr]
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth
[proxy]
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
proxyCertInfo=critical,language:id-ppl-inheritAll
[fake]
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
`

func makeGridPKI(t *testing.T) *gridPKI {
	t.Helper()
	openssl := testenv.Require(t, "openssl")
	dir := t.TempDir()
	f := func(name string) string { return filepath.Join(dir, name) }
	if err := os.WriteFile(f("ext.cnf"), []byte(opensslExt), 0o644); err != nil {
		t.Fatal(err)
	}
	newKey := []string{"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"}
	run(t, nil, openssl, append(append([]string{"req", "-x509"}, newKey...),
		"-keyout", f("ca.key"), "-out", f("ca.pem"), "-days", "2", "-subj", "/O=lakefed test/CN=Grid Test CA")...)
	// sign makes NAME.pem/.key with subject subj, signed by the
	// certificate and key of signer, with the extensions of section ext.
	sign := func(name, subj, signer, ext string, serial int) {
		run(t, nil, openssl, append(append([]string{"req", "-new"}, newKey...),
			"-keyout", f(name+".key"), "-out", f(name+".csr"), "-subj", subj)...)
		run(t, nil, openssl, "x509", "-req", "-in", f(name+".csr"), "-CA", f(signer+".pem"), "-CAkey", f(signer+".key"),
			"-set_serial", big.NewInt(int64(serial)).String(), "-days", "1", "-extfile", f("ext.cnf"), "-extensions", ext, "-out", f(name+".pem"))
	}
	sign("user", janeDN, "ca", "usr", 2)
	sign("proxy", janeDN+"/CN=1001", "user", "proxy", 1001)
	sign("proxy2", janeDN+"/CN=1001/CN=1002", "proxy", "proxy", 1002)
	sign("fake", janeDN+"/CN=1003", "user", "fake", 1003)
	cat := func(out string, names ...string) string {
		var b bytes.Buffer
		for _, n := range names {
			p, err := os.ReadFile(f(n + ".pem"))
			if err != nil {
				t.Fatal(err)
			}
			b.Write(p)
		}
		if err := os.WriteFile(f(out), b.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		return f(out)
	}
	return &gridPKI{
		caFile:   f("ca.pem"),
		userCert: f("user.pem"), userKey: f("user.key"),
		proxyChain: cat("proxy-chain.pem", "proxy", "user"), proxyKey: f("proxy.key"),
		proxy2Chain: cat("proxy2-chain.pem", "proxy2", "proxy", "user"), proxy2Key: f("proxy2.key"),
		fakeChain: cat("fake-chain.pem", "fake", "user"), fakeKey: f("fake.key"),
	}
}

// tokenIssuer is an OIDC token issuer on loopback: discovery and a JWKS
// with one RSA key.
type tokenIssuer struct {
	url string
	key *rsa.PrivateKey
}

func startTokenIssuer(t *testing.T) *tokenIssuer {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ti := &tokenIssuer{key: k}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]string{"issuer": ti.url, "jwks_uri": ti.url + "/jwks"})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, r *http.Request) {
		b64 := base64.RawURLEncoding.EncodeToString
		json.NewEncoder(w).Encode(map[string]any{"keys": []map[string]string{{
			"kty": "RSA", "kid": "test", "alg": "RS256", "use": "sig",
			"n": b64(k.N.Bytes()), "e": b64(big.NewInt(int64(k.E)).Bytes()),
		}}})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	ti.url = srv.URL
	return ti
}

// token returns a WLCG token with scope, valid for an hour.
func (ti *tokenIssuer) token(t *testing.T, scope string) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{
		"iss": ti.url, "sub": "jane", "aud": auth.AnyAudience, "scope": scope, "wlcg.ver": "1.0",
		"iat": time.Now().Unix(), "nbf": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix(),
		"jti": big.NewInt(time.Now().UnixNano()).String(),
	})
	tok.Header["kid"] = "test"
	s, err := tok.SignedString(ti.key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// smallOriginal writes 4 MiB of random bytes: the point here is access,
// not volume (interop_test.go moves 100 MiB).
func smallOriginal(t *testing.T) (string, []byte) {
	t.Helper()
	b := make([]byte, 4<<20)
	rand.Read(b)
	p := filepath.Join(t.TempDir(), "original.bin")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p, b
}

func checkFile(t *testing.T, what, p string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s: %d bytes differ from the %d sent", what, len(got), len(want))
	}
}

// curlCode runs curl with args and returns the HTTP status it got ("000"
// when there was none, e.g. a refused handshake).
func curlCode(t *testing.T, curl string, args ...string) string {
	t.Helper()
	out, _ := tryRun(nil, curl, append([]string{"-sS", "-o", os.DevNull, "-w", "%{http_code}"}, args...)...)
	out = strings.TrimSpace(out)
	return out[max(0, len(out)-3):]
}

// TestAuthCurlCertificates: curl with a user certificate, an RFC 3820
// proxy made by openssl, and a proxy of that proxy is Jane; without one
// it is anonymous (401); a certificate that only looks like a proxy fails
// the handshake.
func TestAuthCurlCertificates(t *testing.T) {
	curl := testenv.Require(t, "curl")
	pki := makeGridPKI(t)
	s := startSecure(t, auth.Config{Rules: []auth.Rule{
		{Prefix: "/home/jane", Identities: []string{janeDN}, Allow: []auth.Action{auth.Read, auth.List, auth.Create, auth.Modify, auth.Delete}},
	}}, pki.caFile)
	orig, data := smallOriginal(t)
	base := []string{"--cacert", s.tls.CAFile}
	for _, c := range []struct{ name, cert, key string }{
		{"user", pki.userCert, pki.userKey},
		{"proxy", pki.proxyChain, pki.proxyKey},
		{"proxy-of-proxy", pki.proxy2Chain, pki.proxy2Key},
	} {
		t.Run(c.name, func(t *testing.T) {
			cred := append(base, "--cert", c.cert, "--key", c.key)
			u := s.url + "home/jane/" + c.name + ".bin"
			run(t, nil, curl, append(cred, "-sS", "--fail-with-body", "-T", orig, u)...)
			checkFile(t, "server's copy", filepath.Join(s.root, "home/jane", c.name+".bin"), data)
			local := filepath.Join(t.TempDir(), "down.bin")
			run(t, nil, curl, append(cred, "-sS", "--fail", "-o", local, u)...)
			checkFile(t, "download", local, data)
			if code := curlCode(t, curl, append(cred, s.url+"data/other")...); code != "403" {
				t.Errorf("GET outside the rule = %s, want 403", code)
			}
		})
	}
	if code := curlCode(t, curl, append(base, s.url+"home/jane/user.bin")...); code != "401" {
		t.Errorf("GET without a certificate = %s, want 401", code)
	}
	if code := curlCode(t, curl, append(base, "--cert", pki.fakeChain, "--key", pki.fakeKey, s.url+"home/jane/user.bin")...); code == "200" {
		t.Errorf("GET with a proxy lacking proxyCertInfo = %s, want a refusal", code)
	}
}

// bearerSite starts a site trusting a token issuer, and returns it with a
// token that may read and create under /data.
func bearerSite(t *testing.T) (*secureSite, string, *tokenIssuer) {
	t.Helper()
	ti := startTokenIssuer(t)
	pki := makeGridPKI(t)
	s := startSecure(t, auth.Config{Issuers: []auth.Issuer{{URL: ti.url}}}, pki.caFile)
	return s, ti.token(t, "storage.read:/data storage.create:/data"), ti
}

func TestAuthCurlBearer(t *testing.T) {
	curl := testenv.Require(t, "curl")
	s, tok, ti := bearerSite(t)
	orig, data := smallOriginal(t)
	base := []string{"--cacert", s.tls.CAFile}
	hdr := []string{"-H", "Authorization: Bearer " + tok}
	u := s.url + "data/curl.bin"
	run(t, nil, curl, append(append(base, hdr...), "-sS", "--fail-with-body", "-T", orig, u)...)
	checkFile(t, "server's copy", filepath.Join(s.root, "data/curl.bin"), data)
	local := filepath.Join(t.TempDir(), "down.bin")
	run(t, nil, curl, append(base, "-sS", "--fail", "-o", local, u+"?authz="+url.QueryEscape("Bearer "+tok))...)
	checkFile(t, "download with ?authz=", local, data)
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"no token", []string{u}, "401"},
		{"overwrite with create only", append(hdr, "-T", orig, u), "403"},
		{"delete", append(hdr, "-X", "DELETE", u), "403"},
		{"out of scope", append(hdr, s.url+"other/f"), "403"},
		{"other scope", []string{"-H", "Authorization: Bearer " + ti.token(t, "storage.read:/other"), u}, "403"},
		{"tampered", []string{"-H", "Authorization: Bearer " + tok[:len(tok)-4] + "AAAA", u}, "401"},
	} {
		if code := curlCode(t, curl, append(base, c.args...)...); code != c.want {
			t.Errorf("%s: curl = %s, want %s", c.name, code, c.want)
		}
	}
}

func TestAuthDavixBearer(t *testing.T) {
	put, get := testenv.Require(t, "davix-put"), testenv.Require(t, "davix-get")
	s, tok, _ := bearerSite(t)
	orig, data := smallOriginal(t)
	u := s.url + "data/davix.bin"
	hdr := []string{"--capath", s.caDir, "--retry", "0", "-H", "Authorization: Bearer " + tok}
	run(t, nil, put, append(hdr, orig, u)...)
	checkFile(t, "server's copy", filepath.Join(s.root, "data/davix.bin"), data)
	local := filepath.Join(t.TempDir(), "down.bin")
	run(t, nil, get, append(hdr, u, local)...)
	checkFile(t, "download", local, data)
	if out, err := tryRun(nil, get, "--capath", s.caDir, "--retry", "0", u, filepath.Join(t.TempDir(), "x")); err == nil {
		t.Errorf("davix-get without a token succeeded:\n%s", out)
	}
}

func TestAuthGfalBearer(t *testing.T) {
	gfal := testenv.Require(t, "gfal-copy")
	s, tok, _ := bearerSite(t)
	orig, data := smallOriginal(t)
	env := []string{"X509_CERT_DIR=" + s.caDir, "BEARER_TOKEN=" + tok,
		"X509_USER_PROXY=" + filepath.Join(t.TempDir(), "no-proxy")}
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		env = append(env, "GFAL_PYTHONBIN=/usr/bin/python3")
	}
	u := s.url + "data/gfal.bin"
	run(t, env, gfal, "file://"+orig, u)
	checkFile(t, "server's copy", filepath.Join(s.root, "data/gfal.bin"), data)
	local := filepath.Join(t.TempDir(), "down.bin")
	run(t, env, gfal, u, "file://"+local)
	checkFile(t, "download", local, data)
	noTok := []string{"X509_CERT_DIR=" + s.caDir, "X509_USER_PROXY=" + filepath.Join(t.TempDir(), "no-proxy")}
	if out, err := tryRun(noTok, gfal, u, "file://"+filepath.Join(t.TempDir(), "x")); err == nil {
		t.Errorf("gfal-copy without a token succeeded:\n%s", out)
	}
}

func TestAuthRcloneBearer(t *testing.T) {
	rclone := testenv.Require(t, "rclone")
	s, tok, _ := bearerSite(t)
	orig, data := smallOriginal(t)
	env := func(tok string) []string {
		return []string{
			"RCLONE_CONFIG=" + filepath.Join(t.TempDir(), "no-rclone.conf"),
			"RCLONE_CONFIG_LF_TYPE=webdav",
			"RCLONE_CONFIG_LF_URL=" + s.url,
			"RCLONE_CONFIG_LF_VENDOR=other",
			"RCLONE_CONFIG_LF_BEARER_TOKEN=" + tok,
		}
	}
	run(t, env(tok), rclone, "--ca-cert", s.tls.CAFile, "--retries", "1", "copyto", orig, "lf:data/rclone.bin")
	checkFile(t, "server's copy", filepath.Join(s.root, "data/rclone.bin"), data)
	local := filepath.Join(t.TempDir(), "down.bin")
	run(t, env(tok), rclone, "--ca-cert", s.tls.CAFile, "--retries", "1", "copyto", "lf:data/rclone.bin", local)
	checkFile(t, "download", local, data)
	if out, err := tryRun(env("not-a-token"), rclone, "--ca-cert", s.tls.CAFile, "--retries", "1", "--low-level-retries", "1",
		"copyto", "lf:data/rclone.bin", filepath.Join(t.TempDir(), "x")); err == nil {
		t.Errorf("rclone with a bad token succeeded:\n%s", out)
	}
}

// BenchmarkAuthHEAD is the HEAD rate of the storage role's handler with
// tokens off (no middleware) and on (a WLCG token checked per request,
// its issuer's keys and the token warm in the caches), in process, so
// the middleware's share is not hidden behind network time. The issue's
// goal: on ≥ 0.9 × off.
func BenchmarkAuthHEAD(b *testing.B) {
	root := b.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "data"), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "data", "f"), make([]byte, 1<<20), 0o644); err != nil {
		b.Fatal(err)
	}
	st, err := storage.New(storage.Config{Root: root}, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		b.Fatal(err)
	}
	ti := &tokenIssuer{key: k}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]string{"issuer": ti.url, "jwks_uri": ti.url + "/jwks"})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, r *http.Request) {
		b64 := base64.RawURLEncoding.EncodeToString
		json.NewEncoder(w).Encode(map[string]any{"keys": []map[string]string{{
			"kty": "RSA", "kid": "test", "n": b64(k.N.Bytes()), "e": b64(big.NewInt(int64(k.E)).Bytes()),
		}}})
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	ti.url = srv.URL
	a, err := auth.New(context.Background(), auth.Config{Issuers: []auth.Issuer{{URL: ti.url}}}, auth.Options{Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{
		"iss": ti.url, "sub": "jane", "aud": auth.AnyAudience, "scope": "storage.read:/data",
		"exp": time.Now().Add(time.Hour).Unix(),
	})
	tok.Header["kid"] = "test"
	signed, err := tok.SignedString(k)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		h    http.Handler
		hdr  string
	}{{"off", st.Handler(), ""}, {"token", a.Middleware(st.Handler(), nil), "Bearer " + signed}} {
		b.Run(c.name, func(b *testing.B) {
			r := httptest.NewRequest(http.MethodHead, "http://127.0.0.1/data/f", nil)
			if c.hdr != "" {
				r.Header.Set("Authorization", c.hdr)
			}
			for b.Loop() {
				w := httptest.NewRecorder()
				c.h.ServeHTTP(w, r)
				if w.Code != http.StatusOK {
					b.Fatalf("HEAD = %d", w.Code)
				}
			}
		})
	}
}
