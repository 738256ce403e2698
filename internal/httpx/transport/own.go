package transport

// A connection of its own for one large GET whose body the caller
// forwards to a socket (endpoint.WithSplice): the bytes then go from
// this socket to the other with splice(2), never through the process's
// memory. The http and s3 kinds send such reads here (Owns, Own).

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lakefed/lakefed/internal/endpoint"
)

// spliceMin is the smallest range a caller that splices (endpoint.
// WithSplice) gets on a connection of its own: below it, the handshake
// of a new connection costs more than the copies splicing saves.
const spliceMin = 1 << 20

// ownReadBuffer is the receive buffer (SO_RCVBUF; the kernel doubles
// it) of a connection of its own to a near server (nearRTT). Left to
// autotuning, the buffer of a stream the reader keeps open and takes a
// few MiB from at a time (the root:// door's, for a client reading
// 2.5 MiB a second) grows to tcp_rmem's maximum, 8 to 32 MiB: two
// hundred such streams took the host's TCP memory past tcp_mem's
// pressure mark, where the kernel drops segments, and reads everywhere
// stalled for retransmission timeouts at once. A server near enough
// fills 1 MiB in a millisecond, and the bytes it has queued to send are
// the read-ahead.
const ownReadBuffer = 512 << 10

// nearRTT is the round trip under which a server is near: a fixed
// 1 MiB window carries 1 GB/s to it. A far one keeps autotuning, which
// sizes the window to the path's bandwidth-delay product.
const nearRTT = time.Millisecond

// roundTrip returns the kernel's estimate of tc's round-trip time
// (TCP_INFO; after the handshake, the handshake's).
func roundTrip(tc *net.TCPConn) (time.Duration, bool) {
	sc, err := tc.SyscallConn()
	if err != nil {
		return 0, false
	}
	var info *unix.TCPInfo
	var gerr error
	if err := sc.Control(func(fd uintptr) {
		info, gerr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); err != nil || gerr != nil {
		return 0, false
	}
	return time.Duration(info.Rtt) * time.Microsecond, true
}

// Owns reports whether req, sent with tr, goes on a connection of its
// own (Own), whose body the reader can splice: a GET whose caller asked
// for it (endpoint.WithSplice on req's context), of a large range, over
// plain TCP (TLS bytes must be decrypted in user space) and not through
// a proxy.
func Owns(tr *http.Transport, req *http.Request) bool {
	if req.Method != http.MethodGet || req.URL.Scheme != "http" || !endpoint.SpliceWanted(req.Context()) {
		return false
	}
	if tr.Proxy != nil {
		if u, err := tr.Proxy(req); err != nil || u != nil {
			return false
		}
	}
	rg := req.Header.Get("Range")
	if rg == "" {
		return true // the whole file
	}
	first, last, ok := strings.Cut(strings.TrimPrefix(rg, "bytes="), "-")
	if !ok {
		return false
	}
	if last == "" {
		return true // to the end
	}
	a, err1 := strconv.ParseInt(first, 10, 64)
	b, err2 := strconv.ParseInt(last, 10, 64)
	return err1 == nil && err2 == nil && b-a+1 >= spliceMin
}

// Own sends req on a new connection, dialled as tr dials, and reads the
// answer's head: one exchange of a RoundTripper, redirects not followed.
// The connection carries this one exchange and is closed with the body
// (Connection: close), or when req's context ends. The answer's Body is
// an *OwnBody.
func Own(tr *http.Transport, req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	addr := req.URL.Host
	if req.URL.Port() == "" {
		addr = net.JoinHostPort(req.URL.Hostname(), "80")
	}
	nc, err := tr.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		nc.Close()
		return nil, fmt.Errorf("transport: dial %s: not a TCP connection", addr)
	}
	if rtt, ok := roundTrip(tc); ok && rtt < nearRTT {
		_ = tc.SetReadBuffer(ownReadBuffer)
	}
	stop := context.AfterFunc(ctx, func() { tc.Close() })
	req.Close = true
	br := bufio.NewReaderSize(tc, 4<<10)
	if err := req.Write(tc); err != nil {
		stop()
		tc.Close()
		return nil, err
	}
	resp, err := http.ReadResponse(br, req)
	for err == nil && resp.StatusCode >= 100 && resp.StatusCode < 200 {
		resp, err = http.ReadResponse(br, req) // 103 Early Hints and the like: no body
	}
	if err != nil {
		stop()
		tc.Close()
		return nil, err
	}
	left := int64(-1)
	if resp.ContentLength >= 0 && len(resp.TransferEncoding) == 0 && req.Method != http.MethodHead {
		left = resp.ContentLength
	}
	resp.Body = &OwnBody{rc: resp.Body, sock: endpoint.Socket{Conn: tc, Buf: br}, stop: stop, left: left}
	return resp, nil
}

// OwnBody is the body of an answer on a connection of its own (Own).
// Read goes through net/http's framing; Ready and SpliceTo
// (endpoint.Splicer) take the bytes from the socket itself
// (endpoint.Socket), which is possible when the body is the next bytes
// on the wire: framed by a Content-Length, not chunked. It never hands
// out more than that length, whichever way the bytes are taken, so
// bytes spliced behind net/http's back never make it read too far.
type OwnBody struct {
	rc   io.ReadCloser
	sock endpoint.Socket // its Buf holds what ReadResponse buffered past the head
	stop func() bool
	left int64 // bytes of the body not yet taken; -1: not framed, it cannot splice
}

func (o *OwnBody) Read(p []byte) (int, error) {
	if o.left == 0 {
		return 0, io.EOF
	}
	if o.left > 0 && int64(len(p)) > o.left {
		p = p[:o.left]
	}
	n, err := o.rc.Read(p)
	if o.left > 0 {
		o.left -= int64(n)
	}
	return n, err
}

// Close closes the connection; net/http's Close of the body would read
// the rest of it first.
func (o *OwnBody) Close() error {
	o.stop()
	return o.sock.Conn.Close()
}

// Ready is endpoint.Splicer's: how many of the body's next bytes can be
// taken without waiting (endpoint.Socket.Ready), io.EOF after the last,
// io.ErrUnexpectedEOF when the server closed before it, ErrNoSplice for
// a body that is not framed.
func (o *OwnBody) Ready() (int64, error) {
	switch {
	case o.left == 0:
		return 0, io.EOF
	case o.left < 0:
		return 0, endpoint.ErrNoSplice
	}
	n, err := o.sock.Ready()
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return min(n, o.left), err
}

// SpliceTo is endpoint.Splicer's (endpoint.Socket.SpliceTo), within the
// body.
func (o *OwnBody) SpliceTo(dst *net.TCPConn, n int64) (int64, error) {
	if o.left < 0 {
		return 0, endpoint.ErrNoSplice
	}
	m, err := o.sock.SpliceTo(dst, min(n, o.left))
	o.left -= m
	return m, err
}

// RoundTripper is tr, but for the requests Owns picks, which it sends on
// a connection of their own (Own): for clients that call a transport
// for every request (an SDK's), whose caller forwards large reads to a
// socket.
func RoundTripper(tr *http.Transport) http.RoundTripper { return ownTransport{tr} }

type ownTransport struct{ tr *http.Transport }

func (t ownTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if Owns(t.tr, req) {
		return Own(t.tr, req)
	}
	return t.tr.RoundTrip(req)
}
