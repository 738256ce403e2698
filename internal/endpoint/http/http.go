// Package http is the endpoint kind for any HTTP/WebDAV storage server:
// lakefed's own storage role, nginx with dav and dav-ext, XRootD's XrdHttp,
// dCache and EOS. URLs are http(s)://host[:port]/base/ or dav(s)://... (the
// same over http(s)).
//
// The package is named http like its directory; inside it "net/http" keeps
// its usual name, and code that imports both aliases this one (httpep).
//
// It speaks RFC 9110 (ranged GET, HEAD, PUT, DELETE, OPTIONS), RFC 4918
// (PROPFIND depth 0/1, MKCOL) and RFC 3230 digests (Want-Digest/Digest).
// Redirects (dCache doors, a lakefed federator) are followed by the
// endpoint itself, up to 10, keeping the method.
//
//	ep, err := http.New(ctx, endpoint.Config{Name: "site-b", URL: "davs://se.example.org:443/atlas/"}, log)
//	info, err := ep.Stat(ctx, "/f.root")                // HEAD; PROPFIND depth 0 when HEAD cannot tell
//	rc, err := ep.Open(ctx, "/f.root", 1<<20, 4096)      // Range: bytes=1048576-1052671
//	sum, err := ep.Checksum(ctx, "/f.root", "adler32")  // HEAD + Want-Digest
//	u, err := ep.RedirectURL(ctx, "/f.root", endpoint.OpRead)
package http

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/httpx"
	"github.com/lakefed/lakefed/internal/httpx/transport"
)

// MaxRedirects bounds the redirect chain of one operation.
const MaxRedirects = 10

// maxErrBody is how much of an error response's body goes into an error
// message (its first line only).
const maxErrBody = 512

// Endpoint is one HTTP/WebDAV server. It is safe for concurrent use; its
// operations share one Transport (keep-alive connections), but for HEADs
// to its own plain-HTTP host, which go on a pool of their own (head.go).
type Endpoint struct {
	name   string
	base   *url.URL // http or https, path ends in "/"
	client *http.Client
	tr     *http.Transport
	// heads are the keep-alive connections HEADs to the endpoint's own
	// host go on when headDirect (head.go).
	heads      *endpoint.IdlePool[*headConn]
	headDirect bool
	timeout    time.Duration
	token      string
	pass       bool // send the caller's token (httpx.Bearer) in place of token
	log        *slog.Logger

	// noPropfind is set once the server answered PROPFIND with 405 or
	// 501: Stat then uses HEAD, and List is refused.
	noPropfind atomic.Bool
	// server is 0 until an answer was seen, then serverOther,
	// serverXrootD or serverStorage (from its Server header): XrdHttp
	// needs work-arounds, and only a lakefed storage role lists as it
	// stats (StatList).
	server atomic.Int32
	// condPut is condUnknown until an OPTIONS answer was seen (Probe),
	// then whether the server said it evaluates conditional PUTs
	// (httpx.ConditionalPutHeader).
	condPut atomic.Int32
	// validators is what the last file answer's ETag was worth
	// (Validators): 0 before one, then validStrong or validWeak.
	validators atomic.Int32
}

// Values of Endpoint.condPut.
const (
	condUnknown int32 = iota
	condNo
	condYes
)

// Values of Endpoint.validators.
const (
	validStrong int32 = iota + 1
	validWeak
)

// Values of Endpoint.server.
const (
	serverUnknown int32 = iota
	serverOther
	serverXrootD
	serverStorage
)

var (
	_ endpoint.Endpoint          = (*Endpoint)(nil)
	_ endpoint.Redirecter        = (*Endpoint)(nil)
	_ endpoint.Checksummer       = (*Endpoint)(nil)
	_ endpoint.ConditionalPutter = (*Endpoint)(nil)
	_ endpoint.ValidatorReporter = (*Endpoint)(nil)
	_ endpoint.StatLister        = (*Endpoint)(nil)
)

// New returns the endpoint for cfg.URL (http, https, dav or davs). It
// checks the URL and the TLS settings but does not contact the server:
// Probe does. log nil means slog.Default().
func New(ctx context.Context, cfg endpoint.Config, log *slog.Logger) (*Endpoint, error) {
	if cfg.Name == "" {
		return nil, errors.New("http: endpoint name is empty")
	}
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("http: endpoint %s: url: %w", cfg.Name, err)
	}
	sc, _ := endpoint.LookupScheme(u.Scheme)
	if sc.Kind != endpoint.KindHTTP {
		return nil, fmt.Errorf("http: endpoint %s: url %q: scheme must be http, https, dav or davs", cfg.Name, cfg.URL)
	}
	u.Scheme = sc.WireScheme()
	if u.Host == "" {
		return nil, fmt.Errorf("http: endpoint %s: url %q: no host", cfg.Name, cfg.URL)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("http: endpoint %s: url %q: no user, query or fragment allowed (use bearer_token)", cfg.Name, cfg.URL)
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
		if u.RawPath != "" {
			u.RawPath += "/"
		}
	}
	// The kinds' defaults (h1, many idle connections); no
	// ResponseHeaderTimeout: each operation bounds its own wait.
	tr, err := transport.New(cfg, transport.Options{})
	if err != nil {
		return nil, fmt.Errorf("http: endpoint %s: %w", cfg.Name, err)
	}
	if log == nil {
		log = slog.Default()
	}
	return &Endpoint{
		name:       cfg.Name,
		base:       u,
		tr:         tr,
		heads:      newHeadPool(),
		headDirect: headDirect(tr, u),
		client: &http.Client{
			Transport: tr,
			// Redirects are followed in do, which keeps the method and the
			// body rules WebDAV needs (net/http turns a 302 PROPFIND into GET).
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		timeout: cfg.TimeoutOrDefault(),
		token:   cfg.BearerToken,
		pass:    cfg.PassToken,
		log:     log.With("component", "endpoint", "endpoint", cfg.Name),
	}, nil
}

// Name returns the endpoint's name from the config.
func (e *Endpoint) Name() string { return e.name }

// Close drops the endpoint's idle connections. The endpoint stays usable.
func (e *Endpoint) Close() error {
	e.tr.CloseIdleConnections()
	e.heads.Drain()
	return nil
}

// url returns the URL of the endpoint path p, with a trailing slash when
// dir is set (nginx wants one for collections).
func (e *Endpoint) url(p string, dir bool) *url.URL {
	u := *e.base
	rel := strings.TrimPrefix(p, "/")
	if dir && rel != "" && !strings.HasSuffix(rel, "/") {
		rel += "/"
	}
	u.Path = e.base.Path + rel
	if e.base.RawPath != "" {
		u.RawPath = e.base.RawPath + escapePath(rel)
	} else {
		u.RawPath = ""
	}
	return &u
}

// escapePath percent-encodes each segment of a slash-separated path.
func escapePath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

// RedirectURL returns the full URL of path for a client to use directly
// (dav and davs mapped to http and https). It carries no credentials.
func (e *Endpoint) RedirectURL(_ context.Context, p string, _ endpoint.Op) (*url.URL, error) {
	return e.url(p, false), nil
}

// StatusError is an HTTP answer that is not a success. It wraps the class
// (ErrNotFound, ErrRefused, ErrExist or ErrUnavailable) the status maps to.
type StatusError struct {
	// Code is the status code, Status the status line ("404 Not Found").
	Code   int
	Status string
	// Msg is the first line of the response body, possibly empty.
	Msg string
	// RetryAfter is the server's Retry-After as a duration, or zero.
	RetryAfter time.Duration
	class      error
}

// Error gives the class, the server's status line and its reason, e.g.
// "not found: 404 Not Found: Unable to locate /x".
func (e *StatusError) Error() string {
	s := e.class.Error() + ": " + e.Status
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	return s
}

// Unwrap returns the class the status maps to.
func (e *StatusError) Unwrap() error { return e.class }

// statusError reads a little of resp's body into a StatusError and closes
// it. class nil means the status's own (endpoint.ClassOfStatus).
func statusError(resp *http.Response, class error) *StatusError {
	if class == nil {
		class = endpoint.ClassOfStatus(resp.StatusCode)
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrBody))
	resp.Body.Close()
	msg, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	if strings.HasPrefix(msg, "<") {
		msg = "" // an HTML or XML error page says nothing a log line can use
	}
	se := &StatusError{Code: resp.StatusCode, Status: resp.Status, Msg: strings.TrimSpace(msg), class: class}
	if resp.Status == "" {
		se.Status = strconv.Itoa(resp.StatusCode)
	}
	if ra := resp.Header.Get("Retry-After"); ra != "" {
		if s, err := strconv.Atoi(ra); err == nil && s >= 0 {
			se.RetryAfter = time.Duration(s) * time.Second
		} else if t, err := http.ParseTime(ra); err == nil {
			se.RetryAfter = max(time.Until(t), 0)
		}
	}
	return se
}

// netError wraps an error that is not an HTTP answer: the endpoint could
// not be asked (connection refused, reset, TLS failure, timeout).
func netError(err error) error {
	if errors.Is(err, endpoint.ErrNotFound) || errors.Is(err, endpoint.ErrRefused) || errors.Is(err, endpoint.ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%w: %w", endpoint.ErrUnavailable, err)
}

// drain reads what is left of a small body so the connection can be
// reused, and closes it.
func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
}

func isRedirect(code int) bool {
	switch code {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

// errNoRewind is why a redirect or retry could not be followed: the
// request body was already streamed and cannot be read again.
var errNoRewind = errors.New("request body already sent and cannot be re-read")

// do sends one request and follows redirects (up to MaxRedirects) with the
// same method, headers and (when it can be re-read) body. The bearer token
// goes only to the endpoint's own host, never to a host it redirects to.
// A network error comes back wrapped in ErrUnavailable.
func (e *Endpoint) do(ctx context.Context, method string, u *url.URL, hdr http.Header, body *reqBody) (*http.Response, error) {
	cur := u
	for i := 0; ; i++ {
		req, err := http.NewRequestWithContext(ctx, method, "/", nil)
		if err != nil {
			return nil, err
		}
		req.URL = cur
		req.Host = cur.Host
		for k, v := range hdr {
			req.Header[k] = v
		}
		httpx.ForwardRequestID(ctx, req.Header)
		if tok := e.tokenFor(ctx); tok != "" && strings.EqualFold(cur.Host, e.base.Host) && cur.Scheme == e.base.Scheme {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		if body != nil {
			rc, err := body.open(ctx)
			if err != nil {
				return nil, err
			}
			req.Body = rc
			req.ContentLength = body.size
			if body.size == 0 {
				req.Body = http.NoBody
			}
			if buf := body.buf; buf != nil {
				// Lets the transport resend on a keep-alive connection the
				// server had closed (XrdHttp does that without warning).
				req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf)), nil }
			}
			if body.size < 0 || body.size > smallBody {
				req.Header.Set("Expect", "100-continue")
			}
		}
		switch method {
		case http.MethodPut, "PROPFIND", "MKCOL":
			// Idempotent (RFC 9110 §9.2.2, RFC 4918): a nil Idempotency-Key
			// tells the transport it may retry on a dead idle connection,
			// without sending the header. DELETE is left out: a retried
			// DELETE would answer 404 for a file it did remove.
			req.Header["Idempotency-Key"] = nil
		}
		var resp *http.Response
		switch {
		case transport.Owns(e.tr, req):
			resp, err = transport.Own(e.tr, req)
		case e.ownHead(req):
			resp, err = e.headDo(req)
		default:
			resp, err = e.client.Do(req)
		}
		if err != nil {
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			return nil, netError(err)
		}
		if cur.Host == e.base.Host {
			kind := serverOther
			switch sv := resp.Header.Get("Server"); {
			case strings.HasPrefix(sv, "XrootD"):
				kind = serverXrootD
			case sv == httpx.StorageServer:
				kind = serverStorage
			}
			e.server.Store(kind)
		}
		if !isRedirect(resp.StatusCode) {
			return resp, nil
		}
		loc := resp.Header.Get("Location")
		drain(resp)
		if loc == "" {
			return nil, fmt.Errorf("%w: %s without Location", endpoint.ErrUnavailable, resp.Status)
		}
		if i >= MaxRedirects {
			return nil, fmt.Errorf("%w: more than %d redirects", endpoint.ErrUnavailable, MaxRedirects)
		}
		next, err := cur.Parse(loc)
		if err != nil || (next.Scheme != "http" && next.Scheme != "https") {
			return nil, fmt.Errorf("%w: bad redirect Location %q", endpoint.ErrUnavailable, loc)
		}
		if body != nil && !body.canReopen() {
			return nil, fmt.Errorf("%w: %s to %s: %w", endpoint.ErrRefused, resp.Status, next.Redacted(), errNoRewind)
		}
		e.log.DebugContext(ctx, "following redirect", "status", resp.StatusCode, "path", u.Path, "location", next.Redacted())
		cur = next
	}
}

// meta runs one metadata request bounded by the endpoint's Timeout. The
// response body must be read before cancel is called.
func (e *Endpoint) meta(ctx context.Context, method string, u *url.URL, hdr http.Header, body *reqBody) (*http.Response, context.CancelFunc, error) {
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	resp, err := e.do(ctx, method, u, hdr, body)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	return resp, cancel, nil
}

// Probe sends OPTIONS to the base URL: any answer below 500 means the
// server is up (a 401 or 403 still proves it answers).
func (e *Endpoint) Probe(ctx context.Context) error {
	resp, cancel, err := e.meta(ctx, http.MethodOptions, e.url("/", true), nil, nil)
	if err != nil {
		return fail("probe", "", netError(err))
	}
	defer cancel()
	if resp.StatusCode >= 500 {
		return fail("probe", "", statusError(resp, endpoint.ErrUnavailable))
	}
	if resp.Header.Get(httpx.ConditionalPutHeader) == "atomic" {
		e.condPut.Store(condYes)
	} else {
		e.condPut.Store(condNo)
	}
	drain(resp)
	return nil
}

// Delete removes the file or empty directory p. It asks first what p is:
// WebDAV's DELETE removes a whole tree (RFC 4918 §9.6), and the contract
// is that a non-empty directory is refused. A lakefed storage role checks
// the emptiness again with the removal (httpx.EmptyDeleteHeader); other
// servers do not, and remove a file made between the listing and the
// DELETE with the directory.
func (e *Endpoint) Delete(ctx context.Context, p string) error {
	if p == "/" {
		return fail("delete", p, fmt.Errorf("%w: is the root", endpoint.ErrRefused))
	}
	info, err := e.Stat(ctx, p)
	if err != nil {
		return fail("delete", p, err)
	}
	if info.IsDir {
		ents, err := e.List(ctx, p)
		if err != nil {
			return fail("delete", p, err)
		}
		if len(ents) > 0 {
			return fail("delete", p, endpoint.ErrNotEmpty)
		}
	}
	var hdr http.Header
	if info.IsDir {
		// A lakefed storage role removes it only if it is still empty;
		// others remove the tree, with any file made since the listing.
		hdr = http.Header{httpx.EmptyDeleteHeader: {"empty"}}
	}
	resp, cancel, err := e.meta(ctx, http.MethodDelete, e.url(p, info.IsDir), hdr, nil)
	if err != nil {
		return fail("delete", p, err)
	}
	defer cancel()
	if info.IsDir && resp.StatusCode == http.StatusConflict {
		drain(resp)
		return fail("delete", p, endpoint.ErrNotEmpty)
	}
	if resp.StatusCode/100 != 2 {
		return fail("delete", p, statusError(resp, nil))
	}
	drain(resp)
	return nil
}

// Mkdir creates p and its missing parents with MKCOL. It tries p first
// (XrdHttp creates all levels at once); on 409 (parent missing) it makes
// the parent, then p. 405 means something is there already: a directory
// is fine, a file wraps ErrExist.
func (e *Endpoint) Mkdir(ctx context.Context, p string) error {
	return e.mkdir(ctx, p, 0)
}

func (e *Endpoint) mkdir(ctx context.Context, p string, depth int) error {
	if p == "/" {
		return nil
	}
	if depth > 256 {
		return fail("mkdir", p, fmt.Errorf("%w: too deep", endpoint.ErrRefused))
	}
	resp, cancel, err := e.meta(ctx, "MKCOL", e.url(p, true), nil, nil)
	if err != nil {
		return fail("mkdir", p, err)
	}
	defer cancel()
	switch {
	case resp.StatusCode/100 == 2:
		drain(resp)
		return nil
	case resp.StatusCode == http.StatusConflict:
		drain(resp)
		if err := e.mkdir(ctx, path.Dir(p), depth+1); err != nil {
			return err
		}
		resp2, cancel2, err := e.meta(ctx, "MKCOL", e.url(p, true), nil, nil)
		if err != nil {
			return fail("mkdir", p, err)
		}
		defer cancel2()
		if resp2.StatusCode/100 == 2 {
			drain(resp2)
			return nil
		}
		if resp2.StatusCode != http.StatusMethodNotAllowed {
			return fail("mkdir", p, statusError(resp2, nil))
		}
		drain(resp2)
	case resp.StatusCode == http.StatusMethodNotAllowed:
		drain(resp)
	default:
		return fail("mkdir", p, statusError(resp, nil))
	}
	// 405: something is there, or MKCOL is not allowed at all.
	info, err := e.Stat(ctx, p)
	switch {
	case err != nil && errors.Is(err, endpoint.ErrNotFound):
		return fail("mkdir", p, fmt.Errorf("%w: MKCOL not allowed", endpoint.ErrUnsupported))
	case err != nil:
		return fail("mkdir", p, err)
	case !info.IsDir:
		return fail("mkdir", p, fmt.Errorf("%w: a file is in the way", endpoint.ErrExist))
	}
	return nil
}

// fail wraps err as the error of op on path p. An OpError err already
// carries (another method's, wrapped again) is peeled, so that messages do
// not repeat it.
func fail(op, p string, err error) error {
	return &endpoint.OpError{Kind: endpoint.KindHTTP, Op: op, Path: p, Err: unwrapOp(err)}
}

// unwrapOp returns the cause inside err's OpError, or err.
func unwrapOp(err error) error {
	var oe *endpoint.OpError
	if errors.As(err, &oe) {
		return oe.Err
	}
	return err
}

// Checksum asks the server for path's checksum with HEAD and
// "Want-Digest: algo" (RFC 3230) and parses the Digest header. A server
// that does not answer with that algorithm (or refuses Want-Digest with 405
// or 501, as XrdHttp without a checksum plugin does) wraps ErrUnsupported.
func (e *Endpoint) Checksum(ctx context.Context, p, algo string) (string, error) {
	algo = strings.ToLower(algo)
	hdr := http.Header{"Want-Digest": {algo}}
	resp, cancel, err := e.meta(ctx, http.MethodHead, e.url(p, false), hdr, nil)
	if err != nil {
		return "", fail("checksum", p, err)
	}
	defer cancel()
	switch {
	case resp.StatusCode == http.StatusMethodNotAllowed || resp.StatusCode == http.StatusNotImplemented:
		return "", fail("checksum", p, fmt.Errorf("%s: %w", algo, statusError(resp, endpoint.ErrUnsupported)))
	case resp.StatusCode/100 != 2:
		return "", fail("checksum", p, statusError(resp, nil))
	}
	drain(resp)
	sums := parseDigests(resp.Header)
	if v, ok := sums[algo]; ok {
		return v, nil
	}
	return "", fail("checksum", p, fmt.Errorf("%s: %w: no Digest in the answer", algo, endpoint.ErrUnsupported))
}

// tokenFor is the bearer token a request made for ctx carries: the
// caller's when the endpoint passes tokens on and there is one, else the
// endpoint's own.
func (e *Endpoint) tokenFor(ctx context.Context) string {
	if e.pass {
		if t := httpx.Bearer(ctx); t != "" {
			return t
		}
	}
	return e.token
}
