package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/lakefed/lakefed/internal/httpx"
)

// maxTokenLen bounds a bearer token. WLCG tokens are 1-2 kB; 16 kB leaves
// room for many scopes and groups and keeps a hostile header cheap.
const maxTokenLen = 16 << 10

// tokenCacheSize bounds the verified-token cache. A signature check costs
// 30-100 µs (RS256/ES256); a cache hit costs a map look-up, which is what
// keeps the per-request cost of a token under its 5 µs goal for
// clients that send one token many times.
const tokenCacheSize = 4096

// validMethods are the signature algorithms accepted at all; algFits
// narrows them to the key's. HMAC is absent (a shared secret is no
// issuer's public key) and so is "none".
var validMethods = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// b64token marks the bytes of RFC 6750 §2.1's b64token: ALPHA, DIGIT,
// "-._~+/" and trailing "=" (allowed anywhere here; the JWS parser refuses
// a misplaced one). A table: the check runs over every byte of every
// request's token.
var b64token = func() (t [256]bool) {
	for c := range 256 {
		t[c] = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~+/=", byte(c)) >= 0
	}
	return t
}()

// claims are the claims a storage token carries (WLCG Common JWT Profile
// §2.3, SciTokens claim language).
type claims struct {
	jwt.RegisteredClaims
	Scope  string   `json:"scope"`
	Groups []string `json:"wlcg.groups"`
}

// bearer finds the request's bearer token: the Authorization header
// (RFC 6750 §2.1) or the authz query parameter, which clients that cannot
// set a header use (XRootD's and gfal2's "?authz=Bearer%20<token>"; the
// "Bearer " is optional). It returns the token, whether one was offered
// (an empty or malformed offer is an invalid token, not no token), and
// the raw query without authz, which the next handler gets so the token
// never reaches a log or an upstream URL. Authorization headers of other
// schemes are not bearer tokens and are ignored.
func bearer(r *http.Request) (tok string, offered bool, query string, err error) {
	query = r.URL.RawQuery
	if strings.Contains(query, "authz") {
		var q string
		var fromQuery string
		q, fromQuery, offered = stripAuthz(query)
		query = q
		if offered {
			tok = fromQuery
		}
	}
	if hs := r.Header["Authorization"]; len(hs) > 0 {
		if len(hs) > 1 {
			return "", true, query, errors.New("more than one Authorization header")
		}
		scheme, rest, _ := strings.Cut(strings.TrimSpace(hs[0]), " ")
		if strings.EqualFold(scheme, "Bearer") {
			// The header wins over the query: it is the standard place.
			tok, offered = strings.TrimSpace(rest), true
		}
	}
	if !offered {
		return "", false, query, nil
	}
	if tok == "" {
		return "", true, query, errors.New("empty bearer token")
	}
	if len(tok) > maxTokenLen {
		return "", true, query, fmt.Errorf("bearer token longer than %d bytes", maxTokenLen)
	}
	// The b64token check (RFC 6750 §2.1) waits for a cache miss in
	// verifyToken: a token in the cache passed it.
	return tok, true, query, nil
}

// stripAuthz removes every authz parameter from the raw query q and
// returns the rest (other parameters untouched, in order) and the last
// authz value, unescaped and without a leading "Bearer ".
func stripAuthz(q string) (rest, tok string, found bool) {
	var kept []string
	for part := range strings.SplitSeq(q, "&") {
		k, v, _ := strings.Cut(part, "=")
		if k != "authz" {
			kept = append(kept, part)
			continue
		}
		found = true
		u, err := url.QueryUnescape(v)
		if err != nil {
			tok = "\x00" // fails the b64token check: a bad escape is a bad token
			continue
		}
		u = strings.TrimSpace(u)
		if len(u) > 7 && strings.EqualFold(u[:7], "Bearer ") {
			u = strings.TrimSpace(u[7:])
		}
		tok = u
	}
	return strings.Join(kept, "&"), tok, found
}

// tokenCache keeps identities of tokens that verified, until they
// expire: a client sends one token with every request.
type tokenCache struct {
	mu  sync.RWMutex
	m   map[string]cachedToken // guarded by mu
	max int
}

type cachedToken struct {
	id    *Identity
	until time.Time // exp + skew
	is    *issuer
	gen   uint64 // is.gen when verified
}

func newTokenCache(max int) *tokenCache {
	return &tokenCache{m: make(map[string]cachedToken), max: max}
}

func (c *tokenCache) get(tok string, now time.Time) (*Identity, bool) {
	c.mu.RLock()
	e, ok := c.m[tok]
	c.mu.RUnlock()
	if !ok || !now.Before(e.until) || e.gen != e.is.gen.Load() {
		return nil, false
	}
	return e.id, true
}

func (c *tokenCache) put(tok string, e cachedToken, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= c.max {
		for k, v := range c.m {
			if !now.Before(v.until) || v.gen != v.is.gen.Load() {
				delete(c.m, k)
			}
		}
		// Still full of live tokens: drop a quarter, whichever the map
		// order gives. They are verified again when they come back.
		for k := range c.m {
			if len(c.m) < c.max*3/4 {
				break
			}
			delete(c.m, k)
		}
	}
	c.m[tok] = e
}

// Identify turns a raw bearer token, as a protocol without HTTP headers
// carries it (the root:// door's authz= CGI, unescaped and without
// "Bearer "), into the Identity Allow judges: Anonymous for "", else
// the token's identity after the checks of verifyToken, the ones
// Middleware makes. Its errors wrap ErrInvalidToken and are fit for the
// client. It does not log or count; the caller does, for what it
// refuses. The identity's slices are shared with the token cache: read
// them, never write them.
func (a *Authorizer) Identify(ctx context.Context, token string) (Identity, error) {
	if token == "" {
		return Identity{Kind: Anonymous}, nil
	}
	if len(token) > maxTokenLen {
		return Identity{}, fmt.Errorf("%w: bearer token longer than %d bytes", ErrInvalidToken, maxTokenLen)
	}
	id, err := a.verifyToken(ctx, token)
	if err != nil {
		return Identity{}, err
	}
	return *id, nil
}

// verifyToken checks a bearer token and returns its identity: signature
// with the issuer's key for its kid (fetched again, rate-limited, when
// the kid is unknown), exp (required), nbf and iat within the clock skew,
// iss among the configured issuers, aud among the issuer's audiences, and
// scopes well-formed. Its errors wrap ErrInvalidToken and are fit for the
// client's error_description.
func (a *Authorizer) verifyToken(ctx context.Context, tok string) (*Identity, error) {
	now := a.now()
	if id, ok := a.tokens.get(tok, now); ok {
		return id, nil
	}
	// RFC 6750 §2.1 b64token; a JWS compact serialisation is a subset.
	for i := 0; i < len(tok); i++ {
		if !b64token[tok[i]] {
			return nil, fmt.Errorf("%w: characters outside RFC 6750 b64token", ErrInvalidToken)
		}
	}
	var c claims
	var is *issuer
	var gen uint64
	keyfunc := func(t *jwt.Token) (any, error) {
		cl := t.Claims.(*claims)
		is = a.issuers[cl.Issuer]
		if is == nil {
			return nil, fmt.Errorf("unknown issuer %q", cl.Issuer)
		}
		gen = is.gen.Load()
		kid, _ := t.Header["kid"].(string)
		k := is.key(kid)
		if k == nil {
			if err := is.refresh(ctx, false); err != nil && !errors.Is(err, errRateLimited) {
				a.log.WarnContext(ctx, "issuer keys not refreshed", "issuer", is.cfg.URL, "err", err)
			}
			gen = is.gen.Load()
			if k = is.key(kid); k == nil {
				return nil, fmt.Errorf("no key %q at issuer %q", kid, is.cfg.URL)
			}
		}
		if !algFits(k, t.Method.Alg()) {
			return nil, fmt.Errorf("alg %q does not fit key %q", t.Method.Alg(), kid)
		}
		return k.key, nil
	}
	if _, err := a.parser.ParseWithClaims(tok, &c, keyfunc); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidToken, err)
	}
	if c.Subject == "" {
		return nil, fmt.Errorf("%w: no sub claim", ErrInvalidToken)
	}
	audOK := false
	for _, au := range c.Audience {
		if is.auds[au] {
			audOK = true
			break
		}
	}
	if !audOK {
		return nil, fmt.Errorf("%w: audience %q not accepted here", ErrInvalidToken, []string(c.Audience))
	}
	scopes, others, err := is.scopes(c.Scope)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidToken, err)
	}
	id := &Identity{
		Kind:    Token,
		Name:    strings.TrimSuffix(c.Issuer, "/") + "/" + c.Subject,
		Issuer:  c.Issuer,
		Subject: c.Subject,
		Groups:  c.Groups,
		Scopes:  scopes,
		Others:  others,
		Expires: c.ExpiresAt.Time,
		Token:   tok,
	}
	a.tokens.put(tok, cachedToken{id: id, until: c.ExpiresAt.Add(a.skew), is: is, gen: gen}, now)
	return id, nil
}

// scopes turns a scope claim into capabilities, joined to the issuer's
// base. WLCG Common JWT Profile §3.3:
//
//	storage.read:/p    read, list
//	storage.stage:/p   read, list   (a superset of storage.read; lakefed
//	                                 has no nearline tier, so staging is
//	                                 reading)
//	storage.create:/p  create       (new files and directories only)
//	storage.modify:/p  create, modify, delete
//
// SciTokens: read:/p → read, list; write:/p → create, modify, delete. A
// scope without a path means "/" (the SciTokens rule). Other scopes
// (openid, offline_access, compute.*, lakefed.admin) are not storage
// scopes: they are returned apart, as written. A storage scope whose path is not clean ("..", encoded dots,
// control characters) makes the whole token invalid: dropping it would
// turn a capability token into an identity token, which the rules might
// grant more.
func (is *issuer) scopes(claim string) ([]Scope, []string, error) {
	var out []Scope
	var others []string
	for s := range strings.FieldsSeq(claim) {
		name, p, hasPath := strings.Cut(s, ":")
		var set actionSet
		wlcg, sci := is.cfg.Kind != KindSciTokens, is.cfg.Kind != KindWLCG
		switch {
		case wlcg && (name == "storage.read" || name == "storage.stage"):
			set = setRead | setList
		case wlcg && name == "storage.create":
			set = setCreate
		case wlcg && name == "storage.modify":
			set = setCreate | setModify | setDelete
		case sci && name == "read":
			set = setRead | setList
		case sci && name == "write":
			set = setCreate | setModify | setDelete
		default:
			others = append(others, s)
			continue
		}
		if !hasPath {
			p = "/"
		}
		cp, err := httpx.CleanPath(p)
		if err != nil || strings.Contains(p, "%") {
			return nil, nil, fmt.Errorf("scope %q: path not clean", s)
		}
		out = append(out, Scope{Path: httpx.Join(is.base, cp), actions: set})
	}
	return out, others, nil
}
