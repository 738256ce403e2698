// Package auth decides who a request comes from and what it may do: TLS
// trust (a CA file or a grid-security-style hashed CA directory), WLCG and
// SciTokens bearer tokens (OIDC discovery and JWKS, cached and rotated),
// X.509 client certificates including RFC 3820 proxy certificates, and
// path rules in the manner of Dynafed's allowusers/allowgroups and
// XRootD's authdb. Every role puts its handler behind Middleware; the
// root:// door and the pre-signer ask Allow directly.
//
//	a, err := auth.New(ctx, cfg, auth.Options{Log: log, Registerer: reg})
//	if err != nil { return err }
//	defer a.Close()
//	h := a.Middleware(storageHandler, existsOnDisk)  // 401/403 or next
//	tlsCfg, reloader, err := auth.ServerTLS(cert, key, cfg.CAFile, cfg.CADir)
//
// Decisions:
//
//   - A token's scopes are capabilities (WLCG Common JWT Profile §3.3):
//     a valid token with storage.read:/x may read /x with no rule naming
//     its holder. A token that carries storage scopes is authorised by
//     those scopes only (plus the anonymous grants of the rules, which
//     anyone has); a token with no storage scope is an identity token and
//     is authorised by the rules, by "iss/sub" and by its wlcg.groups.
//     dCache draws the same line between capability and identity tokens.
//   - Rules only grant; the grants of every rule whose prefix covers the
//     path add up. No grant means deny.
//   - A proxy's identity is its end-entity DN, with the VOs and FQANs
//     of the VOMS attribute certificates it carries that verify
//     (voms.go: the VOMS server's chain and the .lsc file naming it, the
//     signature, the holder, the validity). An AC failing any check is
//     ignored whole, and logged with the reason: attributes taken from
//     an unchecked AC are attributes anyone can claim.
package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lakefed/lakefed/internal/httpx"
)

// Action is what a request does to a path.
type Action string

// The actions rules and scopes grant.
const (
	// Read is reading a file's bytes or metadata (GET, HEAD).
	Read Action = "read"
	// List is listing a directory (PROPFIND).
	List Action = "list"
	// Create is making a new file or directory (PUT of a new name, MKCOL).
	Create Action = "create"
	// Modify is changing what exists (PUT over a file, PROPPATCH, MOVE).
	Modify Action = "modify"
	// Delete is removing (DELETE, the source of a MOVE).
	Delete Action = "delete"
)

// actionSet is a set of actions as bits: the checks on the request path
// are a mask test.
type actionSet uint8

const (
	setRead actionSet = 1 << iota
	setList
	setCreate
	setModify
	setDelete
)

func (a Action) set() actionSet {
	switch a {
	case Read:
		return setRead
	case List:
		return setList
	case Create:
		return setCreate
	case Modify:
		return setModify
	case Delete:
		return setDelete
	}
	return 0
}

// ParseAction returns the Action named s ("read", "list", "create",
// "modify", "delete"), or an error wrapping ErrConfig.
func ParseAction(s string) (Action, error) {
	a := Action(strings.ToLower(strings.TrimSpace(s)))
	if a.set() == 0 {
		return "", fmt.Errorf("%w: unknown action %q (want read, list, create, modify or delete)", ErrConfig, s)
	}
	return a, nil
}

func setOf(as []Action) (actionSet, error) {
	var s actionSet
	for _, a := range as {
		b := a.set()
		if b == 0 {
			return 0, fmt.Errorf("%w: unknown action %q (want read, list, create, modify or delete)", ErrConfig, a)
		}
		s |= b
	}
	return s, nil
}

// Errors. Allow's refusals wrap ErrUnauthenticated (no or bad
// credentials: HTTP 401) or ErrForbidden (known caller, no grant: 403).
var (
	ErrConfig          = errors.New("auth: bad config")
	ErrUnauthenticated = errors.New("auth: not authenticated")
	ErrForbidden       = errors.New("auth: not allowed")
	ErrInvalidToken    = errors.New("auth: invalid token")
	ErrInvalidCert     = errors.New("auth: invalid client certificate")
)

// TokenKind is the profile a token issuer follows; it says which scope
// vocabulary its tokens speak.
type TokenKind string

// Token kinds.
const (
	// KindAuto reads both vocabularies (the default).
	KindAuto TokenKind = ""
	// KindWLCG is the WLCG Common JWT Profile: storage.read, storage.create,
	// storage.modify, storage.stage and wlcg.groups.
	KindWLCG TokenKind = "wlcg"
	// KindSciTokens is SciTokens: read and write.
	KindSciTokens TokenKind = "scitokens"
)

// AnyAudience is the WLCG profile's audience that every resource server
// accepts (WLCG Common JWT Profile §3.1.3); it is always accepted.
const AnyAudience = "https://wlcg.cern.ch/jwt/v1/any"

// sciTokensAnyAudience is SciTokens 2.0's "any" audience; accepted from
// issuers that are not KindWLCG.
const sciTokensAnyAudience = "ANY"

// Issuer is one token issuer this server trusts.
type Issuer struct {
	// URL is the issuer, exactly as in the tokens' iss claim, e.g.
	// "https://cms-auth.web.cern.ch/". Its keys are found through
	// URL/.well-known/openid-configuration. Required; https, or http on
	// a loopback address (tests).
	URL string
	// Audiences are the aud values accepted besides AnyAudience (and
	// "ANY" for SciTokens), e.g. "https://se.example.org:1094". Empty
	// means only the "any" audiences.
	Audiences []string
	// Base is the namespace path the tokens' scope paths are relative to:
	// with Base "/cms", storage.read:/store grants /cms/store. Empty
	// means "/".
	Base string
	// Kind is the scope vocabulary; empty reads both.
	Kind TokenKind
}

// Rule grants actions under a path prefix, as one line of XRootD's authdb
// or Dynafed's allowusers/allowgroups.
type Rule struct {
	// Prefix is the path the rule covers, on path-segment boundaries:
	// "/a" covers "/a" and "/a/b", not "/ab". Required.
	Prefix string
	// Anonymous are the actions anyone may do under Prefix, with or
	// without credentials.
	Anonymous []Action
	// Identities are the callers Allow is granted to: X.509 DNs in the
	// OpenSSL slash form ("/DC=org/DC=example/CN=Jane Doe"), or token
	// subjects as "ISSUER/SUB" (the issuer URL without trailing slash, a
	// slash, the sub claim).
	Identities []string
	// Groups are the groups Allow is granted to, matched exactly against
	// a token's wlcg.groups ("/cms", "/cms/uscms").
	Groups []string
	// VOs are the virtual organisations Allow is granted to: a
	// certificate whose VOMS attributes were issued for one of them
	// ("cms"), with any group and role.
	VOs []string
	// FQANs are the VOMS attributes Allow is granted to: "/cms/uscms"
	// grants every caller holding that group, with any role;
	// "/cms/Role=production" only those holding the group with that
	// role. "/Role=NULL" and "/Capability=NULL" are dropped before
	// matching (NormalizeFQAN).
	FQANs []string
	// Allow are the actions granted to Identities, Groups, VOs and
	// FQANs. With none set, Allow goes to every authenticated caller (a
	// valid certificate, or a token without storage scopes).
	Allow []Action
}

// Config is the auth section of lakefed's config, as plain types; the
// server maps YAML onto it.
type Config struct {
	// Issuers are the trusted token issuers. Empty means no tokens are
	// accepted (every bearer token gets 401).
	Issuers []Issuer
	// Rules grant actions by path; no rule and no scope means deny.
	Rules []Rule
	// CAFile is a PEM file of CA certificates trusted for client
	// certificates. Empty and no CADir means client certificates are not
	// accepted (a request with one is treated as anonymous).
	CAFile string
	// CADir is a grid-security-style directory (/etc/grid-security/
	// certificates): every *.0 and *.pem file in it is read as PEM
	// certificates. Signing-policy and CRL files (*.r0) are ignored.
	CADir string
	// VOMSDir is the grid-security vomsdir whose VO/host.lsc files name
	// the VOMS servers trusted to sign each VO's attributes (VerifyVOMS).
	// It is read at each new connection's check, so a change needs no
	// reload. Empty means DefaultVOMSDir; a missing directory means no
	// VOMS attributes are trusted.
	VOMSDir string
	// ClockSkew is the allowance on exp, nbf and iat. Zero means
	// DefaultClockSkew; negative is an error.
	ClockSkew time.Duration
	// Realm is the realm in WWW-Authenticate. Empty means "lakefed".
	Realm string
	// KeyRefresh is how often every issuer's keys are fetched again. Zero
	// means DefaultKeyRefresh.
	KeyRefresh time.Duration
	// KeyRefreshMin is the least time between two fetches of one issuer's
	// keys caused by tokens with an unknown kid; a flood of forged kids
	// costs the issuer one fetch per KeyRefreshMin. Zero means
	// DefaultKeyRefreshMin; negative means no limit (tests).
	KeyRefreshMin time.Duration
}

// Defaults.
const (
	DefaultClockSkew     = 60 * time.Second
	DefaultKeyRefresh    = 15 * time.Minute
	DefaultKeyRefreshMin = 10 * time.Second
	defaultRealm         = "lakefed"
)

// Options are the Authorizer's collaborators.
type Options struct {
	// Log receives refusals (Info) and key fetch failures (Warn). Nil
	// means slog.Default().
	Log *slog.Logger
	// Registerer receives lakefed_auth_refused_total. Nil means the
	// counter is kept but not exported.
	Registerer prometheus.Registerer
	// HTTPClient fetches discovery documents and JWKS. Nil means a client
	// with a 10 s timeout.
	HTTPClient *http.Client
	// Now is the clock, for tests. Nil means time.Now.
	Now func() time.Time
}

// rule is a Rule ready for matching.
type rule struct {
	prefix     string
	anonymous  actionSet
	allow      actionSet
	identities map[string]bool
	groups     map[string]bool
	vos        map[string]bool
	fqans      map[string][]string // by group: the roles granted, "" for any
	anyAuth    bool                // Allow goes to every authenticated caller
}

// Authorizer checks credentials and rules. Its methods are safe for
// concurrent use. Close stops the key refresher.
type Authorizer struct {
	log       *slog.Logger
	now       func() time.Time
	skew      time.Duration
	realm     string
	rules     []rule
	issuers   map[string]*issuer // by iss claim
	trust     *trust             // nil: client certificates not accepted
	trustMu   sync.RWMutex       // guards trust.pool
	caFile    string
	caDir     string
	vomsDir   string
	tokens    *tokenCache
	parser    *jwt.Parser // read-only after New; safe for concurrent use
	certs     *certCache
	refused   *prometheus.CounterVec
	client    *http.Client
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// New checks cfg, loads the CAs, makes a first attempt at every issuer's
// keys (an issuer that cannot be reached is logged and tried again when a
// token arrives) and starts the periodic key refresh, which runs until ctx
// is cancelled or Close.
func New(ctx context.Context, cfg Config, opt Options) (*Authorizer, error) {
	a := &Authorizer{log: opt.Log, now: opt.Now, client: opt.HTTPClient, skew: cfg.ClockSkew, realm: cfg.Realm,
		caFile: cfg.CAFile, caDir: cfg.CADir, vomsDir: cfg.VOMSDir}
	if a.vomsDir == "" {
		a.vomsDir = DefaultVOMSDir
	}
	if a.log == nil {
		a.log = slog.Default()
	}
	a.log = a.log.With("component", "auth")
	if a.now == nil {
		a.now = time.Now
	}
	if a.client == nil {
		a.client = &http.Client{Timeout: 10 * time.Second}
	}
	if a.realm == "" {
		a.realm = defaultRealm
	}
	var errs []error
	switch {
	case a.skew == 0:
		a.skew = DefaultClockSkew
	case a.skew < 0:
		errs = append(errs, fmt.Errorf("%w: negative clock skew %v", ErrConfig, a.skew))
	}
	if strings.ContainsAny(a.realm, "\"\\\r\n") {
		errs = append(errs, fmt.Errorf("%w: realm %q has a quote, backslash or newline", ErrConfig, a.realm))
	}
	refresh, minRefresh := cfg.KeyRefresh, cfg.KeyRefreshMin
	if refresh <= 0 {
		refresh = DefaultKeyRefresh
	}
	if minRefresh == 0 {
		minRefresh = DefaultKeyRefreshMin
	}
	a.issuers = make(map[string]*issuer, len(cfg.Issuers))
	for i, ic := range cfg.Issuers {
		is, err := newIssuer(ic, a, minRefresh)
		if err != nil {
			errs = append(errs, fmt.Errorf("issuers[%d]: %w", i, err))
			continue
		}
		if a.issuers[ic.URL] != nil {
			errs = append(errs, fmt.Errorf("%w: issuers[%d]: issuer %q listed twice", ErrConfig, i, ic.URL))
		}
		a.issuers[ic.URL] = is
	}
	for i, rc := range cfg.Rules {
		r, err := newRule(rc)
		if err != nil {
			errs = append(errs, fmt.Errorf("rules[%d]: %w", i, err))
			continue
		}
		a.rules = append(a.rules, r)
	}
	if cfg.CAFile != "" || cfg.CADir != "" {
		pool, n, err := LoadCAs(cfg.CAFile, cfg.CADir)
		switch {
		case err != nil:
			errs = append(errs, err)
		case n == 0:
			errs = append(errs, fmt.Errorf("%w: no CA certificates in %q / %q", ErrConfig, cfg.CAFile, cfg.CADir))
		default:
			a.trust = &trust{pool: pool}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	a.tokens = newTokenCache(tokenCacheSize)
	a.parser = jwt.NewParser(jwt.WithValidMethods(validMethods), jwt.WithLeeway(a.skew),
		jwt.WithTimeFunc(a.now), jwt.WithExpirationRequired(), jwt.WithIssuedAt())
	a.certs = newCertCache(certCacheSize)
	a.refused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lakefed_auth_refused_total",
		Help: "Requests refused by lakefed's auth, by action and reason.",
	}, []string{"action", "reason"})
	if opt.Registerer != nil {
		if err := opt.Registerer.Register(a.refused); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return nil, fmt.Errorf("auth: register metrics: %w", err)
			}
			// A second Authorizer on one registry (two roles in one
			// process) counts into the first one's counter.
			a.refused = are.ExistingCollector.(*prometheus.CounterVec)
		}
	}
	ctx, a.cancel = context.WithCancel(ctx)
	for _, is := range a.issuers {
		if err := is.refresh(ctx, true); err != nil {
			a.log.WarnContext(ctx, "issuer keys not fetched", "issuer", is.cfg.URL, "err", err)
		}
	}
	if len(a.issuers) > 0 {
		a.wg.Add(1)
		go a.refreshLoop(ctx, refresh)
	}
	return a, nil
}

// Register exports lakefed_auth_refused_total on reg as well, for a
// process whose registries exist only after its Authorizer (each role
// has its own): the counter stays the one this Authorizer counts into,
// so a refusal shows on every registry it is on. Registering it twice on
// one registry is not an error; another counter of that name is.
func (a *Authorizer) Register(reg prometheus.Registerer) error {
	err := reg.Register(a.refused)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) && are.ExistingCollector == prometheus.Collector(a.refused) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("auth: register metrics: %w", err)
	}
	return nil
}

// Close stops the key refresher and waits for it. Safe to call twice.
func (a *Authorizer) Close() error {
	a.closeOnce.Do(func() {
		a.cancel()
		a.wg.Wait()
	})
	return nil
}

// refreshLoop fetches every issuer's keys again every period, so that a
// key the issuer withdrew stops being accepted even when no token with an
// unknown kid comes to force a fetch.
func (a *Authorizer) refreshLoop(ctx context.Context, period time.Duration) {
	defer a.wg.Done()
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			a.refreshKeys(ctx)
		}
	}
}

// refreshKeys fetches every issuer's keys now, ignoring the rate limit.
func (a *Authorizer) refreshKeys(ctx context.Context) {
	for _, is := range a.issuers {
		if err := is.refresh(ctx, true); err != nil {
			a.log.WarnContext(ctx, "issuer keys not refreshed", "issuer", is.cfg.URL, "err", err)
		}
	}
}

func newRule(rc Rule) (rule, error) {
	p, err := httpx.CleanPath(rc.Prefix)
	if err != nil || rc.Prefix == "" {
		return rule{}, fmt.Errorf("%w: prefix %q: not a clean absolute path", ErrConfig, rc.Prefix)
	}
	r := rule{prefix: p}
	if r.anonymous, err = setOf(rc.Anonymous); err != nil {
		return rule{}, err
	}
	if r.allow, err = setOf(rc.Allow); err != nil {
		return rule{}, err
	}
	if len(rc.Identities) > 0 {
		r.identities = make(map[string]bool, len(rc.Identities))
		for _, id := range rc.Identities {
			r.identities[id] = true
		}
	}
	if len(rc.Groups) > 0 {
		r.groups = make(map[string]bool, len(rc.Groups))
		for _, g := range rc.Groups {
			r.groups[g] = true
		}
	}
	if len(rc.VOs) > 0 {
		r.vos = make(map[string]bool, len(rc.VOs))
		for _, vo := range rc.VOs {
			if !safeName(vo) {
				return rule{}, fmt.Errorf("%w: VO %q is not a plain name", ErrConfig, vo)
			}
			r.vos[vo] = true
		}
	}
	if len(rc.FQANs) > 0 {
		r.fqans = make(map[string][]string, len(rc.FQANs))
		for _, f := range rc.FQANs {
			n, err := NormalizeFQAN(f)
			if err != nil {
				return rule{}, fmt.Errorf("%w: %v", ErrConfig, err)
			}
			g, role := splitFQAN(n)
			r.fqans[g] = append(r.fqans[g], role)
		}
	}
	r.anyAuth = r.allow != 0 && r.identities == nil && r.groups == nil && r.vos == nil && r.fqans == nil
	if r.allow == 0 && r.anonymous == 0 {
		return rule{}, fmt.Errorf("%w: rule for %q grants nothing", ErrConfig, p)
	}
	return r, nil
}

// issuerURLOK reports whether u may be an issuer: https, or http on a
// loopback host (a test issuer). Keys fetched over plain HTTP from the
// network could be anyone's.
func issuerURLOK(u string) error {
	pu, err := url.Parse(u)
	if err != nil {
		return fmt.Errorf("%w: issuer %q: %v", ErrConfig, u, err)
	}
	switch {
	case pu.Scheme == "https" && pu.Host != "":
		return nil
	case pu.Scheme == "http":
		switch pu.Hostname() {
		case "127.0.0.1", "::1", "localhost":
			return nil
		}
	}
	return fmt.Errorf("%w: issuer %q: must be https (or http on loopback)", ErrConfig, u)
}

// coveredBy reports whether the clean path p is prefix or below it, on
// path-segment boundaries: "/a" covers "/a" and "/a/b" but not "/ab".
func coveredBy(p, prefix string) bool {
	if prefix == "/" {
		return true
	}
	if !strings.HasPrefix(p, prefix) {
		return false
	}
	return len(p) == len(prefix) || p[len(prefix)] == '/'
}

// IdentityKind says how a caller proved who it is.
type IdentityKind uint8

// Identity kinds.
const (
	// Anonymous: no credentials.
	Anonymous IdentityKind = iota
	// Token: a bearer token from a configured issuer.
	Token
	// X509: a client certificate (or RFC 3820 proxy) from a trusted CA.
	X509
)

func (k IdentityKind) String() string {
	switch k {
	case Token:
		return "token"
	case X509:
		return "x509"
	}
	return "anonymous"
}

// Scope is one capability of a token: actions under an absolute path
// (the scope's path joined to its issuer's Base).
type Scope struct {
	Path    string
	actions actionSet
}

// Allows reports whether the scope grants action on the clean path p.
func (s Scope) Allows(action Action, p string) bool {
	return s.actions&action.set() != 0 && coveredBy(p, s.Path)
}

// Identity is who a request comes from.
type Identity struct {
	// Kind is how it was proved.
	Kind IdentityKind
	// Name is what Rule.Identities match: the DN (OpenSSL slash form) of
	// a certificate's end entity, or "ISSUER/SUB" of a token; "" for
	// Anonymous.
	Name string
	// Issuer and Subject are the token's iss and sub.
	Issuer, Subject string
	// Groups are the token's wlcg.groups.
	Groups []string
	// VOs and FQANs are the VOMS attributes of a proxy certificate, from
	// the attribute certificates that verified, FQANs normalised
	// (NormalizeFQAN); nil for tokens and plain certificates.
	VOs, FQANs []string
	// Scopes are the token's storage capabilities; nil for an identity
	// token and for certificates.
	Scopes []Scope
	// Others are the token's other scopes, as written ("openid",
	// "lakefed.admin"): no path rule reads them; HasScope does.
	Others []string
	// Proxy is set when the certificate was an RFC 3820 proxy.
	Proxy bool
	// Expires is when the credential stops being valid (zero: anonymous).
	Expires time.Time
	// Token is the raw bearer token, for a federator that passes the
	// caller's token on to an endpoint. Never log it.
	Token string
}

// String is the identity for logs.
func (id Identity) String() string {
	if id.Kind == Anonymous {
		return "anonymous"
	}
	return id.Kind.String() + ":" + id.Name
}

// HasScope reports whether id is a token carrying the scope s among its
// other (not storage) scopes, such as the admin API's "lakefed.admin".
func (id Identity) HasScope(s string) bool {
	return id.Kind == Token && s != "" && slices.Contains(id.Others, s)
}

// capability reports whether id is a token whose scopes decide alone.
func (id *Identity) capability() bool { return id.Kind == Token && len(id.Scopes) > 0 }

type ctxKey struct{}

// WithIdentity returns ctx carrying id, as Middleware passes it on.
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, ctxKey{}, &id)
}

// IdentityFrom returns the identity Middleware found for the request
// whose context ctx is; ok is false outside the middleware.
func IdentityFrom(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(ctxKey{}).(*Identity)
	if !ok {
		return Identity{}, false
	}
	return *id, true
}

// Allow reports whether id may do action on path: nil, or an error
// wrapping ErrUnauthenticated (anonymous and nothing granted to anyone)
// or ErrForbidden, whose text is a one-line reason fit for the client.
// The path is cleaned first; one that cannot be is refused. Allow does
// not log or count; Middleware does, for the requests it refuses.
func (a *Authorizer) Allow(ctx context.Context, id Identity, action Action, path string) error {
	_ = ctx
	p, err := httpx.CleanPath(path)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrForbidden, err)
	}
	bit := action.set()
	if bit == 0 {
		return fmt.Errorf("%w: unknown action %q", ErrForbidden, action)
	}
	if a.granted(&id, bit, p) {
		return nil
	}
	if id.Kind == Anonymous {
		return fmt.Errorf("%w: %s of %s needs credentials", ErrUnauthenticated, action, p)
	}
	if id.capability() {
		return fmt.Errorf("%w: token has no scope for %s of %s", ErrForbidden, action, p)
	}
	return fmt.Errorf("%w: %s may not %s %s", ErrForbidden, id, action, p)
}

// granted reports whether id may do the actions in bit on the clean path p.
func (a *Authorizer) granted(id *Identity, bit actionSet, p string) bool {
	if id.capability() {
		for _, s := range id.Scopes {
			if s.actions&bit != 0 && coveredBy(p, s.Path) {
				return true
			}
		}
	}
	for i := range a.rules {
		r := &a.rules[i]
		if !coveredBy(p, r.prefix) {
			continue
		}
		if r.anonymous&bit != 0 {
			return true
		}
		if r.allow&bit == 0 || id.Kind == Anonymous || id.capability() {
			continue
		}
		if r.anyAuth || r.identities[id.Name] {
			return true
		}
		for _, g := range id.Groups {
			if r.groups[g] {
				return true
			}
		}
		if r.vomsGrants(id) {
			return true
		}
	}
	return false
}

// vomsGrants reports whether r's VOs or FQANs name one of id's VOMS
// attributes.
func (r *rule) vomsGrants(id *Identity) bool {
	for _, vo := range id.VOs {
		if r.vos[vo] {
			return true
		}
	}
	if r.fqans == nil {
		return false
	}
	for _, f := range id.FQANs {
		g, role := splitFQAN(f)
		for _, want := range r.fqans[g] {
			if want == "" || want == role {
				return true
			}
		}
	}
	return false
}
