package server_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/auth/authtest"
	"github.com/lakefed/lakefed/internal/config"
	"github.com/lakefed/lakefed/internal/endpoint/xroot/xrdwire"
	"github.com/lakefed/lakefed/internal/server/servertest"
	"github.com/lakefed/lakefed/internal/testenv"
)

// startCertDoor starts a federation with a roots:// door whose auth
// trusts v's CA and vomsdir: /cms/prod for the FQAN
// /cms/Role=production, /jane for the user's DN. It returns the door's
// host:port, the hashed dir of the server certificate's CA, and the
// file's content (at /cms/prod/f and /jane/f).
func startCertDoor(t *testing.T, v *authtest.VOMS, tlsRequired bool) (string, string, []byte) {
	t.Helper()
	ca := testenv.NewTLS(t)
	certDir := hashedCADir(t, ca)
	fed := servertest.Start(t, servertest.Options{Sites: 1, Configure: func(c *config.Config) {
		c.ListenXroot = "127.0.0.1:0"
		c.TLSCert, c.TLSKey = ca.CertFile, ca.KeyFile
		c.XrootTLSRequired = tlsRequired
		// The site's directory read directly: the federator has no
		// certificate to pass on to the site's guarded HTTP server.
		c.Federation.Endpoints[0].URL = "file://" + c.Storage[0].Root
		c.Auth = &config.Auth{CAFile: v.CAFile, VOMSDir: v.VOMSDir, Rules: []config.Rule{
			{Prefix: "/cms/prod", FQANs: []string{"/cms/Role=production"}, Allow: []string{"read", "list"}},
			{Prefix: "/jane", Identities: []string{v.UserDN}, Allow: []string{"read", "list"}},
			{Prefix: "/public", Anonymous: []string{"read", "list"}},
		}}
	}})
	data := bytes.Repeat([]byte("certificate door "), 30000)
	for _, p := range []string{"cms/prod/f", "jane/f", "public/f"} {
		os.MkdirAll(filepath.Join(fed.Sites[0].Dir, filepath.Dir(p)), 0o755)
		if err := os.WriteFile(filepath.Join(fed.Sites[0].Dir, p), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	door := strings.TrimPrefix(fed.Server.XrootURL(), "root://")
	if door == "" {
		t.Fatal("no door")
	}
	return door, certDir, data
}

// TestXrootDoorCertificates: xrdcp over roots:// presenting a client
// certificate (X509_USER_PROXY holding the certificate and its key)
// reads what a rule on its DN grants; another certificate of the same CA
// and no certificate are refused there. A VOMS proxy from this xrdcp
// (5.5, which sends only the leaf of X509_USER_PROXY) is refused with
// the reason, not a bare TLS error; TestXrootDoorVOMS presents proxies
// with a client that sends the chain.
func TestXrootDoorCertificates(t *testing.T) {
	xrdcp := testenv.Require(t, "xrdcp")
	v := authtest.NewVOMS(t, testenv.Require(t, "voms-proxy-fake"))
	door, certDir, data := startCertDoor(t, v, false)
	roots := "roots://" + door + "/"
	userFile := catFiles(t, v.UserCert, v.UserKey)
	rogueFile := catFiles(t, v.RogueCert(), v.RogueKey())
	for _, c := range []struct {
		name  string
		env   []string
		path  string
		allow bool
		want  string // in the refusal
	}{
		{"user certificate on its DN", []string{"X509_USER_PROXY=" + userFile}, "/jane/f", true, ""},
		{"user certificate outside its rules", []string{"X509_USER_PROXY=" + userFile}, "/cms/prod/f", false, "may not read"},
		{"another certificate on the DN rule", []string{"X509_USER_PROXY=" + rogueFile}, "/jane/f", false, "may not read"},
		{"no certificate", nil, "/jane/f", false, "needs credentials"},
		{"proxy without its chain", []string{"X509_USER_PROXY=" + v.Proxy(t, "/cms/Role=production")}, "/cms/prod/f", false, "end-entity"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "f")
			log, err := xrdEnv(t, c.env, certDir, xrdcp, "-f", roots+c.path, out)
			switch {
			case c.allow && err != nil:
				t.Fatalf("xrdcp roots://%s: %v\n%s", c.path, err, grepErr(log))
			case c.allow:
				if got, _ := os.ReadFile(out); !bytes.Equal(got, data) {
					t.Errorf("xrdcp %s copied %d bytes, not the file", c.path, len(got))
				}
			case err == nil || !strings.Contains(log, "[3010]") || !strings.Contains(log, c.want):
				t.Fatalf("xrdcp roots://%s: %v, want kXR_NotAuthorized [3010] saying %q\n%s", c.path, err, c.want, grepErr(log))
			}
			if !strings.Contains(log, "TLS hand-shake done") {
				t.Errorf("xrdcp's log does not say the TLS handshake was done")
			}
		})
	}
}

// catFiles writes the files' contents, one after the other, to a new
// file of mode 0600 (as XRootD clients demand of a key) and returns it.
func catFiles(t *testing.T, files ...string) string {
	t.Helper()
	var b []byte
	for _, f := range files {
		c, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b = append(b, c...)
	}
	p := filepath.Join(t.TempDir(), "cred.pem")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// vomsCopy is a copy by the XRootD client library's Python bindings
// (XrdCl 6, the copy engine of xrdcp: CopyProcess), which sends the
// whole X509_USER_PROXY chain in the roots:// handshake. It prints the
// status and exits 0 when the copy succeeded.
const vomsCopy = `
import sys
from XRootD import client
p = client.CopyProcess()
p.add_job(sys.argv[1], sys.argv[2], force=True)
st = p.prepare()
st, results = p.run()
r = results[0]["status"]
print(r)
sys.exit(0 if r.ok else 1)
`

// TestXrootDoorVOMS: the XRootD client (XrdCl 6, through its Python
// bindings) presenting VOMS proxies made by voms-proxy-fake over roots://
// reads /cms/prod with the production role only: a plain /cms proxy,
// and ACs signed outside the vomsdir, expired, or with a flipped
// signature bit, are refused (kXR_NotAuthorized).
func TestXrootDoorVOMS(t *testing.T) {
	python := testenv.Require(t, "python3")
	if out, err := exec.Command(python, "-c", "import XRootD.client").CombinedOutput(); err != nil {
		testenv.Missing(t, "the XRootD Python bindings: "+string(out))
	}
	v := authtest.NewVOMS(t, testenv.Require(t, "voms-proxy-fake"))
	door, certDir, data := startCertDoor(t, v, false)
	prod := v.Proxy(t, "/cms/Role=production")
	for _, c := range []struct {
		name  string
		proxy string
		allow bool
	}{
		{"production proxy", prod, true},
		{"plain cms proxy", v.Proxy(t, "/cms"), false},
		{"AC signed outside the vomsdir", v.Proxy(t, "/cms/Role=production", v.Rogue()...), false},
		{"AC from a server of another CA than the lsc's", v.Proxy(t, "/cms/Role=production", v.OtherCA()...), false},
		{"expired AC", v.Proxy(t, "/cms/Role=production", authtest.Expired()...), false},
		{"AC with a flipped signature bit", v.TamperedProxy(t, prod), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "f")
			log, err := xrdEnv(t, []string{"X509_USER_PROXY=" + c.proxy}, certDir, python, "-c", vomsCopy, "roots://"+door+"//cms/prod/f", out)
			switch {
			case c.allow && err != nil:
				t.Fatalf("copy with the proxy: %v\n%s", err, grepErr(log))
			case c.allow:
				if got, _ := os.ReadFile(out); !bytes.Equal(got, data) {
					t.Errorf("copied %d bytes, not the file", len(got))
				}
			case err == nil || !strings.Contains(log, "3010") || !strings.Contains(log, "may not read"):
				t.Fatalf("copy with the proxy: %v, want kXR_NotAuthorized (3010) for the known caller\n%s", err, tail(log, 10))
			}
		})
	}
}

// TestXrootDoorTLSRequired: with xroot_tls_required, a session that
// stays in plain TCP is refused (kXR_TLSRequired at login), while xrdcp
// given a plain root:// URL is switched to TLS by the door and reads.
func TestXrootDoorTLSRequired(t *testing.T) {
	xrdcp := testenv.Require(t, "xrdcp")
	v := authtest.NewVOMS(t, testenv.Require(t, "voms-proxy-fake"))
	door, certDir, data := startCertDoor(t, v, true)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if c, err := xrdwire.Dial(ctx, door, "plain", 10*time.Second); err == nil {
		c.Close()
		t.Errorf("a plain root:// session logged in with TLS required")
	} else if !strings.Contains(err.Error(), "TLS") {
		t.Errorf("plain root:// login: %v, want a refusal saying TLS is required", err)
	}
	out := filepath.Join(t.TempDir(), "f")
	log, err := xrdEnv(t, nil, certDir, xrdcp, "-f", "root://"+door+"//public/f", out)
	if err != nil {
		t.Fatalf("xrdcp root:// with TLS required: %v\n%s", err, grepErr(log))
	}
	if got, _ := os.ReadFile(out); !bytes.Equal(got, data) || !strings.Contains(log, "TLS hand-shake done") {
		t.Errorf("xrdcp root:// copied %d bytes (want %d), TLS in its log: %v", len(got), len(data), strings.Contains(log, "TLS hand-shake done"))
	}
}
