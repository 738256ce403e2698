package auth

import (
	"bytes"
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lakefed/lakefed/internal/testenv"
)

// tokenEnv is the setup the token table runs in: issuer "wlcg" (WLCG,
// base /), "sci" (SciTokens, base /sci), "cms" (WLCG, base /cms), each with
// one published key, and rules for anonymous, a group and an identity.
type tokenEnv struct {
	ti   *testIssuers
	clk  *clock
	a    *Authorizer
	h    http.Handler
	seen *seen
}

const testAud = "https://lakefed.test"

func newTokenEnv(t *testing.T) *tokenEnv {
	t.Helper()
	e := &tokenEnv{ti: newTestIssuers(t), clk: newClock(), seen: &seen{}}
	e.ti.addKey(t, "wlcg", "k1", "RS256")
	e.ti.addKey(t, "wlcg", "e1", "ES256")
	e.ti.addKey(t, "sci", "s1", "ES256")
	e.ti.addKey(t, "cms", "c1", "RS256")
	cfg := Config{
		Issuers: []Issuer{
			{URL: e.ti.URL("wlcg"), Audiences: []string{testAud}, Kind: KindWLCG},
			{URL: e.ti.URL("sci"), Audiences: []string{testAud}, Kind: KindSciTokens, Base: "/sci"},
			{URL: e.ti.URL("cms"), Audiences: []string{testAud}, Base: "/cms"},
		},
		Rules: []Rule{
			{Prefix: "/public", Anonymous: []Action{Read, List}},
			{Prefix: "/store/user", Groups: []string{"/cms"}, Allow: []Action{Read, List, Create}},
			{Prefix: "/home/alice", Identities: []string{e.ti.URL("wlcg") + "/alice"}, Allow: []Action{Read, Create, Modify, Delete}},
		},
		KeyRefreshMin: -1,
	}
	e.a, _ = newTestAuthorizer(t, cfg, e.clk)
	e.h = e.a.Middleware(e.seen.handler(), existsIn("/data/old", "/home/alice/f", "/sci/up/old"))
	return e
}

// claims returns a valid token's claims for issuer name with scope.
func (e *tokenEnv) claims(name, scope string) jwt.MapClaims {
	return jwt.MapClaims{
		"iss": e.ti.URL(name), "sub": "alice", "aud": testAud, "scope": scope,
		"iat": e.clk.unix(-time.Minute), "nbf": e.clk.unix(-time.Minute), "exp": e.clk.unix(20 * time.Minute),
		"wlcg.ver": "1.0", "jti": fmt.Sprint(time.Now().UnixNano()),
	}
}

func (e *tokenEnv) token(t *testing.T, name, kid string, c jwt.MapClaims) string {
	t.Helper()
	return sign(t, e.ti.key(name, kid), kid, c)
}

// b64 re-encodes a JWT segment.
func b64(v any) string {
	b, _ := json.Marshal(v)
	return base64.RawURLEncoding.EncodeToString(b)
}

func TestTokenTable(t *testing.T) {
	e := newTokenEnv(t)
	std := func(scope string) func(*testing.T) string {
		return func(t *testing.T) string { return "Bearer " + e.token(t, "wlcg", "k1", e.claims("wlcg", scope)) }
	}
	with := func(name, kid, scope string, edit func(jwt.MapClaims)) func(*testing.T) string {
		return func(t *testing.T) string {
			c := e.claims(name, scope)
			edit(c)
			return "Bearer " + e.token(t, name, kid, c)
		}
	}
	none := func(*testing.T) string { return "" }
	cases := []struct {
		name   string
		authz  func(*testing.T) string
		method string
		path   string
		hdr    map[string]string
		want   int
	}{
		// Scope and path.
		{"read in scope", std("storage.read:/data"), "GET", "/data/f", nil, 200},
		{"read scope root itself", std("storage.read:/data"), "HEAD", "/data", nil, 200},
		{"read outside scope", std("storage.read:/data"), "GET", "/other/f", nil, 403},
		{"segment boundary", std("storage.read:/data"), "GET", "/database/f", nil, 403},
		{"dotdot in request", std("storage.read:/data"), "GET", "RAW:/data/../other/f", nil, 400},
		{"encoded dotdot in request", std("storage.read:/data"), "GET", "RAW:/data/%2e%2e/other/f", nil, 400},
		{"dotdot in scope", std("storage.read:/data/../other"), "GET", "/other/f", nil, 401},
		{"scope without path is root", std("storage.read"), "GET", "/anything/f", nil, 200},
		{"read scope cannot write", std("storage.read:/data"), "PUT", "/data/new", nil, 403},
		{"stage scope reads", std("storage.stage:/data"), "GET", "/data/f", nil, 200},
		{"read scope lists", std("storage.read:/data"), "PROPFIND", "/data", map[string]string{"Depth": "1"}, 200},
		{"unrelated scopes only are an identity token", std("openid offline_access"), "GET", "/data/f", nil, 403},
		// Create versus modify.
		{"create new file", std("storage.create:/data"), "PUT", "/data/new", nil, 200},
		{"create cannot overwrite", std("storage.create:/data"), "PUT", "/data/old", nil, 403},
		{"modify overwrites", std("storage.modify:/data"), "PUT", "/data/old", nil, 200},
		{"modify deletes", std("storage.modify:/data"), "DELETE", "/data/old", nil, 200},
		{"create cannot delete", std("storage.create:/data"), "DELETE", "/data/old", nil, 403},
		{"create makes directories", std("storage.create:/data"), "MKCOL", "/data/dir", nil, 200},
		{"move needs delete", std("storage.create:/data"), "MOVE", "/data/old", map[string]string{"Destination": "/data/moved"}, 403},
		{"move with modify", std("storage.modify:/data"), "MOVE", "/data/old", map[string]string{"Destination": "http://lakefed.test/data/moved"}, 200},
		{"copy needs create at destination", std("storage.read:/data"), "COPY", "/data/old", map[string]string{"Destination": "/data/copy"}, 403},
		{"copy read and create", std("storage.read:/data storage.create:/out"), "COPY", "/data/old", map[string]string{"Destination": "/out/copy"}, 200},
		{"tpc pull creates", std("storage.create:/data"), "COPY", "/data/new", map[string]string{"Source": "https://remote.test/f"}, 200},
		{"tpc pull cannot overwrite with create", std("storage.create:/data"), "COPY", "/data/old", map[string]string{"Source": "https://remote.test/f"}, 403},
		{"tpc push reads", std("storage.read:/data"), "COPY", "/data/old", map[string]string{"Destination": "https://remote.test/f"}, 200},
		{"tpc push needs read", std("storage.create:/data"), "COPY", "/data/old", map[string]string{"Destination": "https://remote.test/f"}, 403},
		{"stat is a read", std("storage.read:/data"), "PROPFIND", "/data/f", map[string]string{"Depth": "0"}, 200},
		{"destination with dotdot", std("storage.modify:/"), "MOVE", "/data/old", map[string]string{"Destination": "/data/../../etc/x"}, 400},
		// Expiry, not-before, issued-at, with the 60 s skew.
		{"expired beyond skew", with("wlcg", "k1", "storage.read:/", func(c jwt.MapClaims) { c["exp"] = e.clk.unix(-2 * time.Minute) }), "GET", "/data/f", nil, 401},
		{"expired within skew", with("wlcg", "k1", "storage.read:/", func(c jwt.MapClaims) { c["exp"] = e.clk.unix(-30 * time.Second) }), "GET", "/data/f", nil, 200},
		{"no exp", with("wlcg", "k1", "storage.read:/", func(c jwt.MapClaims) { delete(c, "exp") }), "GET", "/data/f", nil, 401},
		{"nbf beyond skew", with("wlcg", "k1", "storage.read:/", func(c jwt.MapClaims) { c["nbf"] = e.clk.unix(2 * time.Minute) }), "GET", "/data/f", nil, 401},
		{"nbf within skew", with("wlcg", "k1", "storage.read:/", func(c jwt.MapClaims) { c["nbf"] = e.clk.unix(30 * time.Second) }), "GET", "/data/f", nil, 200},
		{"iat in the future", with("wlcg", "k1", "storage.read:/", func(c jwt.MapClaims) { c["iat"] = e.clk.unix(5 * time.Minute) }), "GET", "/data/f", nil, 401},
		// Audience.
		{"wrong audience", with("wlcg", "k1", "storage.read:/", func(c jwt.MapClaims) { c["aud"] = "https://elsewhere.test" }), "GET", "/data/f", nil, 401},
		{"missing audience", with("wlcg", "k1", "storage.read:/", func(c jwt.MapClaims) { delete(c, "aud") }), "GET", "/data/f", nil, 401},
		{"audience list", with("wlcg", "k1", "storage.read:/", func(c jwt.MapClaims) { c["aud"] = []string{"https://x.test", testAud} }), "GET", "/data/f", nil, 200},
		{"wlcg any audience", with("wlcg", "k1", "storage.read:/", func(c jwt.MapClaims) { c["aud"] = AnyAudience }), "GET", "/data/f", nil, 200},
		{"scitokens ANY refused by a wlcg issuer", with("wlcg", "k1", "storage.read:/", func(c jwt.MapClaims) { c["aud"] = "ANY" }), "GET", "/data/f", nil, 401},
		{"scitokens ANY", with("sci", "s1", "read:/", func(c jwt.MapClaims) { c["aud"] = "ANY" }), "GET", "/sci/f", nil, 200},
		// Keys and signatures.
		{"ES256 key", with("wlcg", "e1", "storage.read:/", func(jwt.MapClaims) {}), "GET", "/data/f", nil, 200},
		{"wrong key for kid", func(t *testing.T) string {
			return "Bearer " + sign(t, newKey(t, "RS256"), "k1", e.claims("wlcg", "storage.read:/"))
		}, "GET", "/data/f", nil, 401},
		{"another issuer's key", func(t *testing.T) string {
			return "Bearer " + sign(t, e.ti.key("cms", "c1"), "k1", e.claims("wlcg", "storage.read:/"))
		}, "GET", "/data/f", nil, 401},
		{"alg none", func(t *testing.T) string {
			s, err := jwt.NewWithClaims(jwt.SigningMethodNone, e.claims("wlcg", "storage.read:/")).SignedString(jwt.UnsafeAllowNoneSignatureType)
			if err != nil {
				t.Fatal(err)
			}
			return "Bearer " + s
		}, "GET", "/data/f", nil, 401},
		{"HS256 with the public key as secret", func(t *testing.T) string {
			pub := e.ti.key("wlcg", "k1").Public().(*rsa.PublicKey)
			der, _ := x509.MarshalPKIXPublicKey(pub)
			tok := jwt.NewWithClaims(jwt.SigningMethodHS256, e.claims("wlcg", "storage.read:/"))
			tok.Header["kid"] = "k1"
			s, err := tok.SignedString(der)
			if err != nil {
				t.Fatal(err)
			}
			return "Bearer " + s
		}, "GET", "/data/f", nil, 401},
		{"tampered payload", func(t *testing.T) string {
			s := e.token(t, "wlcg", "k1", e.claims("wlcg", "storage.read:/data"))
			parts := strings.Split(s, ".")
			c := e.claims("wlcg", "storage.read:/")
			parts[1] = b64(c)
			return "Bearer " + strings.Join(parts, ".")
		}, "GET", "/other/f", nil, 401},
		{"unknown issuer", func(t *testing.T) string {
			c := e.claims("wlcg", "storage.read:/")
			c["iss"] = e.ti.URL("rogue")
			return "Bearer " + e.token(t, "wlcg", "k1", c)
		}, "GET", "/data/f", nil, 401},
		{"no kid with two keys", func(t *testing.T) string {
			return "Bearer " + sign(t, e.ti.key("wlcg", "k1"), "", e.claims("wlcg", "storage.read:/"))
		}, "GET", "/data/f", nil, 401},
		{"no kid with one key", func(t *testing.T) string {
			return "Bearer " + sign(t, e.ti.key("cms", "c1"), "", e.claims("cms", "storage.read:/"))
		}, "GET", "/cms/f", nil, 200},
		{"no sub", with("wlcg", "k1", "storage.read:/", func(c jwt.MapClaims) { delete(c, "sub") }), "GET", "/data/f", nil, 401},
		{"malformed groups claim", with("wlcg", "k1", "", func(c jwt.MapClaims) { c["wlcg.groups"] = "/cms" }), "GET", "/store/user/f", nil, 401},
		// Base paths.
		{"base path", with("cms", "c1", "storage.read:/store", func(jwt.MapClaims) {}), "GET", "/cms/store/f", nil, 200},
		{"base path is not the root", with("cms", "c1", "storage.read:/store", func(jwt.MapClaims) {}), "GET", "/store/f", nil, 403},
		{"base path segment boundary", with("cms", "c1", "storage.read:/", func(jwt.MapClaims) {}), "GET", "/cmsx/f", nil, 403},
		// SciTokens.
		{"scitokens read", with("sci", "s1", "read:/", func(jwt.MapClaims) {}), "GET", "/sci/f", nil, 200},
		{"scitokens read outside base", with("sci", "s1", "read:/", func(jwt.MapClaims) {}), "GET", "/data/f", nil, 403},
		{"scitokens write creates", with("sci", "s1", "write:/up", func(jwt.MapClaims) {}), "PUT", "/sci/up/new", nil, 200},
		{"scitokens write overwrites", with("sci", "s1", "write:/up", func(jwt.MapClaims) {}), "PUT", "/sci/up/old", nil, 200},
		{"scitokens write deletes", with("sci", "s1", "write:/up", func(jwt.MapClaims) {}), "DELETE", "/sci/up/old", nil, 200},
		{"scitokens scope on a wlcg issuer is not a scope", std("read:/"), "GET", "/data/f", nil, 403},
		{"wlcg scope on a scitokens issuer is not a scope", with("sci", "s1", "storage.read:/", func(jwt.MapClaims) {}), "GET", "/sci/f", nil, 403},
		// Groups and identities (tokens without storage scopes).
		{"group rule", with("wlcg", "k1", "openid", func(c jwt.MapClaims) { c["wlcg.groups"] = []string{"/cms", "/cms/uscms"} }), "PUT", "/store/user/new", nil, 200},
		{"group rule does not modify", with("wlcg", "k1", "", func(c jwt.MapClaims) { c["wlcg.groups"] = []string{"/cms"} }), "DELETE", "/store/user/f", nil, 403},
		{"other group", with("wlcg", "k1", "", func(c jwt.MapClaims) { c["wlcg.groups"] = []string{"/atlas"} }), "GET", "/store/user/f", nil, 403},
		{"scoped token ignores group rules", with("wlcg", "k1", "storage.read:/data", func(c jwt.MapClaims) { c["wlcg.groups"] = []string{"/cms"} }), "PUT", "/store/user/new", nil, 403},
		{"identity rule", with("wlcg", "k1", "", func(jwt.MapClaims) {}), "DELETE", "/home/alice/f", nil, 200},
		{"identity rule other sub", with("wlcg", "k1", "", func(c jwt.MapClaims) { c["sub"] = "bob" }), "DELETE", "/home/alice/f", nil, 403},
		// Anonymous.
		{"anonymous public", none, "GET", "/public/f", nil, 200},
		{"anonymous denied", none, "GET", "/data/f", nil, 401},
		{"anonymous cannot write public", none, "PUT", "/public/f", nil, 401},
		{"token reads public", std("storage.read:/data"), "GET", "/public/f", nil, 200},
		{"options always", none, "OPTIONS", "/data/f", nil, 200},
		// Header forms.
		{"empty bearer", func(*testing.T) string { return "Bearer " }, "GET", "/public/f", nil, 401},
		{"lower-case scheme", func(t *testing.T) string {
			return "bearer " + e.token(t, "wlcg", "k1", e.claims("wlcg", "storage.read:/"))
		}, "GET", "/data/f", nil, 200},
		{"basic auth is not a token", func(*testing.T) string { return "Basic YWxpY2U6cHc=" }, "GET", "/data/f", nil, 401},
		{"garbage token", func(*testing.T) string { return "Bearer not.a.jwt" }, "GET", "/public/f", nil, 401},
		{"unknown method", std("storage.modify:/"), "PATCH", "/data/f", nil, 405},
	}
	if len(cases) < 30 {
		t.Fatalf("only %d cases", len(cases))
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := do(e.h, tc.method, tc.path, tc.authz(t), tc.hdr)
			if w.Code != tc.want {
				t.Fatalf("%s %s = %d %q, want %d", tc.method, tc.path, w.Code, w.Body.String(), tc.want)
			}
			switch {
			case w.Code == 401:
				ch := w.Header().Get("WWW-Authenticate")
				if !strings.HasPrefix(ch, `Bearer realm="lakefed"`) {
					t.Errorf("WWW-Authenticate = %q, want a Bearer challenge", ch)
				}
				if tc.authz(t) != "" && strings.HasPrefix(strings.ToLower(tc.authz(t)), "bearer") && !strings.Contains(ch, `error="invalid_token"`) {
					t.Errorf("WWW-Authenticate = %q, want error=\"invalid_token\"", ch)
				}
			case w.Code == 403 || w.Code == 400:
				if b := strings.TrimSuffix(w.Body.String(), "\n"); b == "" || strings.Contains(b, "\n") {
					t.Errorf("body %q is not a one-line reason", w.Body.String())
				}
			}
		})
	}
}

// TestCreateOnlyPutIsConditional checks the race guard: a PUT allowed
// only to create reaches the handler with If-None-Match: *, one allowed
// to modify does not.
func TestCreateOnlyPutIsConditional(t *testing.T) {
	e := newTokenEnv(t)
	for _, tc := range []struct{ scope, want string }{{"storage.create:/data", "*"}, {"storage.modify:/data", ""}} {
		tok := e.token(t, "wlcg", "k1", e.claims("wlcg", tc.scope))
		if w := do(e.h, "PUT", "/data/new", "Bearer "+tok, nil); w.Code != 200 {
			t.Fatalf("PUT with %s = %d", tc.scope, w.Code)
		}
		if e.seen.inm != tc.want {
			t.Errorf("PUT with %s: handler saw If-None-Match %q, want %q", tc.scope, e.seen.inm, tc.want)
		}
	}
}

// TestPutWithoutExists checks the choice for a nil ExistsFunc: a PUT needs
// both create and modify.
func TestPutWithoutExists(t *testing.T) {
	e := newTokenEnv(t)
	h := e.a.Middleware(e.seen.handler(), nil)
	if w := do(h, "PUT", "/data/new", "Bearer "+e.token(t, "wlcg", "k1", e.claims("wlcg", "storage.create:/data")), nil); w.Code != 403 {
		t.Errorf("PUT with create only, no exists = %d, want 403", w.Code)
	}
	if w := do(h, "PUT", "/data/new", "Bearer "+e.token(t, "wlcg", "k1", e.claims("wlcg", "storage.modify:/data")), nil); w.Code != 200 {
		t.Errorf("PUT with modify, no exists = %d, want 200", w.Code)
	}
}

// TestOptionsStar: "OPTIONS *" passes without credentials.
func TestOptionsStar(t *testing.T) {
	e := newTokenEnv(t)
	r := httptest.NewRequest("OPTIONS", "*", nil)
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, r)
	if w.Code != 200 {
		t.Errorf("OPTIONS * = %d, want 200", w.Code)
	}
}

func TestAuthzQuery(t *testing.T) {
	e := newTokenEnv(t)
	tok := e.token(t, "wlcg", "k1", e.claims("wlcg", "storage.read:/data"))
	for _, q := range []string{
		"authz=" + url.QueryEscape(tok),
		"a=1&authz=" + url.QueryEscape("Bearer "+tok) + "&b=2",
		"authz=Bearer%20" + tok + "&b=2",
	} {
		w := do(e.h, "GET", "/data/f?"+q, "", nil)
		if w.Code != 200 {
			t.Fatalf("GET ?%s = %d %s", q, w.Code, w.Body)
		}
		if strings.Contains(e.seen.query, "authz") || strings.Contains(e.seen.query, tok[:20]) {
			t.Errorf("handler saw query %q: authz not stripped", e.seen.query)
		}
		if e.seen.id.Kind != Token || e.seen.id.Subject != "alice" {
			t.Errorf("identity = %+v, want token of alice", e.seen.id)
		}
	}
	if e.seen.query != "b=2" {
		t.Errorf("last query = %q, want b=2", e.seen.query)
	}
	if w := do(e.h, "GET", "/public/f?authz=bad%zz", "", nil); w.Code != 401 {
		t.Errorf("GET with a badly escaped authz = %d, want 401", w.Code)
	}
}

// TestKeyRotation: a token signed with a new kid makes the issuer's keys
// be fetched again; a withdrawn key is refused after the next refresh,
// even for a token that was accepted (and cached) before.
func TestKeyRotation(t *testing.T) {
	e := newTokenEnv(t)
	ctx := context.Background()
	old := e.token(t, "wlcg", "k1", e.claims("wlcg", "storage.read:/"))
	if w := do(e.h, "GET", "/data/f", "Bearer "+old, nil); w.Code != 200 {
		t.Fatalf("old key: %d", w.Code)
	}
	e.ti.addKey(t, "wlcg", "k2", "RS256")
	hits := e.ti.jwksHits.Load()
	tok := e.token(t, "wlcg", "k2", e.claims("wlcg", "storage.read:/"))
	if w := do(e.h, "GET", "/data/f", "Bearer "+tok, nil); w.Code != 200 {
		t.Fatalf("new kid: %d %s", w.Code, w.Body)
	}
	if got := e.ti.jwksHits.Load() - hits; got != 1 {
		t.Errorf("JWKS fetched %d times for a new kid, want 1", got)
	}
	e.ti.removeKey("wlcg", "k1")
	e.a.refreshKeys(ctx)
	if w := do(e.h, "GET", "/data/f", "Bearer "+old, nil); w.Code != 401 {
		t.Errorf("withdrawn key after refresh: %d, want 401", w.Code)
	}
	if w := do(e.h, "GET", "/data/f", "Bearer "+tok, nil); w.Code != 200 {
		t.Errorf("new key after refresh: %d, want 200", w.Code)
	}
}

// TestKeyRefreshRateLimited: tokens with made-up kids cost the issuer no
// more than one fetch per KeyRefreshMin.
func TestKeyRefreshRateLimited(t *testing.T) {
	ti := newTestIssuers(t)
	k := ti.addKey(t, "wlcg", "k1", "RS256")
	clk := newClock()
	a, _ := newTestAuthorizer(t, Config{Issuers: []Issuer{{URL: ti.URL("wlcg")}}, KeyRefreshMin: time.Hour}, clk)
	h := a.Middleware((&seen{}).handler(), nil)
	start := ti.jwksHits.Load()
	for i := range 20 {
		c := jwt.MapClaims{"iss": ti.URL("wlcg"), "sub": "x", "aud": AnyAudience, "scope": "storage.read:/", "exp": clk.unix(time.Hour)}
		if w := do(h, "GET", "/f", "Bearer "+sign(t, k, fmt.Sprint("forged", i), c), nil); w.Code != 401 {
			t.Fatalf("forged kid %d: %d, want 401", i, w.Code)
		}
	}
	if got := ti.jwksHits.Load() - start; got != 0 {
		t.Errorf("JWKS fetched %d times within KeyRefreshMin, want 0", got)
	}
	clk.Add(2 * time.Hour)
	c := jwt.MapClaims{"iss": ti.URL("wlcg"), "sub": "x", "aud": AnyAudience, "scope": "storage.read:/", "exp": clk.unix(time.Hour)}
	do(h, "GET", "/f", "Bearer "+sign(t, k, "forged-late", c), nil)
	if got := ti.jwksHits.Load() - start; got != 1 {
		t.Errorf("JWKS fetched %d times after KeyRefreshMin, want 1", got)
	}
}

// TestPeriodicRefresh: the background refresh withdraws a key without any
// token forcing a fetch.
func TestPeriodicRefresh(t *testing.T) {
	ti := newTestIssuers(t)
	k := ti.addKey(t, "wlcg", "k1", "RS256")
	ti.addKey(t, "wlcg", "k2", "RS256")
	a, err := New(context.Background(), Config{Issuers: []Issuer{{URL: ti.URL("wlcg")}}, KeyRefresh: 20 * time.Millisecond, KeyRefreshMin: time.Hour},
		Options{Log: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	h := a.Middleware((&seen{}).handler(), nil)
	tok := sign(t, k, "k1", jwt.MapClaims{"iss": ti.URL("wlcg"), "sub": "x", "aud": AnyAudience, "scope": "storage.read:/", "exp": time.Now().Add(time.Hour).Unix()})
	if w := do(h, "GET", "/f", "Bearer "+tok, nil); w.Code != 200 {
		t.Fatalf("before withdrawal: %d", w.Code)
	}
	ti.removeKey("wlcg", "k1")
	testenv.Eventually(t, 5*time.Second, "withdrawn key refused", func() bool {
		return do(h, "GET", "/f", "Bearer "+tok, nil).Code == 401
	})
}

// TestRefusalsCounted: every refusal is counted by action and reason.
func TestRefusalsCounted(t *testing.T) {
	ti := newTestIssuers(t)
	ti.addKey(t, "wlcg", "k1", "RS256")
	var logs bytes.Buffer
	reg := prometheus.NewRegistry()
	a, err := New(context.Background(), Config{Issuers: []Issuer{{URL: ti.URL("wlcg")}}, Rules: []Rule{{Prefix: "/pub", Anonymous: []Action{Read}}}},
		Options{Log: slog.New(slog.NewTextHandler(&logs, nil)), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	h := a.Middleware((&seen{}).handler(), nil)
	do(h, "GET", "/priv/f", "", nil)
	do(h, "GET", "/priv/f", "", nil)
	do(h, "DELETE", "/pub/f", "", nil)
	do(h, "GET", "/pub/f", "Bearer x.y.z", nil)
	do(h, "GET", "/pub/f", "", nil) // allowed
	want := map[string]float64{
		"/invalid_token":        1,
		"delete/no_credentials": 1,
		"read/no_credentials":   2,
	}
	got := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "lakefed_auth_refused_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			got[l["action"]+"/"+l["reason"]] = m.GetCounter().GetValue()
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("lakefed_auth_refused_total = %v, want %v", got, want)
	}
	// The audit log: one line per refusal, with identity, path, action
	// and reason.
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	var refusals []string
	for _, l := range lines {
		if strings.Contains(l, `msg="request refused"`) {
			refusals = append(refusals, l)
		}
	}
	if len(refusals) != 4 {
		t.Fatalf("%d refusal log lines, want 4:\n%s", len(refusals), logs.String())
	}
	for _, want := range []string{"identity=anonymous", "path=/pub/f", "action=delete", "reason=no_credentials", "method=DELETE"} {
		if !strings.Contains(refusals[2], want) {
			t.Errorf("log line %q lacks %q", refusals[2], want)
		}
	}
}

func TestAllow(t *testing.T) {
	e := newTokenEnv(t)
	ctx := context.Background()
	if err := e.a.Allow(ctx, Identity{}, Read, "/public/x"); err != nil {
		t.Errorf("anonymous read /public/x: %v", err)
	}
	if err := e.a.Allow(ctx, Identity{}, Read, "/data/x"); err == nil || !strings.Contains(err.Error(), "not authenticated") {
		t.Errorf("anonymous read /data/x: %v, want ErrUnauthenticated", err)
	}
	x := Identity{Kind: X509, Name: "/O=x/CN=y"}
	if err := e.a.Allow(ctx, x, Read, "/data/x"); err == nil || !strings.Contains(err.Error(), "not allowed") {
		t.Errorf("x509 read /data/x: %v, want ErrForbidden", err)
	}
	if err := e.a.Allow(ctx, Identity{}, Read, "/public/../data"); err == nil {
		t.Error("path with .. allowed")
	}
}

func TestConfigErrors(t *testing.T) {
	for _, cfg := range []Config{
		{Issuers: []Issuer{{URL: "http://issuer.example.org/"}}},
		{Issuers: []Issuer{{URL: "https://i.example/", Kind: "oauth"}}},
		{Issuers: []Issuer{{URL: "https://i.example/", Base: "/a/../b"}}},
		{Rules: []Rule{{Prefix: "/a", Allow: []Action{"write"}}}},
		{Rules: []Rule{{Prefix: "a"}}},
		{Rules: []Rule{{Prefix: "/a"}}},
		{ClockSkew: -time.Second},
		{CAFile: "/nonexistent/ca.pem"},
	} {
		if a, err := New(context.Background(), cfg, Options{Log: quietLog()}); err == nil {
			a.Close()
			t.Errorf("New(%+v) = nil error", cfg)
		}
	}
}
