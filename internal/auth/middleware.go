package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/lakefed/lakefed/internal/httpx"
)

// ExistsFunc reports whether the clean path p exists at the server the
// middleware guards. Middleware uses it to tell a PUT that creates from
// one that overwrites (and the same for the Destination of COPY and
// MOVE). It is called on the request path, so it should be a stat.
type ExistsFunc func(ctx context.Context, p string) (bool, error)

// need is one check a request must pass: any action of set on path.
type need struct {
	set    actionSet
	action Action // for the refusal's reason and the metric's label
	path   string
}

// Refusal reasons: the values of the metric's reason label.
const (
	reasonNoCredentials = "no_credentials"
	reasonInvalidToken  = "invalid_token"
	reasonInvalidCert   = "invalid_certificate"
	reasonNotAllowed    = "not_allowed"
	reasonBadPath       = "bad_path"
	reasonMethod        = "method"
)

// Middleware guards next: it finds the caller (bearer token, else
// verified client certificate, else anonymous), maps the method to the
// actions it needs, and either refuses or calls next with the identity
// in the request context (IdentityFrom) and the authz parameter removed
// from the URL.
//
// Methods (RFC 9110, RFC 4918):
//
//	GET, HEAD          read
//	PROPFIND           list; with Depth: 0 read or list (a stat, which
//	                   gfal2 and davix do before a transfer)
//	PUT, LOCK, UNLOCK  create when the target does not exist, modify
//	                   when it does; without exists (nil), both; when
//	                   exists fails, a PUT either one (below), LOCK and
//	                   UNLOCK both
//	PROPPATCH          modify
//	DELETE             delete
//	MKCOL              create
//	COPY               read on the source, create (modify if it exists
//	                   and Overwrite is not F) on a local Destination;
//	                   with a Source header (HTTP-TPC pull) create or
//	                   modify on the request path only
//	MOVE               modify and delete on the source, create or modify
//	                   on the Destination
//	OPTIONS            always allowed
//
// Others get 405. A PUT allowed only to create is passed on with
// "If-None-Match: *", so a file that appears between the existence check
// and the write is not overwritten (the storage role evaluates it under
// its per-path lock); one allowed only to modify, with "If-Match: *".
//
// Refusals: no credentials and nothing granted to anyone → 401 with
// `WWW-Authenticate: Bearer realm="…"` (no error code, RFC 6750 §3.1);
// an invalid token → 401 with error="invalid_token"; an invalid client
// certificate → 401; a known caller without a grant → 403 (for a token,
// with error="insufficient_scope"). Each refusal is logged at Info with
// identity, path, action and reason, and counted in
// lakefed_auth_refused_total{action,reason}.
func (a *Authorizer) Middleware(next http.Handler, exists ExistsFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.serve(w, r, next, exists)
	})
}

func (a *Authorizer) serve(w http.ResponseWriter, r *http.Request, next http.Handler, exists ExistsFunc) {
	ctx := r.Context()
	id, query, reason, err := a.identify(r)
	if err != nil {
		a.refuse(w, r, &Identity{}, "", r.URL.Path, reason, err.Error())
		return
	}
	if r.Method == http.MethodOptions {
		// Always allowed, "OPTIONS *" (RFC 9110 §9.3.7) included.
		next.ServeHTTP(w, a.passOn(r, id, query, condNone))
		return
	}
	p, err := httpx.CleanPath(r.URL.Path)
	if err != nil {
		a.refuse(w, r, id, "", r.URL.Path, reasonBadPath, err.Error())
		return
	}
	var buf [4]need // on the stack: needs appends to it
	needs, ok, err := a.needs(r, p, exists, buf[:0])
	switch {
	case err != nil:
		a.refuse(w, r, id, "", p, reasonBadPath, err.Error())
		return
	case !ok:
		a.refuse(w, r, id, "", p, reasonMethod, "method "+r.Method+" is not allowed")
		return
	}
	cond := condNone
	for _, n := range needs {
		if !a.granted(id, n.set, n.path) {
			reason := reasonNotAllowed
			if id.Kind == Anonymous {
				reason = reasonNoCredentials
			}
			a.refuse(w, r, id, n.action, n.path, reason, strings.TrimPrefix(a.Allow(ctx, *id, n.action, n.path).Error(), "auth: "))
			return
		}
		if r.Method != http.MethodPut || n.path != p {
			continue
		}
		// A caller who may only create gets If-None-Match: *, one who
		// may only modify If-Match: *, so the server keeps the rule
		// atomically. That is also what lets such a caller through when
		// whether the file exists could not be told (an endpoint down):
		// the server answers the outage (503) instead of a refusal
		// (403) that would tell the client never to retry.
		switch {
		case n.set&setCreate != 0 && !a.granted(id, setModify, p):
			cond = condCreateOnly
		case n.set&setModify != 0 && !a.granted(id, setCreate, p):
			cond = condModifyOnly
		}
	}
	next.ServeHTTP(w, a.passOn(r, id, query, cond))
}

// writeCond is the condition a PUT is passed on with, for a caller who
// may do only one of create and modify.
type writeCond uint8

const (
	// condNone: the caller may create and modify, or the request is no PUT.
	condNone writeCond = iota
	// condCreateOnly: "If-None-Match: *" (RFC 9110 §13.1.2).
	condCreateOnly
	// condModifyOnly: "If-Match: *" (RFC 9110 §13.1.1).
	condModifyOnly
)

// identify finds who r comes from: its bearer token, else its client
// certificate when CAs are trusted, else anonymous. It returns the
// identity (shared with the caches: never written) and the raw query
// without authz; or the refusal reason of the credential that failed and
// an error fit for the client.
func (a *Authorizer) identify(r *http.Request) (id *Identity, query, reason string, err error) {
	tok, offered, query, err := bearer(r)
	switch {
	case err != nil:
		return nil, query, reasonInvalidToken, err
	case offered:
		if id, err = a.verifyToken(r.Context(), tok); err != nil {
			return nil, query, reasonInvalidToken, errors.New(strings.TrimPrefix(err.Error(), "auth: "))
		}
		return id, query, "", nil
	case r.TLS != nil && len(r.TLS.PeerCertificates) > 0 && a.trust != nil:
		if id, err = a.certIdentity(r.TLS.PeerCertificates); err != nil {
			return nil, query, reasonInvalidCert, errors.New(strings.TrimPrefix(err.Error(), "auth: "))
		}
		return id, query, "", nil
	}
	return &Identity{}, query, "", nil
}

// WithCaller returns r with its caller's identity in its context
// (IdentityFrom), found as Middleware finds it, for a page the rules do
// not guard but whose answer depends on who asks (MayList). It refuses
// nobody: a caller whose credentials fail is anonymous there.
func (a *Authorizer) WithCaller(r *http.Request) *http.Request {
	id, _, _, err := a.identify(r)
	if err != nil {
		id = &Identity{}
	}
	return r.WithContext(context.WithValue(r.Context(), ctxKey{}, id))
}

// MayList reports whether the caller of r (the identity in its context,
// from Middleware or WithCaller; anonymous without one) may list the path
// p under the rules: the permission PROPFIND needs. The operator's pages
// that show paths of the namespace (files cached, uploads failing,
// replicas disagreeing) show only those, until they get rules of their
// own. It does not log or count.
func (a *Authorizer) MayList(r *http.Request, p string) bool { return a.may(r, List, p) }

// MayRead reports, as MayList does, whether the caller of r may read p
// (GET, HEAD): what a storage role's listing checks of each member, so
// that it says of a file no more than a HEAD of it would.
func (a *Authorizer) MayRead(r *http.Request, p string) bool { return a.may(r, Read, p) }

// may reports whether the caller of r may do action on p.
func (a *Authorizer) may(r *http.Request, action Action, p string) bool {
	id, _ := IdentityFrom(r.Context())
	return a.Allow(r.Context(), id, action, p) == nil
}

// passOn is the request next gets: id in its context, the query without
// authz, and "If-None-Match: *" when the caller may only create
// ("If-Match: *" when only modify). The caller's request is never
// changed: what is altered is copied.
func (a *Authorizer) passOn(r *http.Request, id *Identity, query string, cond writeCond) *http.Request {
	ctx := context.WithValue(r.Context(), ctxKey{}, id)
	if id.Token != "" {
		ctx = httpx.WithBearer(ctx, id.Token) // for endpoints that pass callers' tokens on
	}
	r2 := r.WithContext(ctx)
	if query != r.URL.RawQuery {
		u := *r.URL
		u.RawQuery = query
		r2.URL = &u
		r2.RequestURI = u.RequestURI()
	}
	switch cond {
	case condCreateOnly:
		r2.Header = r.Header.Clone()
		r2.Header.Set("If-None-Match", "*")
	case condModifyOnly:
		r2.Header = r.Header.Clone()
		r2.Header.Set("If-Match", "*")
	}
	return r2
}

// needs appends to ns the checks the request must pass; ok is false for
// a method that has no mapping.
func (a *Authorizer) needs(r *http.Request, p string, exists ExistsFunc, ns []need) ([]need, bool, error) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		return append(ns, need{set: setRead, action: Read, path: p}), true, nil
	case "PROPFIND":
		if strings.TrimSpace(r.Header.Get("Depth")) == "0" {
			return append(ns, need{set: setRead | setList, action: List, path: p}), true, nil
		}
		return append(ns, need{set: setList, action: List, path: p}), true, nil
	case "PROPPATCH":
		return append(ns, need{set: setModify, action: Modify, path: p}), true, nil
	case http.MethodDelete:
		return append(ns, need{set: setDelete, action: Delete, path: p}), true, nil
	case "MKCOL":
		return append(ns, need{set: setCreate, action: Create, path: p}), true, nil
	case http.MethodPut, "LOCK", "UNLOCK":
		return a.writeNeeds(r.Context(), p, exists, true, r.Method == http.MethodPut, ns), true, nil
	case "COPY", "MOVE":
		overwrite := !strings.EqualFold(strings.TrimSpace(r.Header.Get("Overwrite")), "F")
		switch {
		case r.Method == "MOVE":
			ns = append(ns, need{set: setModify, action: Modify, path: p}, need{set: setDelete, action: Delete, path: p})
		case r.Header.Get("Source") != "":
			// HTTP-TPC pull: the request path is the destination, the
			// source is remote.
			return a.writeNeeds(r.Context(), p, exists, overwrite, false, ns), true, nil
		default:
			ns = append(ns, need{set: setRead, action: Read, path: p})
		}
		dst, local, err := destination(r)
		if err != nil {
			return nil, true, err
		}
		if local {
			ns = a.writeNeeds(r.Context(), dst, exists, overwrite, false, ns)
		}
		return ns, true, nil
	}
	return nil, false, nil
}

// writeNeeds are the checks of writing p: create if it does not exist,
// modify if it does (only create when overwrite is false: the server
// refuses to overwrite anyway). When exists cannot tell, a PUT needs
// either, and is passed on with a condition (serve); any other write
// needs both.
func (a *Authorizer) writeNeeds(ctx context.Context, p string, exists ExistsFunc, overwrite, put bool, ns []need) []need {
	cr := need{set: setCreate, action: Create, path: p}
	if !overwrite {
		return append(ns, cr)
	}
	md := need{set: setModify, action: Modify, path: p}
	either := need{set: setCreate | setModify, action: Create, path: p}
	if exists == nil {
		return append(ns, cr, md)
	}
	ok, err := exists(ctx, p)
	switch {
	case err != nil:
		// Unknown (an endpoint down): either grant lets the PUT on,
		// with the condition that keeps the caller to it (serve).
		a.log.DebugContext(ctx, "exists check failed", "path", p, "err", err)
		if put {
			return append(ns, either)
		}
		return append(ns, cr, md)
	case ok:
		return append(ns, md)
	}
	return append(ns, cr)
}

// destination returns the clean path of a COPY or MOVE's Destination
// (RFC 4918 §10.3) and whether it is on this server (no host, or the
// request's host). A remote Destination is an HTTP-TPC push; the copy
// code checks it.
func destination(r *http.Request) (string, bool, error) {
	d := r.Header.Get("Destination")
	if d == "" {
		return "", false, nil
	}
	u, err := url.Parse(d)
	if err != nil {
		return "", false, errors.New("bad Destination header")
	}
	if u.Host != "" && !strings.EqualFold(u.Host, r.Host) {
		return "", false, nil
	}
	p, err := httpx.CleanPath(u.Path)
	if err != nil {
		return "", false, fmt.Errorf("destination: %v", err)
	}
	return p, true, nil
}

// refuse answers a refused request, logs it and counts it.
func (a *Authorizer) refuse(w http.ResponseWriter, r *http.Request, id *Identity, action Action, p, reason, msg string) {
	a.refused.WithLabelValues(string(action), reason).Inc()
	a.log.InfoContext(r.Context(), "request refused", "identity", id.String(), "path", p,
		"action", string(action), "reason", reason, "method", r.Method, "remote", r.RemoteAddr, "err", msg)
	msg = oneLine(msg)
	code := http.StatusForbidden
	challenge := `Bearer realm="` + a.realm + `"`
	switch reason {
	case reasonNoCredentials, reasonInvalidCert:
		code = http.StatusUnauthorized
	case reasonInvalidToken:
		code = http.StatusUnauthorized
		challenge += `, error="invalid_token", error_description="` + quotable(msg) + `"`
	case reasonNotAllowed:
		if id.Kind == Token {
			challenge += `, error="insufficient_scope"`
		} else {
			challenge = ""
		}
	case reasonBadPath:
		code, challenge = http.StatusBadRequest, ""
	case reasonMethod:
		code, challenge = http.StatusMethodNotAllowed, ""
	}
	if challenge != "" {
		w.Header().Set("WWW-Authenticate", challenge)
	}
	httpx.WriteError(w, code, msg)
}

// oneLine keeps a reason to one line of printable text.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

// quotable makes s fit an RFC 6750 error_description: printable ASCII
// without '"' and '\'.
func quotable(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e || r == '"' || r == '\\' {
			return '\''
		}
		return r
	}, s)
}
