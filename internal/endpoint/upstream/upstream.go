// Package upstream is the endpoint kind for another lakefed federator:
// the regional or global level of a hierarchy (CMS AAA's local → regional
// → global fallback). The federator asks an upstream only when no local
// endpoint has a file, and every request it sends carries a hop count
// (X-Lakefed-Hops) so that federators that name each other as upstreams
// cannot loop.
//
//	ep, err := upstream.New(ctx, endpoint.Config{Name: "global", URL: "lakefed://fed.example:8080/"}, log)
//	ctx = httpx.WithHops(ctx, hopsOfTheIncomingRequest)
//	info, err := ep.Stat(ctx, "/atlas/f.root") // HEAD, answered from the upstream's metadata
//
// URLs: lakefed://host:port/ is http, lakefeds://host:port/ is https;
// http(s) URLs work too (the config says kind: upstream).
package upstream

import (
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
	"time"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/httpx"
	"github.com/lakefed/lakefed/internal/httpx/davxml"
	"github.com/lakefed/lakefed/internal/httpx/transport"
)

// Endpoint is another lakefed federator seen as an endpoint.
type Endpoint struct {
	name    string
	base    *url.URL // http(s)://host:port/path, no trailing slash in Path
	timeout time.Duration
	token   string
	pass    bool         // send the caller's token (httpx.Bearer) in place of token
	client  *http.Client // does not follow redirects: we do, to keep PUT bodies
	get     *http.Client // follows redirects (GET is safe to repeat)
	log     *slog.Logger
}

var (
	_ endpoint.Endpoint    = (*Endpoint)(nil)
	_ endpoint.Redirecter  = (*Endpoint)(nil)
	_ endpoint.Checksummer = (*Endpoint)(nil)

	_ endpoint.ValidatorReporter = (*Endpoint)(nil)
)

// New returns an upstream endpoint for cfg.URL (lakefed://, lakefeds://,
// http:// or https://).
func New(ctx context.Context, cfg endpoint.Config, log *slog.Logger) (*Endpoint, error) {
	if log == nil {
		log = slog.Default()
	}
	if cfg.Name == "" {
		return nil, errors.New("upstream: endpoint has no name")
	}
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("upstream: %s: %w", cfg.Name, err)
	}
	sc, _ := endpoint.LookupScheme(u.Scheme)
	if !sc.Serves(endpoint.KindUpstream) {
		return nil, fmt.Errorf("upstream: %s: scheme %q is not lakefed, lakefeds, http or https", cfg.Name, u.Scheme)
	}
	u.Scheme = sc.WireScheme()
	if u.Host == "" {
		return nil, fmt.Errorf("upstream: %s: url %q has no host", cfg.Name, cfg.URL)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath, u.RawQuery, u.Fragment = "", "", ""
	tr, err := transport.New(cfg, transport.Options{})
	if err != nil {
		return nil, fmt.Errorf("upstream: %s: %w", cfg.Name, err)
	}
	return &Endpoint{
		name:    cfg.Name,
		base:    u,
		timeout: cfg.TimeoutOrDefault(),
		token:   cfg.BearerToken,
		pass:    cfg.PassToken,
		client: &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}},
		get: &http.Client{Transport: tr},
		log: log.With("component", "upstream", "endpoint", cfg.Name),
	}, nil
}

// Name returns the endpoint's configured name.
func (e *Endpoint) Name() string { return e.name }

// URL returns the federator's base URL (http or https).
func (e *Endpoint) URL() *url.URL { u := *e.base; return &u }

func (e *Endpoint) urlFor(p string) *url.URL {
	u := *e.base
	u.Path = httpx.Join(u.Path, p)
	if u.Path == "" {
		u.Path = "/"
	}
	return &u
}

func (e *Endpoint) newRequest(ctx context.Context, method, p string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, e.urlFor(p).String(), body)
	if err != nil {
		return nil, opErr(strings.ToLower(method), p, endpoint.ErrRefused)
	}
	req.Header.Set(httpx.HopsHeader, strconv.Itoa(httpx.Hops(ctx)+1))
	httpx.ForwardRequestID(ctx, req.Header)
	if tok := e.tokenFor(ctx); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	return req, nil
}

// statusErr maps an HTTP answer to the endpoint error classes: the
// shared map, but for the federator's per-path 503 (httpx.PathUnavailableHeader),
// which is about the path and not about the upstream.
func statusErr(op, p string, resp *http.Response) error {
	if resp.StatusCode == http.StatusMethodNotAllowed && op == "mkdir" {
		return nil
	}
	class := endpoint.ClassOfStatus(resp.StatusCode)
	if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get(httpx.PathUnavailableHeader) != "" {
		class = endpoint.ErrPathUnavailable
	}
	return opErr(op, p, fmt.Errorf("%s: %w", resp.Status, class))
}

func netErr(op, p string, err error) error {
	return opErr(op, p, fmt.Errorf("%w: %w", err, endpoint.ErrUnavailable))
}

// opErr is the error of op on path p: "upstream: op "p": err".
func opErr(op, p string, err error) error {
	return &endpoint.OpError{Kind: endpoint.KindUpstream, Op: op, Path: p, Err: err}
}

func (e *Endpoint) do(ctx context.Context, op, method, p string, hdr http.Header) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	req, err := e.newRequest(ctx, method, p, nil)
	if err != nil {
		return nil, err
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return nil, netErr(op, p, err)
	}
	return resp, nil
}

// Stat asks the upstream with HEAD, which a lakefed federator answers from
// its metadata (size, Last-Modified, Digest) without touching a replica.
func (e *Endpoint) Stat(ctx context.Context, p string) (endpoint.Info, error) {
	resp, err := e.do(ctx, "stat", http.MethodHead, p, http.Header{"Want-Digest": {"adler32"}})
	if err != nil {
		return endpoint.Info{}, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return endpoint.Info{}, statusErr("stat", p, resp)
	}
	info := endpoint.Info{Name: path.Base(p), Size: resp.ContentLength, ETag: httpx.TrimETag(resp.Header.Get("ETag"))}
	if info.Size < 0 {
		info.Size = 0
	}
	if t, err := http.ParseTime(resp.Header.Get("Last-Modified")); err == nil {
		info.ModTime = t
	}
	info.IsDir = strings.HasPrefix(resp.Header.Get("Content-Type"), httpx.DirType)
	if d := httpx.ParseDigest(resp.Header.Get("Digest")); len(d) > 0 {
		info.Checksums = d
	}
	return info, nil
}

// Checksum asks for algo with HEAD and Want-Digest.
func (e *Endpoint) Checksum(ctx context.Context, p, algo string) (string, error) {
	resp, err := e.do(ctx, "checksum", http.MethodHead, p, http.Header{"Want-Digest": {algo}})
	if err != nil {
		return "", err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", statusErr("checksum", p, resp)
	}
	if v, ok := httpx.ParseDigest(resp.Header.Get("Digest"))[algo]; ok {
		return v, nil
	}
	return "", opErr("checksum", p, fmt.Errorf("%s: %w", algo, endpoint.ErrUnsupported))
}

// RedirectURL is the upstream federator's URL for p: the client asks it
// and is redirected on to a replica.
func (e *Endpoint) RedirectURL(ctx context.Context, p string, op endpoint.Op) (*url.URL, error) {
	return e.urlFor(p), nil
}

// List asks the upstream with PROPFIND Depth 1.
func (e *Endpoint) List(ctx context.Context, dir string) ([]endpoint.Info, error) {
	resp, err := e.do(ctx, "list", "PROPFIND", dir, http.Header{"Depth": {"1"}})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusMultiStatus {
		return nil, statusErr("list", dir, resp)
	}
	ms, err := davxml.Decode(resp.Body, davxml.MaxBody)
	if err != nil {
		return nil, netErr("list", dir, err)
	}
	self := strings.TrimSuffix(e.urlFor(dir).Path, "/")
	out := make([]endpoint.Info, 0, len(ms.Responses))
	for i := range ms.Responses {
		r := &ms.Responses[i]
		p := strings.TrimSuffix(davxml.HrefPath(r.Href, false), "/")
		if p == self || p == "" || !davxml.StatusOK(r.Status) {
			continue
		}
		info := r.Info()
		info.Name = path.Base(p)
		out = append(out, info)
	}
	return out, nil
}

// Open reads through the upstream with a ranged GET, following its
// redirect to a replica. The first byte must come within the timeout; the
// body itself is not bounded.
func (e *Endpoint) Open(ctx context.Context, p string, off, n int64) (io.ReadCloser, error) {
	if n == 0 {
		return io.NopCloser(strings.NewReader("")), nil
	}
	ctx, cancel := context.WithCancel(ctx)
	req, err := e.newRequest(ctx, http.MethodGet, p, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	if n > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", off, off+n-1))
	} else if off > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", off))
	}
	timer := time.AfterFunc(e.timeout, cancel)
	resp, err := e.get.Do(req)
	timer.Stop()
	if err != nil {
		cancel()
		return nil, netErr("open", p, err)
	}
	full := resp.ContentLength // of a 200: the whole file
	switch {
	case resp.StatusCode == http.StatusPartialContent:
	case resp.StatusCode == http.StatusOK && off == 0:
		if n > 0 && resp.ContentLength > n {
			resp.ContentLength = n
		}
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable:
		resp.Body.Close()
		cancel()
		return nil, opErr("open", p, fmt.Errorf("%s: %w", resp.Status, endpoint.BeyondEnd(off, -1)))
	default:
		resp.Body.Close()
		cancel()
		return nil, statusErr("open", p, resp)
	}
	want := n
	if want < 0 {
		want = resp.ContentLength
	}
	// The size of the whole file, for endpoint.Versioned. The ETag is
	// not reported: an upstream federator may serve one path from
	// replicas whose ETags differ (it never mixes them within one
	// answer), so only the size can be held against its metadata.
	total := int64(-1)
	if resp.StatusCode == http.StatusOK {
		total = full
	} else if _, _, t, ok := httpx.ParseContentRange(resp.Header.Get("Content-Range")); ok {
		total = t
	}
	return &body{rc: resp.Body, cancel: cancel, want: want, p: p, total: total}, nil
}

// body reads a response body and turns a short body into an error.
type body struct {
	rc     io.ReadCloser
	cancel context.CancelFunc
	want   int64 // bytes expected, -1 unknown
	got    int64
	p      string
	total  int64 // the whole file's size, -1 unknown
}

func (b *body) Version() endpoint.Info { return endpoint.Info{Size: b.total} }

func (b *body) Read(buf []byte) (int, error) {
	if b.want >= 0 {
		if b.got >= b.want {
			return 0, io.EOF
		}
		if rest := b.want - b.got; int64(len(buf)) > rest {
			buf = buf[:rest]
		}
	}
	n, err := b.rc.Read(buf)
	b.got += int64(n)
	if err == io.EOF && b.want >= 0 && b.got < b.want {
		err = io.ErrUnexpectedEOF
	}
	if err != nil && err != io.EOF {
		err = opErr("read", b.p, fmt.Errorf("%w: %w", err, endpoint.ErrUnavailable))
	}
	return n, err
}

func (b *body) Close() error {
	err := b.rc.Close()
	b.cancel()
	return err
}

// Put sends the file to the upstream, which redirects (307) to the
// endpoint it places the file on. Expect: 100-continue keeps the body
// unsent until the final target says go ahead, so no buffering is needed.
func (e *Endpoint) Put(ctx context.Context, p string, r io.Reader, size int64) error {
	target := e.urlFor(p).String()
	for range 5 {
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, target, io.NopCloser(r))
		if err != nil {
			return opErr("put", p, fmt.Errorf("%v: %w", err, endpoint.ErrRefused))
		}
		req.ContentLength = size
		if size == 0 {
			req.Body = http.NoBody
		}
		req.Header.Set("Expect", "100-continue")
		req.Header.Set(httpx.HopsHeader, strconv.Itoa(httpx.Hops(ctx)+1))
		httpx.ForwardRequestID(ctx, req.Header)
		if tok := e.tokenFor(ctx); tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := e.client.Do(req)
		if err != nil {
			return netErr("put", p, err)
		}
		resp.Body.Close()
		switch {
		case resp.StatusCode >= 200 && resp.StatusCode < 300:
			return nil
		case resp.StatusCode == http.StatusTemporaryRedirect || resp.StatusCode == http.StatusPermanentRedirect:
			loc, err := resp.Location()
			if err != nil {
				return opErr("put", p, fmt.Errorf("redirect without location: %w", endpoint.ErrUnavailable))
			}
			target = loc.String()
			continue
		default:
			return statusErr("put", p, resp)
		}
	}
	return opErr("put", p, fmt.Errorf("too many redirects: %w", endpoint.ErrUnavailable))
}

// Delete asks the upstream to delete every replica it knows.
func (e *Endpoint) Delete(ctx context.Context, p string) error {
	resp, err := e.do(ctx, "delete", http.MethodDelete, p, nil)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	return statusErr("delete", p, resp)
}

// Mkdir asks the upstream for MKCOL; an existing directory (405) is fine.
func (e *Endpoint) Mkdir(ctx context.Context, p string) error {
	resp, err := e.do(ctx, "mkdir", "MKCOL", p, nil)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	return statusErr("mkdir", p, resp)
}

// Probe asks the upstream's /api/health; any answer below 500 means it
// is up.
func (e *Endpoint) Probe(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	u := *e.base
	u.Path = strings.TrimSuffix(u.Path, "/") + "/api/health"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return opErr("probe", "", fmt.Errorf("%v: %w", err, endpoint.ErrUnavailable))
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return netErr("probe", "/", err)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode >= 500 {
		return opErr("probe", "", fmt.Errorf("%s: %w", resp.Status, endpoint.ErrUnavailable))
	}
	return nil
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

// Validators are weak: an upstream federator serves a path from any of
// its replicas, whose tags it passes on and cannot vouch for.
func (e *Endpoint) Validators() endpoint.Validators { return endpoint.ValidatorsWeak }
