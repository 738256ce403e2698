package xrootd

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"go-hep.org/x/hep/xrootd/xrdproto"
	"go-hep.org/x/hep/xrootd/xrdproto/chmod"
	"go-hep.org/x/hep/xrootd/xrdproto/dirlist"
	"go-hep.org/x/hep/xrootd/xrdproto/endsess"
	"go-hep.org/x/hep/xrootd/xrdproto/locate"
	"go-hep.org/x/hep/xrootd/xrdproto/login"
	"go-hep.org/x/hep/xrootd/xrdproto/mkdir"
	"go-hep.org/x/hep/xrootd/xrdproto/mv"
	"go-hep.org/x/hep/xrootd/xrdproto/open"
	"go-hep.org/x/hep/xrootd/xrdproto/ping"
	"go-hep.org/x/hep/xrootd/xrdproto/protocol"
	"go-hep.org/x/hep/xrootd/xrdproto/query"
	"go-hep.org/x/hep/xrootd/xrdproto/read"
	"go-hep.org/x/hep/xrootd/xrdproto/rm"
	"go-hep.org/x/hep/xrootd/xrdproto/rmdir"
	"go-hep.org/x/hep/xrootd/xrdproto/stat"
	"go-hep.org/x/hep/xrootd/xrdproto/statx"
	xrdsync "go-hep.org/x/hep/xrootd/xrdproto/sync"
	"go-hep.org/x/hep/xrootd/xrdproto/truncate"
	"go-hep.org/x/hep/xrootd/xrdproto/write"
	"go-hep.org/x/hep/xrootd/xrdproto/xrdclose"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/httpx"
)

// conn is one client connection. The reader loop (serve) owns reading;
// requests run in goroutines it starts (at most MaxInFlight), except
// session requests and writes, which it handles itself so that a write's
// data streams from the socket to the upload file without a buffer of
// its size. Requests on one file handle run in the order they arrived
// (file.turns), so sequential reads stay sequential.
type conn struct {
	s   *Server
	nc  net.Conn
	br  *bufio.Reader
	ctx context.Context
	sem chan struct{}
	wg  sync.WaitGroup

	wmu sync.Mutex // serialises response writes; each part is written whole

	// Owned by the reader loop: whether the connection runs TLS now,
	// and whether it has handled any request but kXR_protocol (after
	// which it may not switch to TLS: requests running beside the
	// reader loop write to nc).
	tls, started bool

	mu     sync.Mutex // guards the fields below
	files  map[uint32]*file
	nextFH uint32
	token  string               // the last bearer token granted anything (tokenOf)
	waits  map[string]time.Time // first kXR_wait of an outage, by request and path
	held   map[string]held      // closed uploads waiting for a kXR_mv, by path
}

// errProtocol ends a connection whose byte stream cannot be trusted any
// more (a length over the bounds, a bad handshake).
var errProtocol = errors.New("protocol violation")

// serveConn serves nc until the client leaves, a protocol violation, an
// I/O error, or ctx's end, then drops the connection's unfinished
// uploads and waits for its requests to finish.
func (s *Server) serveConn(ctx context.Context, nc net.Conn) {
	ctx, cancel := context.WithCancel(ctx)
	c := &conn{
		s: s, nc: nc, br: bufio.NewReaderSize(nc, 64<<10), ctx: ctx,
		sem:   make(chan struct{}, s.opts.MaxInFlight),
		files: map[uint32]*file{}, waits: map[string]time.Time{}, held: map[string]held{},
	}
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Unix(1, 0)) })
	s.ops.conns.Add(1)
	err := c.serve()
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && ctx.Err() == nil {
		s.log.Debug("connection closed", "remote", addrString(nc.RemoteAddr()), "err", err)
	}
	cancel()
	stop()
	_ = nc.Close() // unblocks response writes of requests still running
	c.wg.Wait()
	c.mu.Lock()
	files, helds := c.files, c.held
	c.files, c.held = nil, nil
	c.mu.Unlock()
	for _, f := range files {
		f.abort()
	}
	for _, u := range helds {
		dropUpload(u.tmp)
	}
}

func addrString(a net.Addr) string {
	if a == nil {
		return ""
	}
	return a.String()
}

// serve reads the handshake, then requests until an error.
func (c *conn) serve() error {
	if err := c.handshake(); err != nil {
		return err
	}
	var h header
	for {
		_ = c.nc.SetReadDeadline(time.Now().Add(c.s.opts.IdleTimeout))
		if _, err := io.ReadFull(c.br, h[:]); err != nil {
			return err
		}
		_ = c.nc.SetReadDeadline(time.Now().Add(c.s.opts.IOTimeout))
		c.s.ops.count(h.id())
		dlen := h.dlen()
		isWrite := h.id() == write.RequestID || h.id() == reqPgWrite
		limit := int64(maxArgs)
		if isWrite {
			limit = c.s.opts.MaxWrite
		}
		if dlen < 0 || dlen > limit {
			// The stream cannot be resynchronised without reading dlen
			// bytes, and reading them is what the bound forbids.
			c.s.countError(classProtocol)
			_ = c.sendError(h.sid(), codeArgTooLong, fmt.Sprintf("request data of %d bytes (at most %d)", dlen, limit))
			return fmt.Errorf("%w: request %d with dlen %d", errProtocol, h.id(), dlen)
		}
		if h.id() != protocol.RequestID {
			c.started = true
			if c.s.opts.RequireTLS && c.s.opts.TLS != nil && !c.tls {
				// XrdXrootdProtocol::do_Login answers kXR_TLSRequired
				// too; the request's data is dropped to stay in step.
				if _, err := io.CopyN(io.Discard, c.br, dlen); err != nil {
					return err
				}
				c.s.countError(classRefused)
				if err := c.sendError(h.sid(), codeTLSRequired, "this root:// door requires TLS: use a roots:// URL (XRootD 5 client)"); err != nil {
					return err
				}
				continue
			}
		}
		if isWrite {
			if err := c.write(&h); err != nil {
				return err
			}
			continue
		}
		var data []byte
		if dlen > 0 {
			data = make([]byte, dlen)
			if _, err := io.ReadFull(c.br, data); err != nil {
				return err
			}
		}
		switch h.id() {
		case protocol.RequestID:
			err := c.protocol(&h)
			if err != nil {
				return err
			}
			continue
		case login.RequestID:
			// A 16-byte session id; the security protocols offered
			// follow it only on a TLS connection with Authorize (see
			// secParams), and nothing more says no authentication
			// (XRootD protocol, kXR_login response).
			c.s.ops.logins.Add(1)
			sess := make([]byte, 16, 16+len(secParams))
			_, _ = rand.Read(sess)
			if c.tls && c.s.opts.Authorize != nil {
				sess = append(sess, secParams...)
			}
			if err := c.send(h.sid(), uint16(xrdproto.Ok), sess); err != nil {
				return err
			}
			continue
		case reqAuth:
			if err := c.auth(&h, data); err != nil {
				return err
			}
			continue
		case ping.RequestID, endsess.RequestID:
			if err := c.send(h.sid(), uint16(xrdproto.Ok)); err != nil {
				return err
			}
			continue
		}
		// Everything else runs beside the reader loop. Requests on a
		// file handle take their turn now, in arrival order.
		var f *file
		var turn uint64
		if usesHandle(h.id()) {
			f = c.file(h.fhandle())
			if f != nil {
				turn = f.turns.take()
			}
		}
		select {
		case c.sem <- struct{}{}:
		case <-c.ctx.Done():
			if f != nil {
				f.turns.skip(turn)
			}
			return c.ctx.Err()
		}
		h := h // the reader loop reads the next header into its own
		c.wg.Add(1)
		c.s.reqs.Go(func() {
			defer c.wg.Done()
			defer func() { <-c.sem }()
			if f != nil {
				f.turns.wait(turn)
				defer f.turns.done()
			}
			c.dispatch(&h, data, f)
		})
	}
}

// usesHandle reports whether request id names a file handle in its
// parameters' first four bytes (readv names them in its data).
func usesHandle(id uint16) bool {
	switch id {
	case read.RequestID, reqPgRead, xrdsync.RequestID, xrdclose.RequestID:
		return true
	}
	return false
}

// handshake reads the client's 20-byte handshake (0 0 0 4 2012) and
// answers it: protocol version and server type (XRootD protocol,
// "Initial handshake").
func (c *conn) handshake() error {
	_ = c.nc.SetReadDeadline(time.Now().Add(c.s.opts.IOTimeout))
	var hs [20]byte
	if _, err := io.ReadFull(c.br, hs[:]); err != nil {
		return err
	}
	if u32(hs[:], 0) != 0 || u32(hs[:], 4) != 0 || u32(hs[:], 8) != 0 || u32(hs[:], 12) != 4 || u32(hs[:], 16) != 2012 {
		c.s.countError(classProtocol)
		return fmt.Errorf("%w: bad handshake % x", errProtocol, hs)
	}
	body := make([]byte, 8)
	binary.BigEndian.PutUint32(body, protocolVersion)
	binary.BigEndian.PutUint32(body[4:], uint32(xrdproto.LoadBalancingServer))
	return c.send([2]byte{}, uint16(xrdproto.Ok), body)
}

// protocol answers kXR_protocol: version 5.2.0, a manager (so that
// XrdCl takes the door as its load balancer and comes back to it with
// tried= when a data server it was sent to fails; kXR_isServer is not
// set, as it would make XrdCl name the door, not the failed data
// server, in tried=), pgread and pgwrite supported. No security
// requirements follow, asked for or not: tokens come in the CGI.
//
// With Options.TLS it adds kXR_haveTLS (and kXR_tlsLogin with
// RequireTLS), and when the client asks for TLS (kXR_wantTLS, which
// XrdCl sets for roots:// URLs; or kXR_ableTLS when TLS is required)
// kXR_gotoTLS, after which both sides run a TLS handshake on this
// connection and everything that follows is inside it
// (XrdXrootdProtocol::do_Protocol; XrdCl's XRootDTransport::
// NeedEncryption). As the door is a manager, XrdCl opens no data
// streams (kXR_bind): the one connection is all there is to encrypt.
func (c *conn) protocol(h *header) error {
	p := h.params()
	clientPV, reqFlags := u32(p, 0), p[4]
	flags := uint32(flagIsManager | flagSupPgRW)
	goTLS := false
	if c.s.opts.TLS != nil && clientPV != 0 {
		flags |= flagHaveTLS
		if c.s.opts.RequireTLS {
			flags |= flagTLSLogin
		}
		goTLS = !c.tls && (reqFlags&protoWantTLS != 0 || reqFlags&protoAbleTLS != 0 && c.s.opts.RequireTLS)
	}
	if goTLS && c.started {
		// Requests running beside the reader loop write to the plain
		// connection; XrdCl asks for TLS first thing or never.
		c.s.countError(classProtocol)
		return c.sendError(h.sid(), codeArgInvalid, "TLS can only start before any other request on the connection")
	}
	if goTLS {
		flags |= flagGotoTLS
	}
	body := make([]byte, 8)
	binary.BigEndian.PutUint32(body, protocolVersion)
	binary.BigEndian.PutUint32(body[4:], flags)
	if err := c.send(h.sid(), uint16(xrdproto.Ok), body); err != nil {
		return err
	}
	if goTLS {
		return c.startTLS()
	}
	return nil
}

// startTLS runs the server side of the TLS handshake on the connection
// and makes the reader loop and the responses use it. The client sends
// nothing between the kXR_protocol that asked for TLS and its
// ClientHello: bytes already buffered are a protocol violation.
func (c *conn) startTLS() error {
	if c.br.Buffered() > 0 {
		c.s.countError(classProtocol)
		return fmt.Errorf("%w: %d bytes sent in plain after asking for TLS", errProtocol, c.br.Buffered())
	}
	tc := tls.Server(c.nc, c.s.opts.TLS)
	_ = c.nc.SetDeadline(time.Now().Add(c.s.opts.IOTimeout))
	if err := tc.HandshakeContext(c.ctx); err != nil {
		c.s.countError(classProtocol)
		return fmt.Errorf("TLS handshake: %w", err)
	}
	c.nc, c.tls = tc, true
	c.br.Reset(tc)
	if certs := tc.ConnectionState().PeerCertificates; len(certs) > 0 {
		// Before any request runs beside the reader loop (TLS starts
		// first thing or never), so nothing reads c.ctx concurrently.
		c.ctx = context.WithValue(c.ctx, peerKey{}, certs)
	}
	return nil
}

type peerKey struct{}

// PeerCertificates returns the certificate chain the client presented
// in the roots:// TLS handshake (leaf first, as TLS sends it; checked by
// the TLS config's own verification, if it has one), from the context
// Options.Authorize is called with; nil when the connection has none.
// XrdCl presents X509_USER_PROXY (or X509_USER_CERT and X509_USER_KEY)
// there.
func PeerCertificates(ctx context.Context) []*x509.Certificate {
	certs, _ := ctx.Value(peerKey{}).([]*x509.Certificate)
	return certs
}

// secParams are the security protocols a TLS connection's kXR_login
// answer offers, as XrdSecServer::getParms lists them: ztn (XRootD's
// "token over TLS", XrdSecProtocolztn; its client finds the token in
// BEARER_TOKEN, BEARER_TOKEN_FILE, $XDG_RUNTIME_DIR/bt_u<uid> or
// /tmp/bt_u<uid>, the WLCG bearer token discovery order), with options
// 0 and the largest token it may send; then unix, which XrdCl falls
// back to when it finds no token, and which the door takes as
// anonymous. Plain connections get no offer: ztn sends tokens only
// inside TLS, and lakefed's and go-hep's clients, which do no TLS,
// take an offer as "authentication required".
const secParams = "&P=ztn,0:16384:&P=unix"

// auth answers kXR_auth. A ztn credential (XrdSecProtocolztn's
// TokenResp: "ztn\0", version, 'T', two reserved bytes, the token's
// length with its NUL, the token) makes its token the connection's
// token (tokenOf), which Authorize verifies, expiry included, at each
// use: a bad token is refused request by request, with the reason. A
// unix credential is anonymous. It returns an error only when the
// answer cannot be written.
func (c *conn) auth(h *header, data []byte) error {
	switch cred := string(bytes.TrimRight(h.params()[12:16], "\x00")); {
	case cred == "unix":
		return c.send(h.sid(), uint16(xrdproto.Ok))
	case cred == "ztn" && c.tls && c.s.opts.Authorize != nil:
		if len(data) < 10 || string(data[:4]) != "ztn\x00" || data[5] != 'T' {
			c.s.countError(classProtocol)
			return c.sendError(h.sid(), codeNotAuthorized, "malformed ztn credentials")
		}
		n := int(u16(data, 8))
		tok := string(bytes.TrimRight(data[10:min(len(data), 10+n)], "\x00"))
		if tok == "" {
			c.s.countError(classRefused)
			return c.sendError(h.sid(), codeNotAuthorized, "empty ztn token")
		}
		c.mu.Lock()
		c.token = tok
		c.mu.Unlock()
		return c.send(h.sid(), uint16(xrdproto.Ok))
	default:
		c.s.countError(classRefused)
		return c.sendError(h.sid(), codeNotAuthorized, fmt.Sprintf("security protocol %q is not accepted: lakefed takes ztn (a bearer token, over roots://) or unix (anonymous)", cred))
	}
}

// dispatch runs one request beside the reader loop; f is the file its
// handle names (nil when none or unknown), whose turn it holds.
func (c *conn) dispatch(h *header, data []byte, f *file) {
	var err error
	switch h.id() {
	case stat.RequestID:
		err = c.stat(h, data)
	case statx.RequestID:
		err = c.statx(h, data)
	case dirlist.RequestID:
		err = c.dirlist(h, data)
	case locate.RequestID:
		err = c.locate(h, data)
	case query.RequestID:
		err = c.query(h, data)
	case open.RequestID:
		err = c.open(h, data)
	case read.RequestID:
		err = c.read(h, f)
	case reqReadV:
		err = c.readv(h, data)
	case reqPgRead:
		err = c.pgread(h, f)
	case xrdsync.RequestID:
		err = c.sync(h, f)
	case xrdclose.RequestID:
		err = c.close(h, f)
	case mv.RequestID:
		err = c.rename(h, data)
	case rm.RequestID:
		err = c.remove(h, data)
	case rmdir.RequestID:
		err = c.rmdir(h, data)
	case mkdir.RequestID:
		err = c.mkdir(h, data)
	case truncate.RequestID:
		err = c.truncate(h, data)
	case chmod.RequestID:
		err = c.chmod(h, data)
	default:
		c.s.countError(classProtocol)
		err = c.sendError(h.sid(), codeUnsupported, fmt.Sprintf("request %s is not supported by lakefed", reqName(h.id())))
	}
	if err != nil {
		// A response that could not be written: the connection is
		// broken; close it so that the reader loop ends too.
		_ = c.nc.Close()
	}
}

// reqName names request id as XProtocol.hh does.
func reqName(id uint16) string {
	names := [...]string{"kXR_auth", "kXR_query", "kXR_chmod", "kXR_close", "kXR_dirlist", "kXR_gpfile",
		"kXR_protocol", "kXR_login", "kXR_mkdir", "kXR_mv", "kXR_open", "kXR_ping", "kXR_chkpoint",
		"kXR_read", "kXR_rm", "kXR_rmdir", "kXR_sync", "kXR_stat", "kXR_set", "kXR_write", "kXR_fattr",
		"kXR_prepare", "kXR_statx", "kXR_endsess", "kXR_bind", "kXR_readv", "kXR_pgwrite", "kXR_locate",
		"kXR_truncate", "kXR_sigver", "kXR_pgread", "kXR_writev", "kXR_clone"}
	if id >= reqFirst && int(id-reqFirst) < len(names) {
		return names[id-reqFirst]
	}
	return fmt.Sprintf("%d (unknown)", id)
}

// send writes one response: header and body parts, whole, under the
// write lock and within IOTimeout.
func (c *conn) send(sid [2]byte, status uint16, parts ...[]byte) error {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	bufs := make(net.Buffers, 0, len(parts)+1)
	bufs = append(bufs, respHeader(sid, status, n))
	bufs = append(bufs, parts...)
	return c.sendRaw(bufs)
}

// sendRaw writes bufs as one response part.
func (c *conn) sendRaw(bufs net.Buffers) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.s.opts.IOTimeout))
	_, err := bufs.WriteTo(c.nc)
	return err
}

// sendError answers with kXR_error.
func (c *conn) sendError(sid [2]byte, code xrdproto.ServerErrorCode, msg string) error {
	return c.send(sid, uint16(xrdproto.Error), errorBody(code, msg))
}

// sendFailure answers a request that failed with err, by err's class:
// endpoint.ErrNotFound is kXR_NotFound; endpoint.ErrUnavailable is
// kXR_wait (for OutageWait in all per request and path on this
// connection, then kXR_ServerError) and never kXR_NotFound; a refusal is
// kXR_ItExists, kXR_Unsupported, kXR_ArgInvalid for a bad path, else
// refusedCode; anything else is kXR_ServerError. key names the request
// for the wait count ("" when it must not wait: the answer would not
// change).
func (c *conn) sendFailure(sid [2]byte, key string, refusedCode xrdproto.ServerErrorCode, err error) error {
	msg := err.Error()
	switch {
	case httpx.IsPathError(err):
		c.s.countError(classRefused)
		return c.sendError(sid, codeArgInvalid, msg)
	case errors.Is(err, endpoint.ErrNotFound):
		c.s.countError(classNotFound)
		return c.sendError(sid, codeNotFound, msg)
	case errors.Is(err, endpoint.ErrExist), errors.Is(err, endpoint.ErrNotEmpty):
		// A directory not empty is kXR_ItExists, as XProtocol's
		// mapError has it since XRootD 5.6.
		c.s.countError(classRefused)
		return c.sendError(sid, codeItExists, msg)
	case errors.Is(err, endpoint.ErrUnsupported):
		c.s.countError(classRefused)
		return c.sendError(sid, codeUnsupported, msg)
	case errors.Is(err, endpoint.ErrRefused):
		c.s.countError(classRefused)
		return c.sendError(sid, refusedCode, msg)
	case errors.Is(err, endpoint.ErrUnavailable):
		c.s.countError(classUnavailable)
		if secs := c.waitFor(key); secs > 0 {
			c.s.ops.waits.Add(1)
			body := make([]byte, 4, 4+len(msg))
			binary.BigEndian.PutUint32(body, uint32(secs))
			return c.send(sid, uint16(xrdproto.Wait), append(body, msg...))
		}
		return c.sendError(sid, codeServerError, msg)
	}
	c.s.countError(classServer)
	return c.sendError(sid, codeServerError, msg)
}

// maxWaitKeys bounds the outages one connection keeps the start of.
const maxWaitKeys = 256

// waitFor returns the seconds of the kXR_wait that answers key during an
// outage: a fifth of OutageWait (at least 1 s), less near the end of the
// bound, counted from key's first kXR_wait; 0 once the bound is used up
// (then kXR_ServerError, and key's next request starts a new bound) or
// when key is "".
func (c *conn) waitFor(key string) int {
	if key == "" {
		return 0
	}
	bound := c.s.opts.OutageWait
	now := c.s.opts.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	first, ok := c.waits[key]
	if !ok {
		if len(c.waits) >= maxWaitKeys {
			clear(c.waits)
		}
		first = now
		c.waits[key] = first
	}
	secs := int(min(bound-now.Sub(first), max(bound/outageSteps, time.Second)) / time.Second)
	if secs <= 0 {
		delete(c.waits, key)
		return 0
	}
	return secs
}

// answered forgets key's waits: the request got an answer.
func (c *conn) answered(key string) {
	c.mu.Lock()
	delete(c.waits, key)
	c.mu.Unlock()
}

// reqCtx is the context of one namespace call for the caller with
// bearer token tok (see withBearer).
func (c *conn) reqCtx(tok string) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(c.ctx, c.s.opts.RequestTimeout)
	// An ID, as an HTTP request gets one (httpx.TagRequest): the log
	// lines the request causes carry it, and the HTTP endpoints it asks
	// are sent it (X-Request-Id) and log it too.
	ctx = httpx.WithRequestID(ctx, httpx.NewRequestID())
	return c.withBearer(ctx, tok), cancel
}

// withBearer returns ctx carrying tok (httpx.WithBearer), for the
// endpoints that pass their caller's token on (endpoint.Config.PassToken)
// as they do a token Middleware found. Only a token Authorize granted
// is passed on: without the hook tokens are not verified, and none is.
func (c *conn) withBearer(ctx context.Context, tok string) context.Context {
	if c.s.opts.Authorize == nil || tok == "" || tok == badToken {
		return ctx
	}
	return httpx.WithBearer(ctx, tok)
}
