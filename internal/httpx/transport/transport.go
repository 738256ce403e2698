// Package transport builds the one kind of *http.Transport every lakefed
// HTTP client uses: the http, upstream and s3 endpoint kinds and the
// benchmark's load generator. They differ only in the Options below, each
// for a reason given at its field; everything else is decided here once.
//
//	tr, err := transport.New(cfg, transport.Options{})  // an endpoint kind
//	tr, err := transport.New(cfg, transport.Options{MaxConnsPerHost: 1024, MaxIdleConns: 1024,
//		MaxIdleConnsPerHost: 1024, ResponseHeaderTimeout: cfg.Timeout, NoProxy: true}) // bench
package transport

import (
	"net"
	"net/http"
	"time"

	"github.com/lakefed/lakefed/internal/endpoint"
)

// Defaults of the pool sizes: the federator reads from one endpoint in
// parallel (many clients, vector reads), so it keeps many connections
// idle rather than pay a handshake per request.
const (
	DefaultMaxIdleConns        = 256
	DefaultMaxIdleConnsPerHost = 64
)

// Options are what differs between the clients. The zero value is what
// the endpoint kinds use.
type Options struct {
	// MaxIdleConns bounds the idle connections to all hosts; 0 means
	// DefaultMaxIdleConns.
	MaxIdleConns int
	// MaxIdleConnsPerHost bounds the idle connections to one host; 0
	// means DefaultMaxIdleConnsPerHost.
	MaxIdleConnsPerHost int
	// MaxConnsPerHost bounds all connections to one host; 0 means no
	// bound. The benchmark sets it to its concurrency so that a ramp
	// never opens more connections than it has jobs.
	MaxConnsPerHost int
	// ResponseHeaderTimeout bounds the wait for a response's header; 0
	// means none, for the kinds, where each operation bounds its own wait
	// with a context (a read waits for its first byte, not the header).
	ResponseHeaderTimeout time.Duration
	// NoProxy ignores HTTP_PROXY and friends. The benchmark sets it: load
	// must go where it is told. The kinds honour the environment, as
	// every grid client does.
	NoProxy bool
}

// New returns a transport for the endpoint cfg describes: its CA and
// verification settings (cfg.TLSConfig), its timeout for the dial and the
// TLS handshake, and o's pool sizes. All its clients share these choices:
//
//   - HTTP/1.1 only: the storage servers of the field (nginx, XrdHttp,
//     dCache, S3) speak it, and HTTP/2 would multiplex big reads on one
//     TCP connection, where one window and one loss slow them all.
//   - No transparent gzip: it would hide lengths (Content-Length -1) and
//     hand back other bytes than those stored, which checksums are of.
//   - Keep-alive probes every 30 s and idle connections dropped after
//     90 s, as net/http's DefaultTransport does.
//   - Expect: 100-continue waits 1 s for the server's go-ahead, so a
//     redirected or refused PUT does not send its body first.
func New(cfg endpoint.Config, o Options) (*http.Transport, error) {
	tc, err := cfg.TLSConfig()
	if err != nil {
		return nil, err
	}
	timeout := cfg.TimeoutOrDefault()
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:       tc,
		TLSHandshakeTimeout:   timeout,
		ForceAttemptHTTP2:     false,
		DisableCompression:    true,
		MaxIdleConns:          cmpOr(o.MaxIdleConns, DefaultMaxIdleConns),
		MaxIdleConnsPerHost:   cmpOr(o.MaxIdleConnsPerHost, DefaultMaxIdleConnsPerHost),
		MaxConnsPerHost:       o.MaxConnsPerHost,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: o.ResponseHeaderTimeout,
		ExpectContinueTimeout: time.Second,
	}
	if o.NoProxy {
		tr.Proxy = nil
	}
	return tr, nil
}

// cmpOr is cmp.Or for a count: v when positive, else def.
func cmpOr(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}
