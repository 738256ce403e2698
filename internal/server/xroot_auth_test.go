package server_test

import (
	"bytes"
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/auth/authtest"
	"github.com/lakefed/lakefed/internal/config"
	"github.com/lakefed/lakefed/internal/server/servertest"
	"github.com/lakefed/lakefed/internal/testenv"
)

// xrd runs an XRootD client tool within a minute, trusting the CAs of
// certDir, and returns its output.
func xrd(t *testing.T, certDir, name string, args ...string) (string, error) {
	t.Helper()
	return xrdEnv(t, nil, certDir, name, args...)
}

// xrdEnv is xrd with env added to the tool's environment.
func xrdEnv(t *testing.T, env []string, certDir, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	// No token but the test's: none XrdCl's ztn could find around it
	// (its last place, /tmp/bt_u<uid>, cannot be moved).
	cmd.Env = append(os.Environ(), "X509_CERT_DIR="+certDir, "XRD_LOGLEVEL=Debug",
		"XRD_CONNECTIONRETRY=1", "XRD_REQUESTTIMEOUT=20", "XRD_STREAMTIMEOUT=20",
		"BEARER_TOKEN=", "BEARER_TOKEN_FILE=", "XDG_RUNTIME_DIR="+certDir)
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// hashedCADir is an OpenSSL hashed CA directory holding ca's CA, as
// XrdCl reads X509_CERT_DIR.
func hashedCADir(t *testing.T, ca *testenv.TLS) string {
	t.Helper()
	openssl := testenv.Require(t, "openssl")
	h, err := exec.Command(openssl, "x509", "-hash", "-noout", "-in", ca.CAFile).Output()
	if err != nil {
		t.Fatalf("openssl x509 -hash: %v", err)
	}
	b, err := os.ReadFile(ca.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, strings.TrimSpace(string(h))+".0"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// With an auth section and the front's certificate, the root:// door
// speaks roots:// and decides each request on the token in its authz=
// CGI: xrdcp and xrdfs over roots:// read, list and write what the
// token's scopes allow (the token passed on to the storage site), and
// are refused (kXR_NotAuthorized) without it or with an expired one;
// anonymous callers keep what the rules give anyone.
func TestXrootDoorTokensAndTLS(t *testing.T) {
	xrdcp := testenv.Require(t, "xrdcp")
	xrdfs := testenv.Require(t, "xrdfs")
	is := authtest.NewIssuer(t)
	ca := testenv.NewTLS(t)
	certDir := hashedCADir(t, ca)
	fed := servertest.Start(t, servertest.Options{Sites: 1, Configure: func(c *config.Config) {
		c.ListenXroot = "127.0.0.1:0"
		c.TLSCert, c.TLSKey = ca.CertFile, ca.KeyFile
		c.Auth = &config.Auth{
			Issuers: []config.Issuer{{Issuer: is.URL}},
			Rules:   []config.Rule{{Prefix: "/public", Anonymous: []string{"read", "list"}}},
		}
		c.Federation.Endpoints[0].PassToken = true
	}})
	site := fed.Sites[0]
	data := bytes.Repeat([]byte("lakefed roots door "), 50000)
	for _, p := range []string{"data/f", "public/p"} {
		os.MkdirAll(filepath.Join(site.Dir, filepath.Dir(p)), 0o755)
		if err := os.WriteFile(filepath.Join(site.Dir, p), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	door := strings.TrimPrefix(fed.Server.XrootURL(), "root://")
	if door == "" {
		t.Fatal("no door")
	}
	roots := "roots://" + door + "/"
	tok := url.QueryEscape("Bearer " + is.Token(t, "storage.read:/data storage.create:/data/up", time.Hour))
	expired := is.Token(t, "storage.read:/data", -time.Hour)
	dir := t.TempDir()

	out, err := xrd(t, certDir, xrdcp, "-f", "--cksum", "adler32", roots+"/data/f?authz="+tok, filepath.Join(dir, "f"))
	if err != nil {
		t.Fatalf("xrdcp roots:// with a token: %v\n%s", err, tail(out, 30))
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "f")); !bytes.Equal(got, data) {
		t.Fatalf("xrdcp copied %d bytes, not the file", len(got))
	}
	if !strings.Contains(out, "TLS hand-shake done") {
		t.Errorf("xrdcp's log does not say the TLS handshake was done")
	}

	// ztn: the token from BEARER_TOKEN in kXR_auth, no CGI.
	bt := "BEARER_TOKEN=" + is.Token(t, "storage.read:/data", time.Hour)
	out, err = xrdEnv(t, []string{bt}, certDir, xrdcp, "-f", roots+"/data/f", filepath.Join(dir, "ztn"))
	if err != nil || !strings.Contains(out, "Authenticated with ztn") {
		t.Errorf("xrdcp roots:// with BEARER_TOKEN: %v, want a copy authenticated with ztn\n%s", err, grepErr(out))
	}

	for _, c := range []struct {
		name, url, want string
	}{
		{"no token", roots + "/data/f", "needs credentials"},
		{"expired token", roots + "/data/f?authz=" + expired, "expired"},
		{"token for another path", roots + "/data/f?authz=" + url.QueryEscape(is.Token(t, "storage.read:/other", time.Hour)), "no scope"},
	} {
		out, err := xrd(t, certDir, xrdcp, "-f", c.url, filepath.Join(dir, "refused"))
		if err == nil || !strings.Contains(out, "[3010]") || !strings.Contains(out, c.want) {
			t.Errorf("xrdcp %s: %v, want kXR_NotAuthorized [3010] saying %q\n%s", c.name, err, c.want, grepErr(out))
		}
	}
	if out, err := xrd(t, certDir, xrdcp, "-f", "root://"+door+"//public/p", filepath.Join(dir, "p")); err != nil {
		t.Errorf("anonymous xrdcp root:// of /public: %v\n%s", err, grepErr(out))
	}

	src := filepath.Join(dir, "up")
	if err := os.WriteFile(src, data[:100000], 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := xrd(t, certDir, xrdcp, src, roots+"/data/up/g?authz="+tok); err != nil {
		t.Errorf("xrdcp roots:// upload with a create token: %v\n%s", err, grepErr(out))
	} else if got, _ := os.ReadFile(filepath.Join(site.Dir, "data", "up", "g")); !bytes.Equal(got, data[:100000]) {
		t.Errorf("upload stored %d bytes on the site, want 100000", len(got))
	}
	// A token that may only create (no read): xrdcp's stat of its
	// destination is allowed, as is the upload of a new file.
	createOnly := url.QueryEscape("Bearer " + is.Token(t, "storage.create:/data/only", time.Hour))
	if out, err := xrd(t, certDir, xrdcp, src, roots+"/data/only/h?authz="+createOnly); err != nil {
		t.Errorf("xrdcp roots:// upload with a create-only token: %v\n%s", err, grepErr(out))
	} else if got, _ := os.ReadFile(filepath.Join(site.Dir, "data", "only", "h")); !bytes.Equal(got, data[:100000]) {
		t.Errorf("create-only upload stored %d bytes on the site, want 100000", len(got))
	}
	if out, err := xrd(t, certDir, xrdcp, "-f", src, roots+"/data/only/h?authz="+createOnly); err == nil || !strings.Contains(out, "[30") {
		t.Errorf("xrdcp -f over an existing file with a create-only token: %v, want a refusal\n%s", err, grepErr(out))
	}
	if out, err := xrd(t, certDir, xrdcp, "-f", src, roots+"/data/g?authz="+tok); err == nil || !strings.Contains(out, "[3010]") {
		t.Errorf("xrdcp upload outside the token's create scope: %v, want [3010]\n%s", err, grepErr(out))
	}

	out, err = xrd(t, certDir, xrdfs, roots, "ls", "/data?authz="+tok)
	if err != nil || !strings.Contains(out, "/data/f") {
		t.Errorf("xrdfs roots:// ls with a token: %v\n%s", err, grepErr(out))
	}
	out, err = xrd(t, certDir, xrdfs, roots, "stat", "/data/missing?authz="+tok)
	if err == nil || !strings.Contains(out, "[3011]") {
		t.Errorf("xrdfs stat of a missing file with a token: %v, want kXR_NotFound [3011]\n%s", err, grepErr(out))
	}
	out, err = xrd(t, certDir, xrdfs, roots, "stat", "/data/missing")
	if err == nil || !strings.Contains(out, "[3010]") {
		t.Errorf("xrdfs stat of a missing private file without a token: %v, want kXR_NotAuthorized [3010], not NotFound\n%s", err, grepErr(out))
	}
}

func tail(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(l[max(0, len(l)-n):], "\n")
}

// grepErr keeps the lines of a client's debug log that say what failed.
func grepErr(s string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, "rror") || strings.Contains(l, "[3") {
			keep = append(keep, l)
		}
	}
	return tail(strings.Join(keep, "\n"), 15)
}
