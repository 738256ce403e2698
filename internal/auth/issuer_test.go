package auth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus"
)

// testIssuers is an OIDC provider on loopback serving any number of
// issuers under one server: issuer NAME is URL/NAME, with its discovery
// document at URL/NAME/.well-known/openid-configuration and its JWKS at
// URL/NAME/jwks. Keys can be added and withdrawn while it runs.
type testIssuers struct {
	srv *httptest.Server

	mu   sync.Mutex
	keys map[string]map[string]crypto.Signer // issuer name → kid → key; guarded by mu

	jwksHits atomic.Int64
}

func newTestIssuers(t testing.TB) *testIssuers {
	t.Helper()
	ti := &testIssuers{keys: map[string]map[string]crypto.Signer{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{iss}/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		iss := ti.URL(r.PathValue("iss"))
		json.NewEncoder(w).Encode(map[string]string{"issuer": iss, "jwks_uri": iss + "/jwks"})
	})
	mux.HandleFunc("GET /{iss}/jwks", func(w http.ResponseWriter, r *http.Request) {
		ti.jwksHits.Add(1)
		ti.mu.Lock()
		defer ti.mu.Unlock()
		var keys []map[string]string
		for kid, k := range ti.keys[r.PathValue("iss")] {
			keys = append(keys, jwkOf(kid, k.Public()))
		}
		json.NewEncoder(w).Encode(map[string]any{"keys": keys})
	})
	ti.srv = httptest.NewServer(mux) // httptest binds 127.0.0.1
	t.Cleanup(ti.srv.Close)
	return ti
}

// URL is the issuer URL of name.
func (ti *testIssuers) URL(name string) string { return ti.srv.URL + "/" + name }

// addKey publishes a new key for issuer name: RSA 2048 for RS256, P-256
// for ES256.
func (ti *testIssuers) addKey(t testing.TB, name, kid, alg string) crypto.Signer {
	t.Helper()
	k := newKey(t, alg)
	ti.mu.Lock()
	defer ti.mu.Unlock()
	if ti.keys[name] == nil {
		ti.keys[name] = map[string]crypto.Signer{}
	}
	ti.keys[name][kid] = k
	return k
}

func (ti *testIssuers) removeKey(name, kid string) {
	ti.mu.Lock()
	defer ti.mu.Unlock()
	delete(ti.keys[name], kid)
}

func (ti *testIssuers) key(name, kid string) crypto.Signer {
	ti.mu.Lock()
	defer ti.mu.Unlock()
	return ti.keys[name][kid]
}

func newKey(t testing.TB, alg string) crypto.Signer {
	t.Helper()
	var k crypto.Signer
	var err error
	if alg == "ES256" {
		k, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	} else {
		k, err = rsa.GenerateKey(rand.Reader, 2048)
	}
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func jwkOf(kid string, pub crypto.PublicKey) map[string]string {
	b64 := base64.RawURLEncoding.EncodeToString
	switch k := pub.(type) {
	case *rsa.PublicKey:
		return map[string]string{"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
			"n": b64(k.N.Bytes()), "e": b64(big.NewInt(int64(k.E)).Bytes())}
	case *ecdsa.PublicKey:
		b, _ := k.Bytes()
		return map[string]string{"kty": "EC", "kid": kid, "crv": "P-256", "use": "sig",
			"x": b64(b[1:33]), "y": b64(b[33:])}
	}
	panic("unknown key type")
}

// sign makes a JWS of claims with key and kid (kid "" leaves it out).
func sign(t testing.TB, key crypto.Signer, kid string, claims jwt.MapClaims) string {
	t.Helper()
	m := jwt.SigningMethod(jwt.SigningMethodRS256)
	if _, ok := key.(*ecdsa.PrivateKey); ok {
		m = jwt.SigningMethodES256
	}
	tok := jwt.NewWithClaims(m, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// clock is a settable time for the Authorizer.
type clock struct{ t atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.t.Store(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC).UnixNano())
	return c
}
func (c *clock) Now() time.Time             { return time.Unix(0, c.t.Load()) }
func (c *clock) Add(d time.Duration)        { c.t.Add(int64(d)) }
func (c *clock) unix(d time.Duration) int64 { return c.Now().Add(d).Unix() }

func quietLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

// newTestAuthorizer builds an Authorizer on cfg with the test clock (nil:
// time.Now) and a
// fresh registry, closed when the test ends.
func newTestAuthorizer(t testing.TB, cfg Config, c *clock) (*Authorizer, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	opt := Options{Log: quietLog(), Registerer: reg}
	if c != nil {
		opt.Now = c.Now
	}
	a, err := New(context.Background(), cfg, opt)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { a.Close() })
	return a, reg
}

// seen records what the handler behind the middleware got.
type seen struct {
	mu       sync.Mutex
	id       Identity
	ok       bool
	query    string
	inm      string
	requests int
}

func (s *seen) handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.id, s.ok = IdentityFrom(r.Context())
		s.query = r.URL.RawQuery
		s.inm = r.Header.Get("If-None-Match")
		s.requests++
		s.mu.Unlock()
		io.WriteString(w, "ok")
	})
}

// existsIn is an ExistsFunc over a fixed set of paths.
func existsIn(paths ...string) ExistsFunc {
	return func(_ context.Context, p string) (bool, error) {
		for _, q := range paths {
			if p == q {
				return true, nil
			}
		}
		return false, nil
	}
}

// do runs one request through h and returns the recorder.
func do(h http.Handler, method, target, authz string, hdr map[string]string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, "http://lakefed.test"+target, nil)
	if strings.HasPrefix(target, "RAW:") {
		r = httptest.NewRequest(method, "http://lakefed.test/", nil)
		r.URL.Path = strings.TrimPrefix(target, "RAW:")
	}
	if authz != "" {
		r.Header.Set("Authorization", authz)
	}
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}
