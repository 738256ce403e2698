package http

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

// ownConn reports whether req, a GET, goes on a connection of its own
// (ownDo), whose body the reader can splice: the caller asked for it,
// the range is large, the connection is plain TCP (TLS bytes must be
// decrypted in user space) and not through a proxy.
func (e *Endpoint) ownConn(ctx context.Context, req *http.Request) bool {
	if req.Method != http.MethodGet || req.URL.Scheme != "http" || !endpoint.SpliceWanted(ctx) {
		return false
	}
	if e.tr.Proxy != nil {
		if u, err := e.tr.Proxy(req); err != nil || u != nil {
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

// ownDo sends req on a new connection, dialled as the transport dials,
// and reads the answer's head. The connection carries this one exchange
// and is closed with the body (Connection: close), or when req's
// context ends.
func (e *Endpoint) ownDo(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	addr := req.URL.Host
	if req.URL.Port() == "" {
		addr = net.JoinHostPort(req.URL.Hostname(), "80")
	}
	nc, err := e.tr.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		nc.Close()
		return nil, fmt.Errorf("http: dial %s: not a TCP connection", addr)
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
	resp.Body = &ownBody{rc: resp.Body, conn: tc, br: br, stop: stop,
		framed: resp.ContentLength >= 0 && len(resp.TransferEncoding) == 0}
	return resp, nil
}

// ownBody is the body of an answer on a connection of its own. Read
// goes through net/http's framing; Splicer's calls take the bytes from
// the socket itself (endpoint.Socket), which is possible when the body is the next
// bytes on the wire (framed: a Content-Length, no chunking). The
// endpoint's body never reads past the end it knows, so bytes spliced
// behind net/http's back never make it read too far.
type ownBody struct {
	rc     io.ReadCloser
	conn   *net.TCPConn
	br     *bufio.Reader // what ReadResponse buffered past the head comes first
	stop   func() bool
	framed bool
}

func (o *ownBody) Read(p []byte) (int, error) { return o.rc.Read(p) }

// Close closes the connection; net/http's Close of the body would read
// the rest of it first.
func (o *ownBody) Close() error {
	o.stop()
	return o.conn.Close()
}

// socket is where the body's bytes are taken from when it splices.
func (o *ownBody) socket() endpoint.Socket { return endpoint.Socket{Conn: o.conn, Buf: o.br} }
