package auth

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/lakefed/lakefed/internal/auth/authtest"
	"github.com/lakefed/lakefed/internal/testenv"
)

// vomsRules are the rules of the VOMS tests: /cms/prod for the
// production role, /cms/all for anyone of VO cms, /cms/users for group
// /cms with any role.
var vomsRules = []Rule{
	{Prefix: "/cms/prod", FQANs: []string{"/cms/Role=production"}, Allow: []Action{Read}},
	{Prefix: "/cms/all", VOs: []string{"cms"}, Allow: []Action{Read}},
	{Prefix: "/cms/users", FQANs: []string{"/cms/Role=NULL/Capability=NULL"}, Allow: []Action{Read}},
}

// TestVOMSProxies: proxies made by voms-proxy-fake carry their FQANs
// into the identity when the AC verifies, and none when it fails any
// check (a signer the vomsdir does not name, a signer of another CA
// than the .lsc file's, an expired AC, a flipped bit in its signature),
// the reason logged; the rules grant by VO and FQAN accordingly.
func TestVOMSProxies(t *testing.T) {
	v := authtest.NewVOMS(t, testenv.Require(t, "voms-proxy-fake"))
	var logs testenv.SyncBuffer
	a, err := New(context.Background(), Config{CAFile: v.CAFile, VOMSDir: v.VOMSDir, Rules: vomsRules},
		Options{Log: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	prod := v.Proxy(t, "/cms/Role=production")
	for _, c := range []struct {
		name      string
		proxy     string
		fqans     []string
		reason    string // in the log when the AC is ignored
		mayPaths  []string
		nayPaths  []string
		chainFail bool
	}{
		{name: "production", proxy: prod, fqans: []string{"/cms/Role=production"},
			mayPaths: []string{"/cms/prod/f", "/cms/all/f", "/cms/users/f"}},
		{name: "plain cms", proxy: v.Proxy(t, "/cms/Role=NULL/Capability=NULL"), fqans: []string{"/cms"},
			mayPaths: []string{"/cms/all/f", "/cms/users/f"}, nayPaths: []string{"/cms/prod/f"}},
		{name: "signer not in vomsdir", proxy: v.Proxy(t, "/cms/Role=production", v.Rogue()...),
			reason: "are not what cms/voms.example.org.lsc names", nayPaths: []string{"/cms/prod/f", "/cms/all/f"}},
		{name: "signer from another CA", proxy: v.Proxy(t, "/cms/Role=production", v.OtherCA()...),
			reason: "are not what cms/voms.example.org.lsc names", nayPaths: []string{"/cms/prod/f", "/cms/all/f"}},
		{name: "expired", proxy: v.Proxy(t, "/cms/Role=production", authtest.Expired()...),
			reason: "outside its validity", nayPaths: []string{"/cms/prod/f", "/cms/all/f"}},
		{name: "flipped signature bit", proxy: v.TamperedProxy(t, prod),
			reason: "signature: crypto/rsa: verification error", nayPaths: []string{"/cms/prod/f", "/cms/all/f"}},
		{name: "FQAN outside its VO", proxy: v.Proxy(t, "/atlas/Role=production"),
			reason: "is outside VO", nayPaths: []string{"/cms/prod/f", "/cms/all/f"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := len(logs.String())
			id, err := a.certIdentity(authtest.ReadChain(t, c.proxy))
			if err != nil {
				t.Fatalf("certIdentity: %v (the chain itself must verify)", err)
			}
			if id.Name != v.UserDN || !id.Proxy {
				t.Errorf("identity %q proxy %v, want %q proxy true", id.Name, id.Proxy, v.UserDN)
			}
			if !slices.Equal(id.FQANs, c.fqans) {
				t.Errorf("FQANs = %q, want %q", id.FQANs, c.fqans)
			}
			if wantVO := len(c.fqans) > 0; wantVO != slices.Equal(id.VOs, []string{"cms"}) {
				t.Errorf("VOs = %q, want cms: %v", id.VOs, wantVO)
			}
			logged := logs.String()[before:]
			if c.reason != "" && (!strings.Contains(logged, "ignored") || !strings.Contains(logged, c.reason)) {
				t.Errorf("log = %q, want the AC ignored because %q", logged, c.reason)
			}
			for _, p := range c.mayPaths {
				if err := a.Allow(context.Background(), *id, Read, p); err != nil {
					t.Errorf("read %s: %v, want allowed", p, err)
				}
			}
			for _, p := range c.nayPaths {
				if err := a.Allow(context.Background(), *id, Read, p); err == nil {
					t.Errorf("read %s allowed, want refused", p)
				}
			}
		})
	}

	// The .lsc file names the server but another CA: ignored.
	v.WriteLSC(t, v.ServerDN, "/O=lakefed test/CN=Some Other CA")
	a.certs.gen.Add(1) // forget the verdicts above
	id, err := a.certIdentity(authtest.ReadChain(t, prod))
	if err != nil {
		t.Fatal(err)
	}
	if id.FQANs != nil || id.VOs != nil {
		t.Errorf("with a .lsc naming another CA: FQANs %q VOs %q, want none", id.FQANs, id.VOs)
	}
}

// TestNormalizeFQAN: the null role and capability are dropped, and
// malformed FQANs refused.
func TestNormalizeFQAN(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"/cms", "/cms"},
		{"/cms/Role=NULL/Capability=NULL", "/cms"},
		{"/cms/uscms/Role=production/Capability=NULL", "/cms/uscms/Role=production"},
		{"/cms/Role=production", "/cms/Role=production"},
		{"cms", ""},
		{"/", ""},
		{"/cms//x", ""},
		{"/cms/../atlas", ""},
		{"/Role=production", ""},
		{"/cms/Role=a/Role=b", ""},
		{"/cms/Role=a/sub", ""},
		{"/cms/Foo=bar", ""},
	} {
		got, err := NormalizeFQAN(c.in)
		if c.want == "" {
			if err == nil {
				t.Errorf("NormalizeFQAN(%q) = %q, want an error", c.in, got)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("NormalizeFQAN(%q) = %q, %v, want %q", c.in, got, err, c.want)
		}
	}
}
