package interop

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lakefed/lakefed/internal/auth"
	"github.com/lakefed/lakefed/internal/auth/authtest"
	"github.com/lakefed/lakefed/internal/testenv"
)

// vomsCase is one VOMS proxy presented to the site, and whether the
// rule on the production role lets it read.
type vomsCase struct {
	name  string
	proxy string
	ok    bool
}

// vomsSite starts a storage site whose /cms/prod only the FQAN
// /cms/Role=production may read, with a file there, and returns it with
// proxies made by voms-proxy-fake: the production role, plain /cms, and
// production ACs that must be ignored (signed by a VOMS server the
// vomsdir does not name, by one of the right DN from another CA than
// the .lsc file names, expired, and with a flipped signature bit).
func vomsSite(t *testing.T) (*secureSite, []byte, []vomsCase) {
	t.Helper()
	v := authtest.NewVOMS(t, testenv.Require(t, "voms-proxy-fake"))
	s := startSecure(t, auth.Config{VOMSDir: v.VOMSDir, Rules: []auth.Rule{
		{Prefix: "/cms/prod", FQANs: []string{"/cms/Role=production"}, Allow: []auth.Action{auth.Read, auth.List}},
	}}, v.CAFile)
	data := []byte(strings.Repeat("production data\n", 4096))
	if err := os.MkdirAll(filepath.Join(s.root, "cms/prod"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.root, "cms/prod/f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	prod := v.Proxy(t, "/cms/Role=production")
	return s, data, []vomsCase{
		{"production role", prod, true},
		{"plain cms", v.Proxy(t, "/cms"), false},
		{"signer not in vomsdir", v.Proxy(t, "/cms/Role=production", v.Rogue()...), false},
		{"signer from another CA than the lsc's", v.Proxy(t, "/cms/Role=production", v.OtherCA()...), false},
		{"expired AC", v.Proxy(t, "/cms/Role=production", authtest.Expired()...), false},
		{"flipped signature bit", v.TamperedProxy(t, prod), false},
	}
}

// TestVOMSCurl: curl presenting VOMS proxies made by voms-proxy-fake
// reads /cms/prod with the production role only; a plain /cms proxy and
// every AC that fails a check get 403 (the proxy itself is valid: the
// caller is known, its attributes are not).
func TestVOMSCurl(t *testing.T) {
	curl := testenv.Require(t, "curl")
	s, data, cases := vomsSite(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cred := []string{"--cacert", s.tls.CAFile, "--cert", c.proxy, "--key", c.proxy}
			if c.ok {
				local := filepath.Join(t.TempDir(), "f")
				run(t, nil, curl, append(cred, "-sS", "--fail", "-o", local, s.url+"cms/prod/f")...)
				checkFile(t, "download", local, data)
				return
			}
			if code := curlCode(t, curl, append(cred, s.url+"cms/prod/f")...); code != "403" {
				t.Fatalf("curl with the proxy = %s, want 403", code)
			}
		})
	}
}

// TestVOMSDavix: the same with davix-get (--cert and --key the proxy).
func TestVOMSDavix(t *testing.T) {
	get := testenv.Require(t, "davix-get")
	s, data, cases := vomsSite(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			local := filepath.Join(t.TempDir(), "f")
			out, err := tryRun(nil, get, "--capath", s.caDir, "--retry", "0", "--cert", c.proxy, "--key", c.proxy, s.url+"cms/prod/f", local)
			switch {
			case c.ok && err != nil:
				t.Fatalf("davix-get with the proxy: %v\n%s", err, out)
			case c.ok:
				checkFile(t, "download", local, data)
			case err == nil:
				t.Fatalf("davix-get with the proxy succeeded, want a refusal")
			case !strings.Contains(out, "403"):
				t.Errorf("davix-get refused without a 403:\n%s", out)
			}
		})
	}
}

// TestVOMSGfal: the same with gfal-copy, the proxy in X509_USER_PROXY.
func TestVOMSGfal(t *testing.T) {
	gfal := testenv.Require(t, "gfal-copy")
	s, data, cases := vomsSite(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := []string{"X509_CERT_DIR=" + s.caDir, "X509_USER_PROXY=" + c.proxy}
			if _, err := os.Stat("/usr/bin/python3"); err == nil {
				env = append(env, "GFAL_PYTHONBIN=/usr/bin/python3")
			}
			local := filepath.Join(t.TempDir(), "f")
			out, err := tryRun(env, gfal, s.url+"cms/prod/f", "file://"+local)
			switch {
			case c.ok && err != nil:
				t.Fatalf("gfal-copy with the proxy: %v\n%s", err, out)
			case c.ok:
				checkFile(t, "download", local, data)
			case err == nil:
				t.Fatalf("gfal-copy with the proxy succeeded, want a refusal")
			case !strings.Contains(out, "403"):
				t.Errorf("gfal-copy refused without a 403:\n%s", out)
			}
		})
	}
}
