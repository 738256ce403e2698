package auth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lakefed/lakefed/internal/httpx"
)

// maxDocBytes bounds a discovery document or JWKS: real ones are a few
// kB; an issuer answering more is broken or hostile.
const maxDocBytes = 1 << 20

// errRateLimited says a key fetch was skipped because the last one was
// too recent (Config.KeyRefreshMin).
var errRateLimited = errors.New("auth: key fetch rate-limited")

// issuer is one trusted issuer and its current keys.
type issuer struct {
	cfg        Issuer
	base       string          // clean Base
	auds       map[string]bool // accepted aud values
	a          *Authorizer
	minRefresh time.Duration

	// gen counts key withdrawals: a cached token verified under an older
	// gen is verified again, so a withdrawn key stops working at once.
	gen atomic.Uint64

	mu   sync.RWMutex
	keys map[string]*jwk // guarded by mu; by kid

	fetchMu   sync.Mutex // one fetch at a time; guards lastFetch
	lastFetch time.Time
}

// jwk is one public key of a JWKS (RFC 7517).
type jwk struct {
	key crypto.PublicKey
	alg string // the JWK's alg, "" when it names none
}

func newIssuer(ic Issuer, a *Authorizer, minRefresh time.Duration) (*issuer, error) {
	if err := issuerURLOK(ic.URL); err != nil {
		return nil, err
	}
	switch ic.Kind {
	case KindAuto, KindWLCG, KindSciTokens:
	default:
		return nil, fmt.Errorf("%w: issuer %q: unknown kind %q (want wlcg or scitokens)", ErrConfig, ic.URL, ic.Kind)
	}
	base := "/"
	if ic.Base != "" {
		b, err := httpx.CleanPath(ic.Base)
		if err != nil {
			return nil, fmt.Errorf("%w: issuer %q: base %q: %v", ErrConfig, ic.URL, ic.Base, err)
		}
		base = b
	}
	is := &issuer{cfg: ic, base: base, a: a, minRefresh: minRefresh, auds: map[string]bool{AnyAudience: true}}
	if ic.Kind != KindWLCG {
		is.auds[sciTokensAnyAudience] = true
	}
	for _, au := range ic.Audiences {
		is.auds[au] = true
	}
	return is, nil
}

// key returns the key with kid; a token without kid gets the issuer's
// only key, if it has one.
func (is *issuer) key(kid string) *jwk {
	is.mu.RLock()
	defer is.mu.RUnlock()
	if kid == "" && len(is.keys) == 1 {
		for _, k := range is.keys {
			return k
		}
	}
	return is.keys[kid]
}

// refresh fetches the issuer's keys: discovery, then jwks_uri. Unless
// force, it does nothing (errRateLimited) when the last attempt was less
// than minRefresh ago, so tokens with made-up kids cannot make us hammer
// the issuer. Concurrent callers wait for the fetch in progress and then
// find it recent.
func (is *issuer) refresh(ctx context.Context, force bool) error {
	is.fetchMu.Lock()
	defer is.fetchMu.Unlock()
	now := is.a.now()
	if !force && is.minRefresh > 0 && now.Sub(is.lastFetch) < is.minRefresh {
		return errRateLimited
	}
	is.lastFetch = now
	keys, err := is.fetch(ctx)
	if err != nil {
		return err
	}
	is.mu.Lock()
	withdrawn := false
	for kid, old := range is.keys {
		if nk, ok := keys[kid]; !ok || !publicKeyEqual(old.key, nk.key) || old.alg != nk.alg {
			withdrawn = true
		}
	}
	is.keys = keys
	is.mu.Unlock()
	if withdrawn {
		is.gen.Add(1)
	}
	return nil
}

func publicKeyEqual(a, b crypto.PublicKey) bool {
	ea, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && ea.Equal(b)
}

// fetch reads the discovery document (OpenID Connect Discovery 1.0 §4)
// and the JWKS it points to.
func (is *issuer) fetch(ctx context.Context) (map[string]*jwk, error) {
	disc := strings.TrimSuffix(is.cfg.URL, "/") + "/.well-known/openid-configuration"
	var doc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := is.getJSON(ctx, disc, &doc); err != nil {
		return nil, err
	}
	// OIDC Discovery §4.3: the document's issuer must be the one asked.
	if doc.Issuer != is.cfg.URL {
		return nil, fmt.Errorf("auth: %s names issuer %q, want %q", disc, doc.Issuer, is.cfg.URL)
	}
	if doc.JWKSURI == "" {
		return nil, fmt.Errorf("auth: %s has no jwks_uri", disc)
	}
	if err := issuerURLOK(doc.JWKSURI); err != nil {
		return nil, fmt.Errorf("auth: jwks_uri: %w", err)
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := is.getJSON(ctx, doc.JWKSURI, &set); err != nil {
		return nil, err
	}
	keys := make(map[string]*jwk, len(set.Keys))
	for _, raw := range set.Keys {
		kid, k, err := parseJWK(raw)
		if err != nil {
			// One key we cannot use (an unknown kty, an encryption key)
			// must not cost the issuer its other keys.
			is.a.log.DebugContext(ctx, "jwk skipped", "issuer", is.cfg.URL, "err", err)
			continue
		}
		keys[kid] = k
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("auth: %s has no usable signing key", doc.JWKSURI)
	}
	return keys, nil
}

func (is *issuer) getJSON(ctx context.Context, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("auth: %s: %w", u, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := is.a.client.Do(req)
	if err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("auth: %s: %s", u, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocBytes+1))
	if err != nil {
		return fmt.Errorf("auth: %s: %w", u, err)
	}
	if len(body) > maxDocBytes {
		return fmt.Errorf("auth: %s: larger than %d bytes", u, maxDocBytes)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("auth: %s: %w", u, err)
	}
	return nil
}

// parseJWK reads one signing key of a JWKS: RSA (RFC 7518 §6.3), EC on
// P-256/384/521 (§6.2) or Ed25519 (RFC 8037). Keys marked for
// encryption ("use": "enc") are skipped.
func parseJWK(raw []byte) (string, *jwk, error) {
	var j struct {
		Kty, Kid, Alg, Use, Crv string
		N, E, X, Y              string
	}
	if err := json.Unmarshal(raw, &j); err != nil {
		return "", nil, err
	}
	if j.Use != "" && j.Use != "sig" {
		return "", nil, fmt.Errorf("key %q: use %q", j.Kid, j.Use)
	}
	b64 := base64.RawURLEncoding
	switch j.Kty {
	case "RSA":
		n, err1 := b64.DecodeString(j.N)
		e, err2 := b64.DecodeString(j.E)
		if err := errors.Join(err1, err2); err != nil || len(n) == 0 || len(e) == 0 || len(e) > 4 {
			return "", nil, fmt.Errorf("key %q: bad RSA n or e", j.Kid)
		}
		pk := &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
		if pk.N.BitLen() < 2048 {
			return "", nil, fmt.Errorf("key %q: RSA key of %d bits, want at least 2048", j.Kid, pk.N.BitLen())
		}
		return j.Kid, &jwk{key: pk, alg: j.Alg}, nil
	case "EC":
		var c elliptic.Curve
		switch j.Crv {
		case "P-256":
			c = elliptic.P256()
		case "P-384":
			c = elliptic.P384()
		case "P-521":
			c = elliptic.P521()
		default:
			return "", nil, fmt.Errorf("key %q: curve %q", j.Kid, j.Crv)
		}
		x, err1 := b64.DecodeString(j.X)
		y, err2 := b64.DecodeString(j.Y)
		size := (c.Params().BitSize + 7) / 8
		if err := errors.Join(err1, err2); err != nil || len(x) != size || len(y) != size {
			return "", nil, fmt.Errorf("key %q: bad EC point", j.Kid)
		}
		// ParseUncompressedPublicKey refuses a point not on the curve:
		// such a key could verify nothing, so it is refused here, once,
		// rather than failing every token later.
		uncompressed := append(append([]byte{4}, x...), y...)
		pk, err := ecdsa.ParseUncompressedPublicKey(c, uncompressed)
		if err != nil {
			return "", nil, fmt.Errorf("key %q: %w", j.Kid, err)
		}
		return j.Kid, &jwk{key: pk, alg: j.Alg}, nil
	case "OKP":
		x, err := b64.DecodeString(j.X)
		if j.Crv != "Ed25519" || err != nil || len(x) != ed25519.PublicKeySize {
			return "", nil, fmt.Errorf("key %q: bad OKP key", j.Kid)
		}
		return j.Kid, &jwk{key: ed25519.PublicKey(x), alg: j.Alg}, nil
	}
	return "", nil, fmt.Errorf("key %q: kty %q", j.Kid, j.Kty)
}

// algFits reports whether a token signed with alg may be checked with k:
// the algorithm comes from the key, never from the token alone (RFC 8725
// §3.1), so an RSA public key can never serve as an HMAC secret and
// "none" fits nothing.
func algFits(k *jwk, alg string) bool {
	if k.alg != "" && k.alg != alg {
		return false
	}
	switch pk := k.key.(type) {
	case *rsa.PublicKey:
		switch alg {
		case "RS256", "RS384", "RS512", "PS256", "PS384", "PS512":
			return true
		}
	case *ecdsa.PublicKey:
		switch pk.Curve {
		case elliptic.P256():
			return alg == "ES256"
		case elliptic.P384():
			return alg == "ES384"
		case elliptic.P521():
			return alg == "ES512"
		}
	case ed25519.PublicKey:
		return alg == "EdDSA"
	}
	return false
}
