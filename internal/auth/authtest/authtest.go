// Package authtest is a token issuer on loopback for tests of what
// package auth guards: an OIDC discovery document and a JWKS over plain
// HTTP on 127.0.0.1 (which auth accepts for issuers on loopback only),
// and tokens signed with its key.
//
//	is := authtest.NewIssuer(t)                      // closed when t ends
//	cfg := auth.Config{Issuers: []auth.Issuer{{URL: is.URL}}}
//	tok := is.Token(t, "storage.read:/data", time.Hour) // WLCG scopes, aud "any"
//	old := is.Token(t, "storage.read:/data", -time.Hour) // expired
//
// It does not import package auth, so auth's own tests may use it.
package authtest

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// AnyAudience is the WLCG audience every resource server accepts; the
// tokens of Token carry it.
const AnyAudience = "https://wlcg.cern.ch/jwt/v1/any"

// Issuer is one token issuer on loopback with one RSA key.
type Issuer struct {
	// URL is the issuer, as in its tokens' iss claim and in auth.Issuer.
	URL string
	// Subject is the sub claim of Token's tokens: "tester".
	Subject string

	key *rsa.PrivateKey
	kid string
}

// NewIssuer starts an issuer on 127.0.0.1, stopped when t ends.
func NewIssuer(t testing.TB) *Issuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	is := &Issuer{Subject: "tester", key: key, kid: "authtest-1"}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]string{"issuer": is.URL, "jwks_uri": is.URL + "/jwks"})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, _ *http.Request) {
		b64 := base64.RawURLEncoding.EncodeToString
		jwk := map[string]string{"kty": "RSA", "kid": is.kid, "use": "sig", "alg": "RS256",
			"n": b64(key.N.Bytes()), "e": b64(big.NewInt(int64(key.E)).Bytes())}
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": []any{jwk}})
	})
	srv := httptest.NewServer(mux) // binds 127.0.0.1
	t.Cleanup(srv.Close)
	is.URL = srv.URL
	return is
}

// Token returns a token of the issuer for Subject with the scope claim
// scope (WLCG "storage.read:/p ..." or SciTokens "read:/p ..."; "" for
// an identity token), audience AnyAudience, issued a minute ago and
// expiring ttl from now: a negative ttl makes an expired token.
func (is *Issuer) Token(t testing.TB, scope string, ttl time.Duration) string {
	t.Helper()
	now := time.Now()
	c := jwt.MapClaims{
		"iss": is.URL, "sub": is.Subject, "aud": AnyAudience,
		"iat": now.Add(-time.Minute).Unix(), "exp": now.Add(ttl).Unix(),
	}
	if scope != "" {
		c["scope"] = scope
	}
	return is.Sign(t, c)
}

// Sign returns claims as a JWS signed (RS256) with the issuer's key and
// its kid, for tokens Token does not make.
func (is *Issuer) Sign(t testing.TB, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
	tok.Header["kid"] = is.kid
	s, err := tok.SignedString(is.key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
