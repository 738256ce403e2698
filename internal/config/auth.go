package config

import (
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	"github.com/lakefed/lakefed/internal/httpx"
)

// Auth is who may do what (package internal/auth): trusted token issuers,
// the CAs of client certificates, and path rules. With an auth section,
// every request to the storage servers, the federator's namespace and the
// cache must pass it; without one, everything is open (as before). It is
// the YAML shape only; package server maps it onto auth.Config.
//
//	auth:
//	  ca_dir: /etc/grid-security/certificates
//	  issuers:
//	    - {issuer: https://cms-auth.web.cern.ch/, base: /store}
//	  rules:
//	    - {prefix: /public, anonymous: [read, list]}
//	    - {prefix: /store/user, groups: [/cms], allow: [read, list, create]}
//	    - {prefix: /store/mc, fqans: [/cms/Role=production], allow: [read, list, create]}
type Auth struct {
	// CAFile is a PEM bundle of CAs trusted for client certificates.
	// Neither CAFile nor CADir: client certificates are not used (a
	// request with one counts as anonymous).
	CAFile string `yaml:"ca_file"`
	// CADir is a grid-security directory of CA certificates
	// (/etc/grid-security/certificates): every *.pem and hashed <hash>.N
	// file in it is read; CRLs and signing policies are skipped. With
	// CAFile, the CAs of both are trusted.
	CADir string `yaml:"ca_dir"`
	// VOMSDir is the grid-security vomsdir: VO/host.lsc names, on its
	// first line, the DN of the VOMS server of VO on host and, on the
	// second, its CA's DN. A proxy's VOMS attributes count only when
	// their server is named there and its certificate chains to the
	// CAs above. Default /etc/grid-security/vomsdir.
	VOMSDir string `yaml:"vomsdir"`
	// Issuers are the token issuers trusted. None: bearer tokens are
	// refused.
	Issuers []Issuer `yaml:"issuers"`
	// Rules grant actions by path prefix. No rule (and no token scope)
	// allowing an action means it is refused.
	Rules []Rule `yaml:"rules"`
	// ClockSkew is allowed on a token's exp, nbf and iat. Zero: 60s.
	ClockSkew Duration `yaml:"clock_skew"`
}

// Issuer is one trusted token issuer (WLCG JWT profile or SciTokens).
type Issuer struct {
	// Issuer is the iss claim, exactly; its keys are found by OIDC
	// discovery under it. https (http only on loopback, for tests).
	Issuer string `yaml:"issuer"`
	// Audiences are accepted besides https://wlcg.cern.ch/jwt/v1/any.
	Audiences []string `yaml:"audiences"`
	// Base is the namespace path the tokens' scope paths are relative
	// to. Default "/".
	Base string `yaml:"base"`
	// Kind is "wlcg", "scitokens" or "" (both vocabularies).
	Kind string `yaml:"kind"`
}

// Rule grants actions under a path prefix (Dynafed's allowusers and
// allowgroups, XRootD's authdb).
type Rule struct {
	// Prefix is the path the rule covers, by whole segments: "/a" covers
	// "/a" and "/a/b", not "/ab". A clean absolute path; required.
	Prefix string `yaml:"prefix"`
	// Anonymous are actions (read, list, create, modify, delete) anyone
	// may do under the prefix, with or without credentials.
	Anonymous []string `yaml:"anonymous"`
	// Identities are callers granted the allow actions: certificate DNs
	// in OpenSSL slash form, or "ISSUER/SUB" of tokens (the issuer URL
	// without its trailing slash, a slash, the sub claim).
	Identities []string `yaml:"identities"`
	// Groups are token groups granted the allow actions, matched exactly
	// against the token's wlcg.groups ("/cms", "/cms/uscms").
	Groups []string `yaml:"groups"`
	// VOs are virtual organisations granted the allow actions: a proxy
	// whose VOMS attributes were issued for one of them ("cms"), whatever
	// its group and role.
	VOs []string `yaml:"vos"`
	// FQANs are VOMS attributes granted the allow actions: "/cms" holds
	// with any role, "/cms/Role=production" only with that role.
	FQANs []string `yaml:"fqans"`
	// Allow are the actions (read, list, create, modify, delete) granted
	// to the callers that identities, groups, vos and fqans name; with
	// none of those given, to every authenticated caller (a valid
	// certificate, or a token without storage scopes).
	Allow []string `yaml:"allow"`
}

// Operator guards the operator's pages (the dashboard under /ui, the
// JSON under /api/ and /metrics), which the path rules do not cover:
// they show endpoints, errors and, for some, paths of the namespace.
//
//	operator:
//	  anonymous: [127.0.0.0/8, ::1/128, 10.1.0.0/16]   # Prometheus's network too
//	  identities: ["/DC=org/DC=example/CN=Ops"]
type Operator struct {
	// Anonymous are the networks (CIDR) whose clients may see the pages
	// without credentials. Not given: loopback only (127.0.0.0/8 and
	// ::1/128); an empty list: none.
	Anonymous []string `yaml:"anonymous"`
	// Identities may see them from anywhere: certificate DNs, or
	// "ISSUER/SUB" of tokens (verified by the auth section). The admins
	// (federation.admin) may too.
	Identities []string `yaml:"identities"`
}

// DefaultOperatorNetworks are Operator.Anonymous when it is not given.
var DefaultOperatorNetworks = []string{"127.0.0.0/8", "::1/128"}

// Networks returns the networks of Anonymous, the defaults when it was
// not given; Validate has checked them.
func (o Operator) Networks() []netip.Prefix {
	nets := o.Anonymous
	if nets == nil {
		nets = DefaultOperatorNetworks
	}
	out := make([]netip.Prefix, 0, len(nets))
	for _, n := range nets {
		if p, err := netip.ParsePrefix(n); err == nil {
			out = append(out, p.Masked())
		}
	}
	return out
}

func (o *Operator) validate(v *validator, path string, auth bool) {
	for i, n := range o.Anonymous {
		if _, err := netip.ParsePrefix(n); err != nil {
			v.errorf(fmt.Sprintf("%s.anonymous[%d]", path, i), "%q: want a network such as 10.0.0.0/8", n)
		}
	}
	if len(o.Identities) > 0 && !auth {
		v.errorf(path+".identities", "needs an auth section to verify them")
	}
}

// Actions are the actions a rule may name.
var Actions = []string{"read", "list", "create", "modify", "delete"}

func (a *Auth) validate(v *validator, path string) {
	if a == nil {
		return
	}
	for i, is := range a.Issuers {
		p := fmt.Sprintf("%s.issuers[%d]", path, i)
		u, err := url.Parse(is.Issuer)
		if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
			v.errorf(p+".issuer", "%q: want the issuer's https URL", is.Issuer)
		}
		if is.Base != "" {
			if c, err := httpx.CleanPath(is.Base); err != nil || c != is.Base {
				v.errorf(p+".base", "%q: want a clean absolute path", is.Base)
			}
		}
		if is.Kind != "" && is.Kind != "wlcg" && is.Kind != "scitokens" {
			v.errorf(p+".kind", "%q: want wlcg, scitokens or nothing", is.Kind)
		}
	}
	for i, r := range a.Rules {
		p := fmt.Sprintf("%s.rules[%d]", path, i)
		if c, err := httpx.CleanPath(r.Prefix); err != nil || c != r.Prefix {
			v.errorf(p+".prefix", "%q: want a clean absolute path", r.Prefix)
		}
		for _, list := range [][]string{r.Anonymous, r.Allow} {
			for _, act := range list {
				if !slices.Contains(Actions, act) {
					v.errorf(p, "action %q: want one of %v", act, Actions)
				}
			}
		}
		for _, vo := range r.VOs {
			if vo == "" || strings.ContainsAny(vo, "/ ") {
				v.errorf(p+".vos", "%q: want a VO name such as cms", vo)
			}
		}
		for _, f := range r.FQANs {
			if !strings.HasPrefix(f, "/") || len(f) < 2 {
				v.errorf(p+".fqans", "%q: want an FQAN such as /cms/Role=production", f)
			}
		}
		if len(r.Anonymous) == 0 && len(r.Allow) == 0 {
			v.errorf(p, "grants nothing: give anonymous or allow actions")
		}
	}
	if a.ClockSkew < 0 {
		v.errorf(path+".clock_skew", "must not be negative")
	}
}
