package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/httpx"
	"github.com/lakefed/lakefed/internal/httpx/transport"
)

// SiteParam is the query parameter every request of a run pinned to one
// site (--site NAME) carries: "?lakefed.site=NAME". The federator honours
// it by answering only from that endpoint, as the AAA tests pinned one
// site through the redirectors.
const SiteParam = "lakefed.site"

// NewEndpointFunc builds an endpoint from a config: kinds.New in the
// command, a fake in tests. It lets this package use the endpoint layer
// without depending on every kind.
type NewEndpointFunc func(ctx context.Context, cfg endpoint.Config) (endpoint.Endpoint, error)

// TargetConfig says how to reach a target.
type TargetConfig struct {
	// URL is the base directory every test file lives under:
	// http(s)://host:port/dir/, dav(s)://..., file:///dir, root://..., ...
	URL string
	// Site, when set, pins every request to one site of a federator (see
	// SiteParam). Only http(s) targets can carry it.
	Site string
	// Timeout bounds each metadata operation and the wait for a first
	// byte. Zero means endpoint.DefaultTimeout (10s).
	Timeout time.Duration
	// CAFile, InsecureSkipVerify and BearerToken are as in endpoint.Config.
	CAFile             string
	InsecureSkipVerify bool
	BearerToken        string
	// MaxConns bounds the connections to one host (0: 1024). The load
	// generator keeps that many idle, so a ramp never pays for handshakes.
	MaxConns int
	// NewEndpoint builds endpoints for non-HTTP schemes and for writes
	// (prepare, io). Nil: HTTP targets write with plain PUT/DELETE and
	// other schemes are refused.
	NewEndpoint NewEndpointFunc
}

// Target is where a benchmark sends its load. HTTP targets use a lean
// client of this package on the hot paths (open = ranged GET of the first
// byte, read = ranged or multi-range GET), so that the generator, not the
// client library, sets the pace; other schemes go through the endpoint
// layer. Safe for concurrent use.
type Target struct {
	base    *url.URL // http(s) base ending in "/", nil for endpoint-only targets
	raw     string
	site    string
	token   string
	timeout time.Duration
	hc      *http.Client
	ep      endpoint.Endpoint // writes and non-HTTP reads; may be nil for HTTP
	// served is the hosts that answered the current run's reads (one run
	// at a time per target names its site).
	served servedSet
}

// NewTarget returns the target cfg describes.
func NewTarget(ctx context.Context, cfg TargetConfig) (*Target, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("bench: bad target URL %q: %w", cfg.URL, err)
	}
	t := &Target{raw: cfg.URL, site: cfg.Site, token: cfg.BearerToken, timeout: cfg.Timeout}
	if t.timeout <= 0 {
		t.timeout = endpoint.DefaultTimeout
	}
	// HTTP/WebDAV targets are read here; the table says which they are
	// and what they speak on the wire (dav → http).
	sc, _ := endpoint.LookupScheme(u.Scheme)
	scheme, isHTTP := sc.WireScheme(), sc.Kind == endpoint.KindHTTP
	if cfg.Site != "" && !isHTTP {
		return nil, fmt.Errorf("bench: --site needs an http(s) target (a federator), not %q", cfg.URL)
	}
	if isHTTP {
		if u.Host == "" {
			return nil, fmt.Errorf("bench: bad target URL %q: no host", cfg.URL)
		}
		b := *u
		b.Scheme = scheme
		b.RawQuery, b.Fragment = "", ""
		if !strings.HasSuffix(b.Path, "/") {
			b.Path += "/"
			b.RawPath = ""
		}
		t.base = &b
		tr, err := newTransport(cfg)
		if err != nil {
			return nil, err
		}
		t.hc = &http.Client{Transport: tr}
	}
	switch {
	case cfg.NewEndpoint != nil && (!isHTTP || cfg.Site == ""):
		ecfg := endpoint.Config{Name: "bench", URL: cfg.URL, Timeout: cfg.Timeout, CAFile: cfg.CAFile,
			InsecureSkipVerify: cfg.InsecureSkipVerify, BearerToken: cfg.BearerToken}
		if !strings.HasSuffix(ecfg.URL, "/") && isHTTP {
			ecfg.URL += "/"
		}
		ep, err := cfg.NewEndpoint(ctx, ecfg)
		if err != nil {
			return nil, fmt.Errorf("bench: target %s: %w", cfg.URL, err)
		}
		t.ep = ep
	case !isHTTP:
		return nil, fmt.Errorf("bench: unsupported target scheme %q", u.Scheme)
	}
	return t, nil
}

// newTransport is the load generator's transport: conns connections to a
// host at most, all of them kept idle so a ramp never pays for
// handshakes, a bound on the wait for each answer's header, and no proxy
// (load must go where it is told).
func newTransport(cfg TargetConfig) (*http.Transport, error) {
	conns := cfg.MaxConns
	if conns <= 0 {
		conns = 1024
	}
	ecfg := endpoint.Config{Timeout: cfg.Timeout, CAFile: cfg.CAFile, InsecureSkipVerify: cfg.InsecureSkipVerify}
	tr, err := transport.New(ecfg, transport.Options{
		MaxIdleConns: conns, MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns,
		ResponseHeaderTimeout: ecfg.TimeoutOrDefault(), NoProxy: true,
	})
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	return tr, nil
}

// String is the target's URL.
func (t *Target) String() string { return t.raw }

// Host is the target's host (for the per-site history when no site is
// pinned).
func (t *Target) Host() string {
	if t.base != nil {
		return t.base.Host
	}
	if u, err := url.Parse(t.raw); err == nil && u.Host != "" {
		return u.Host
	}
	return t.raw
}

// Close releases idle connections.
func (t *Target) Close() {
	if t.hc != nil {
		t.hc.CloseIdleConnections()
	}
}

// fileURL returns the URL of the clean path p under the base.
func (t *Target) fileURL(p string) *url.URL {
	u := *t.base
	u.Path = strings.TrimSuffix(t.base.Path, "/") + p
	u.RawPath = ""
	if t.site != "" {
		u.RawQuery = url.Values{SiteParam: {t.site}}.Encode()
	}
	return &u
}

// statusError is a non-success HTTP answer, classed like the endpoint
// errors so reports tell "not found" from "unavailable".
func statusError(op, p string, resp *http.Response) error {
	return fmt.Errorf("bench: %s %s: %s: %w", op, p, resp.Status, endpoint.ClassOfStatus(resp.StatusCode))
}

func netError(op, p string, err error) error {
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("bench: %s %s: %w", op, p, err)
	}
	return fmt.Errorf("bench: %s %s: %v: %w", op, p, err, endpoint.ErrUnavailable)
}

// bufPool holds the buffers bodies are drained through.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

func drain(r io.Reader) (int64, error) {
	bp := bufPool.Get().(*[]byte)
	n, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{r}, *bp)
	bufPool.Put(bp)
	return n, err
}

// opener is one job's reusable open request: a job opens one file after
// another, so the request and its header are built once.
type opener struct {
	t   *Target
	req *http.Request
	// host is the last host noted as serving this job, so that a job
	// takes the target's lock only when the serving host changes.
	host string
}

func (t *Target) newOpener() *opener {
	if t.base == nil {
		return &opener{t: t}
	}
	h := http.Header{"Range": {"bytes=0-0"}}
	if t.token != "" {
		h.Set("Authorization", "Bearer "+t.token)
	}
	return &opener{t: t, req: &http.Request{Method: http.MethodGet, Header: h, Proto: "HTTP/1.1",
		ProtoMajor: 1, ProtoMinor: 1}}
}

// open opens p the way a job opens a file: learns its size (the stat)
// and reads its first byte, in one ranged GET ("Range: bytes=0-0"; the
// size comes from Content-Range). u is p's URL, built once per file list.
func (o *opener) open(ctx context.Context, p string, u *url.URL) (int64, error) {
	t := o.t
	if o.req == nil {
		info, err := t.ep.Stat(ctx, p)
		if err != nil {
			return 0, err
		}
		if info.Size == 0 {
			return 0, nil
		}
		rc, err := t.ep.Open(ctx, p, 0, 1)
		if err != nil {
			return 0, err
		}
		n, err := drain(rc)
		rc.Close()
		if err == nil && n != 1 {
			err = fmt.Errorf("bench: open %s: read %d bytes, want 1: %w", p, n, endpoint.ErrUnavailable)
		}
		return info.Size, err
	}
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	req := o.req.WithContext(ctx)
	req.URL, req.Host = u, u.Host
	resp, err := t.hc.Do(req)
	if err != nil {
		return 0, netError("open", p, err)
	}
	defer resp.Body.Close()
	if h := resp.Request.URL.Host; h != o.host {
		o.host = h
		t.noteServed(resp)
	}
	n, err := drain(resp.Body)
	switch {
	case resp.StatusCode == http.StatusPartialContent:
		_, _, size, _ := httpx.ParseContentRange(resp.Header.Get("Content-Range"))
		return size, err
	case resp.StatusCode == http.StatusOK: // no Range support: the whole file came
		return n, err
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable: // an empty file
		return 0, nil
	}
	return 0, statusError("open", p, resp)
}

// readRange reads n bytes of p from off and discards them; it returns
// how many arrived.
func (t *Target) readRange(ctx context.Context, p string, u *url.URL, off, n int64) (int64, error) {
	if t.base == nil {
		rc, err := t.ep.Open(ctx, p, off, n)
		if err != nil {
			return 0, err
		}
		defer rc.Close()
		got, err := drain(rc)
		if err == nil && got != n {
			err = fmt.Errorf("bench: read %s: %d bytes, want %d: %w", p, got, n, endpoint.ErrUnavailable)
		}
		return got, err
	}
	rc, err := t.getRange(ctx, p, u, off, n)
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	got, err := drain(rc)
	if err != nil {
		return got, netError("read", p, err)
	}
	if got != n {
		return got, fmt.Errorf("bench: read %s: %d bytes, want %d: %w", p, got, n, endpoint.ErrUnavailable)
	}
	return got, nil
}

// getRange GETs n bytes of p from off. A 200 answer (a server without
// ranges) is cut to the range.
func (t *Target) getRange(ctx context.Context, p string, u *url.URL, off, n int64) (io.ReadCloser, error) {
	if u == nil {
		u = t.fileURL(p)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("bench: read %s: %w", p, err)
	}
	req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", off, off+n-1))
	t.auth(req)
	resp, err := t.hc.Do(req)
	if err != nil {
		return nil, netError("read", p, err)
	}
	t.noteServed(resp)
	switch resp.StatusCode {
	case http.StatusPartialContent:
		return resp.Body, nil
	case http.StatusOK:
		if _, err := io.CopyN(io.Discard, resp.Body, off); err != nil {
			resp.Body.Close()
			return nil, netError("read", p, err)
		}
		return readCloser{io.LimitReader(resp.Body, n), resp.Body}, nil
	}
	resp.Body.Close()
	return nil, statusError("read", p, resp)
}

type readCloser struct {
	io.Reader
	io.Closer
}

func (t *Target) auth(req *http.Request) {
	if t.token != "" {
		req.Header.Set("Authorization", "Bearer "+t.token)
	}
}

// readRanges fetches the ranges of p in one multi-range GET (RFC 9110
// section 14.2; the answer is multipart/byteranges) and calls fn with
// each part's offset and body, in the order the server sends them. A
// server that answers with one range or the whole file is handled too.
// Targets without HTTP read the ranges one by one.
func (t *Target) readRanges(ctx context.Context, p string, u *url.URL, rs []httpx.Range,
	fn func(off int64, r io.Reader) error) error {
	if len(rs) == 0 {
		return nil
	}
	if t.base == nil || len(rs) == 1 {
		for _, r := range rs {
			var rc io.ReadCloser
			var err error
			if t.base == nil {
				rc, err = t.ep.Open(ctx, p, r.Start, r.Length)
			} else {
				rc, err = t.getRange(ctx, p, u, r.Start, r.Length)
			}
			if err != nil {
				return err
			}
			err = fn(r.Start, rc)
			rc.Close()
			if err != nil {
				return err
			}
		}
		return nil
	}
	if u == nil {
		u = t.fileURL(p)
	}
	var spec strings.Builder
	spec.WriteString("bytes=")
	for i, r := range rs {
		if i > 0 {
			spec.WriteByte(',')
		}
		spec.WriteString(strconv.FormatInt(r.Start, 10))
		spec.WriteByte('-')
		spec.WriteString(strconv.FormatInt(r.Start+r.Length-1, 10))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("bench: read %s: %w", p, err)
	}
	req.Header.Set("Range", spec.String())
	t.auth(req)
	resp, err := t.hc.Do(req)
	if err != nil {
		return netError("vector read", p, err)
	}
	defer resp.Body.Close()
	t.noteServed(resp)
	switch resp.StatusCode {
	case http.StatusOK:
		// The whole file: hand out the ranges from it in file order.
		return fromWhole(resp.Body, rs, fn)
	case http.StatusPartialContent:
	default:
		return statusError("vector read", p, resp)
	}
	mt, params, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/byteranges" {
		// One range covering what was asked (servers may coalesce).
		start, _, _, ok := httpx.ParseContentRange(resp.Header.Get("Content-Range"))
		if !ok || start < 0 {
			return fmt.Errorf("bench: vector read %s: bad Content-Range %q: %w",
				p, resp.Header.Get("Content-Range"), endpoint.ErrUnavailable)
		}
		return fromSpan(resp.Body, start, rs, fn)
	}
	mr := multipart.NewReader(resp.Body, params["boundary"])
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return netError("vector read", p, err)
		}
		start, _, _, ok := httpx.ParseContentRange(part.Header.Get("Content-Range"))
		if !ok || start < 0 {
			return fmt.Errorf("bench: vector read %s: part without Content-Range: %w", p, endpoint.ErrUnavailable)
		}
		if err := fn(start, part); err != nil {
			return err
		}
	}
}

// fromWhole hands out the ranges rs from a body holding a whole file.
func fromWhole(body io.Reader, rs []httpx.Range, fn func(int64, io.Reader) error) error {
	return fromSpan(body, 0, rs, fn)
}

// fromSpan hands out the ranges rs from a body that holds the file from
// offset start on. Ranges are served in offset order; overlapping ranges
// are not supported (the benchmarks never ask for them).
func fromSpan(body io.Reader, start int64, rs []httpx.Range, fn func(int64, io.Reader) error) error {
	sorted := append([]httpx.Range(nil), rs...)
	sortRanges(sorted)
	pos := start
	for _, r := range sorted {
		if r.Start < pos {
			return fmt.Errorf("bench: overlapping ranges at %d: %w", r.Start, endpoint.ErrRefused)
		}
		if _, err := io.CopyN(io.Discard, body, r.Start-pos); err != nil {
			return fmt.Errorf("bench: short body: %v: %w", err, endpoint.ErrUnavailable)
		}
		lr := &io.LimitedReader{R: body, N: r.Length}
		if err := fn(r.Start, lr); err != nil {
			return err
		}
		if _, err := io.Copy(io.Discard, lr); err != nil {
			return fmt.Errorf("bench: short body: %v: %w", err, endpoint.ErrUnavailable)
		}
		pos = r.Start + r.Length
	}
	return nil
}

func sortRanges(rs []httpx.Range) {
	for i := 1; i < len(rs); i++ {
		for j := i; j > 0 && rs[j].Start < rs[j-1].Start; j-- {
			rs[j], rs[j-1] = rs[j-1], rs[j]
		}
	}
}

// put stores r (size bytes, -1 unknown) as p. getBody, when not nil,
// makes a fresh copy of the body, so a PUT redirected by a federator
// (307) can be sent again.
func (t *Target) put(ctx context.Context, p string, r io.Reader, size int64, getBody func() io.Reader) error {
	if t.ep != nil {
		return t.ep.Put(ctx, p, r, size)
	}
	u := t.fileURL(p)
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, u.String(), io.NopCloser(r))
	if err != nil {
		return fmt.Errorf("bench: put %s: %w", p, err)
	}
	req.ContentLength = size
	if size == 0 {
		req.Body = http.NoBody
	}
	if getBody != nil {
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(getBody()), nil }
	}
	t.auth(req)
	resp, err := t.hc.Do(req)
	if err != nil {
		return netError("put", p, err)
	}
	defer resp.Body.Close()
	drain(resp.Body)
	if resp.StatusCode/100 != 2 {
		return statusError("put", p, resp)
	}
	return nil
}

// putBytes stores b as p.
func (t *Target) putBytes(ctx context.Context, p string, b []byte) error {
	return t.put(ctx, p, bytes.NewReader(b), int64(len(b)), func() io.Reader { return bytes.NewReader(b) })
}

// remove deletes p; a missing p is not an error.
func (t *Target) remove(ctx context.Context, p string) error {
	if t.ep != nil {
		err := t.ep.Delete(ctx, p)
		if errors.Is(err, endpoint.ErrNotFound) {
			return nil
		}
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, t.fileURL(p).String(), nil)
	if err != nil {
		return fmt.Errorf("bench: delete %s: %w", p, err)
	}
	t.auth(req)
	resp, err := t.hc.Do(req)
	if err != nil {
		return netError("delete", p, err)
	}
	defer resp.Body.Close()
	drain(resp.Body)
	if resp.StatusCode/100 != 2 && resp.StatusCode != http.StatusNotFound {
		return statusError("delete", p, resp)
	}
	return nil
}

// get opens all of p for reading and returns its size (-1 unknown) and
// the server's adler32 if it sent one (RFC 3230 Digest).
func (t *Target) get(ctx context.Context, p string) (io.ReadCloser, int64, string, error) {
	if t.base == nil {
		info, err := t.ep.Stat(ctx, p)
		if err != nil {
			return nil, 0, "", err
		}
		rc, err := t.ep.Open(ctx, p, 0, -1)
		return rc, info.Size, info.Checksums[httpx.Adler32], err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.fileURL(p).String(), nil)
	if err != nil {
		return nil, 0, "", fmt.Errorf("bench: get %s: %w", p, err)
	}
	req.Header.Set("Want-Digest", "adler32")
	t.auth(req)
	resp, err := t.hc.Do(req)
	if err != nil {
		return nil, 0, "", netError("get", p, err)
	}
	t.noteServed(resp)
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, 0, "", statusError("get", p, resp)
	}
	return resp.Body, resp.ContentLength, httpx.ParseDigest(strings.Join(resp.Header.Values("Digest"), ","))[httpx.Adler32], nil
}

// stat returns p's size.
func (t *Target) stat(ctx context.Context, p string) (int64, error) {
	if t.base == nil {
		info, err := t.ep.Stat(ctx, p)
		return info.Size, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, t.fileURL(p).String(), nil)
	if err != nil {
		return 0, fmt.Errorf("bench: stat %s: %w", p, err)
	}
	t.auth(req)
	resp, err := t.hc.Do(req)
	if err != nil {
		return 0, netError("stat", p, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, statusError("stat", p, resp)
	}
	return resp.ContentLength, nil
}
