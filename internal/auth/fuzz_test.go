package auth

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// FuzzBearer throws malformed Authorization headers and authz parameters
// at the middleware of an Authorizer that grants nothing to anyone
// without a valid token. No input may be accepted (the seeds that look
// valid are signed by a key the issuer never published) and none may
// panic.
func FuzzBearer(f *testing.F) {
	ti := newTestIssuers(f)
	ti.addKey(f, "wlcg", "k1", "RS256")
	clk := newClock()
	a, err := New(context.Background(), Config{Issuers: []Issuer{{URL: ti.URL("wlcg")}}}, Options{Log: quietLog(), Now: clk.Now})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { a.Close() })
	s := &seen{}
	h := a.Middleware(s.handler(), nil)

	rogue := newKey(f, "RS256")
	c := jwt.MapClaims{"iss": ti.URL("wlcg"), "sub": "x", "aud": AnyAudience, "scope": "storage.read:/ storage.modify:/",
		"exp": clk.unix(time.Hour), "wlcg.groups": []string{"/cms"}}
	forged := sign(f, rogue, "k1", c)
	none, _ := jwt.NewWithClaims(jwt.SigningMethodNone, c).SignedString(jwt.UnsafeAllowNoneSignatureType)
	for _, seed := range []struct{ hdr, query string }{
		{"Bearer " + forged, ""},
		{"Bearer " + none, ""},
		{"", "authz=" + forged},
		{"", "authz=Bearer%20" + none},
		{"Bearer", ""},
		{"Bearer ", "authz="},
		{"Bearer a.b.c", "authz=a.b.c&authz=x"},
		{"Bearer " + strings.Repeat("A", 100), ""},
		{"Bearer eyJhbGciOiJSUzI1NiJ9.e30.", ""},
		{"Bearer ..", "authz=%zz"},
		{"Basic Zm9vOmJhcg==", ""},
		{"bEaReR\t" + forged + "\x00", ""},
		{"Bearer \u00e9t\u00e9.\u2603.x", ""},
	} {
		f.Add(seed.hdr, seed.query)
	}
	f.Fuzz(func(t *testing.T, hdr, query string) {
		r := httptest.NewRequest(http.MethodGet, "http://lakefed.test/data/f", nil)
		r.URL.RawQuery = query
		if hdr != "" {
			r.Header["Authorization"] = []string{hdr}
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code == http.StatusOK {
			t.Fatalf("Authorization %q, query %q accepted", hdr, query)
		}
		if w.Code != http.StatusUnauthorized && w.Code != http.StatusForbidden {
			t.Fatalf("Authorization %q, query %q = %d, want 401 or 403", hdr, query, w.Code)
		}
	})
}

// BenchmarkTokenCheck is the cost of the token check per request with
// warm keys: a client sends the same token with every request (the
// cache hit), and the cost of verifying a token seen for the first time
// (the signature, RS256 and ES256).
func BenchmarkTokenCheck(b *testing.B) {
	ti := newTestIssuers(b)
	ti.addKey(b, "wlcg", "rs", "RS256")
	ti.addKey(b, "wlcg", "es", "ES256")
	a, err := New(context.Background(), Config{Issuers: []Issuer{{URL: ti.URL("wlcg")}}}, Options{Log: quietLog()})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	claims := func(i int) jwt.MapClaims {
		return jwt.MapClaims{"iss": ti.URL("wlcg"), "sub": "x", "aud": AnyAudience, "scope": "storage.read:/data",
			"exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix(), "jti": fmt.Sprint(i)}
	}
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	h := a.Middleware(ok, nil)
	b.Run("middleware-cached", func(b *testing.B) {
		tok := "Bearer " + sign(b, ti.key("wlcg", "rs"), "rs", claims(0))
		r := httptest.NewRequest(http.MethodHead, "http://lakefed.test/data/f", nil)
		r.Header.Set("Authorization", tok)
		w := httptest.NewRecorder()
		b.ReportAllocs()
		for b.Loop() {
			h.ServeHTTP(w, r)
		}
		if w.Code != 200 {
			b.Fatalf("status %d", w.Code)
		}
	})
	for _, kid := range []string{"rs", "es"} {
		b.Run("verify-uncached-"+kid, func(b *testing.B) {
			toks := make([]string, 512)
			for i := range toks {
				toks[i] = sign(b, ti.key("wlcg", kid), kid, claims(i+1))
			}
			i := 0
			for b.Loop() {
				a.tokens = newTokenCache(tokenCacheSize) // every token new
				if _, err := a.verifyToken(context.Background(), toks[i%len(toks)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
