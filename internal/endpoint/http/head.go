package http

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/lakefed/lakefed/internal/endpoint"
)

// Why HEAD to a plain-HTTP endpoint does not go through the Transport: a
// federator's cold look-up sends a HEAD to every endpoint for every new
// path, and net/http's Transport hands each request to the connection's
// writer goroutine and its answer back from the reader goroutine, two
// goroutine switches and their wake-ups per HEAD, which cost the look-up
// more than the request itself. A HEAD answer has no body (RFC 9110
// §9.3.2), so its connection is free again as soon as the head is read:
// the HEAD is written and its answer read on the caller's goroutine, on a
// keep-alive connection of the endpoint's own pool (endpoint.IdlePool,
// headIdle of them kept), exactly as the Transport would send it
// (Request.Write, http.ReadResponse).
//
// Only the endpoint's own host over plain HTTP with no proxy takes this
// path; TLS, proxies and the hosts redirects lead to stay with the
// Transport. A connection is reused only after a whole answer that does
// not ask to close it, with nothing more in its buffer; a HEAD whose
// reused connection the server had closed while idle is sent again once
// on a new one (HEAD is idempotent, RFC 9110 §9.2.2).

// headIdle bounds the idle HEAD connections kept, as the Transport keeps
// transport.DefaultMaxIdleConnsPerHost.
const headIdle = 64

// headIdleTimeout is how long a HEAD connection may stay idle, as the
// Transport's IdleConnTimeout.
const headIdleTimeout = 90 * time.Second

// headConn is one keep-alive connection for HEAD, used by one caller at
// a time.
type headConn struct {
	c      net.Conn
	br     *bufio.Reader
	bw     *bufio.Writer
	reused bool // it carried a HEAD before this one
}

// newHeadPool is the endpoint's pool of HEAD connections.
func newHeadPool() *endpoint.IdlePool[*headConn] {
	return &endpoint.IdlePool[*headConn]{Max: headIdle, IdleTimeout: headIdleTimeout, Drop: func(hc *headConn) { hc.c.Close() }}
}

// headDirect reports whether the endpoint's HEADs may go on its own
// connections: plain HTTP, and no proxy for its host.
func headDirect(tr *http.Transport, base *url.URL) bool {
	if base.Scheme != "http" {
		return false
	}
	if tr.Proxy != nil {
		req := &http.Request{Method: http.MethodHead, URL: base, Header: http.Header{}}
		if u, err := tr.Proxy(req); err != nil || u != nil {
			return false
		}
	}
	return true
}

// ownHead reports whether req goes on the endpoint's HEAD connections.
func (e *Endpoint) ownHead(req *http.Request) bool {
	return e.headDirect && req.Method == http.MethodHead && req.URL.Host == e.base.Host && req.URL.Scheme == "http"
}

// headDo sends req, a HEAD to the endpoint's own host, on a pooled
// connection and reads the answer's head on this goroutine.
func (e *Endpoint) headDo(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	for retried := false; ; retried = true {
		hc, err := e.headConn(ctx, req)
		if err != nil {
			return nil, err
		}
		resp, err := hc.exchange(ctx, req)
		if err == nil {
			if resp.Close || hc.br.Buffered() > 0 {
				hc.c.Close()
			} else {
				e.heads.Put(hc)
			}
			return resp, nil
		}
		hc.c.Close()
		if hc.reused && !retried && ctx.Err() == nil && endpoint.ClosedByPeer(err) {
			// Closed while idle: the server may have restarted, and
			// closed every idle connection with it.
			e.heads.Drain()
			continue
		}
		return nil, err
	}
}

// headConn returns an idle HEAD connection, or a new one dialled as the
// Transport dials.
func (e *Endpoint) headConn(ctx context.Context, req *http.Request) (*headConn, error) {
	if hc, ok := e.heads.Get(); ok {
		hc.reused = true
		return hc, nil
	}
	addr := req.URL.Host
	if req.URL.Port() == "" {
		addr = net.JoinHostPort(req.URL.Hostname(), "80")
	}
	c, err := e.tr.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &headConn{c: c, br: bufio.NewReaderSize(c, 4<<10), bw: bufio.NewWriterSize(c, 1<<10)}, nil
}

// exchange writes req on hc and reads the answer's head (a 1xx answer
// is skipped), within ctx. Any error leaves hc unusable.
func (hc *headConn) exchange(ctx context.Context, req *http.Request) (*http.Response, error) {
	dl, _ := ctx.Deadline()
	_ = hc.c.SetDeadline(dl)
	stop := context.AfterFunc(ctx, func() { _ = hc.c.SetDeadline(time.Unix(1, 0)) })
	err := req.Write(hc.bw)
	if err == nil {
		err = hc.bw.Flush()
	}
	var resp *http.Response
	if err == nil {
		resp, err = http.ReadResponse(hc.br, req)
		for err == nil && resp.StatusCode >= 100 && resp.StatusCode < 200 {
			resp, err = http.ReadResponse(hc.br, req)
		}
	}
	if !stop() {
		return nil, context.Cause(ctx)
	}
	return resp, err
}
