package xroot

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"go-hep.org/x/hep/xrootd/xrdproto"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/endpoint/xroot/xrdwire"
)

// Why Open does not read through go-hep: profiling BenchmarkRead showed
// the bulk path paying for go-hep's design, not for the server. go-hep
// allocates (and clears) a new buffer for every response frame, appends
// the frames of one answer into another growing slice, then copies that
// into the caller's buffer; on top of that every byte crosses the
// loopback relay (conn.go). The process was mostly idle, waiting. A
// hand-written, synchronous exchange on a plain connection read 8 MiB
// kXR_read answers from the same xrootd at ~630 MB/s where the kind
// managed ~385 MB/s; with the answers going straight into the caller's
// buffer and two 32 MiB requests in flight it reaches ~1 GB/s and more
// (BenchmarkRead: kind vs kind-gohep), the client's CPU being one read(2)
// per buffer.
//
// So Open speaks kXR_open/kXR_read itself, on a connection of its own
// (one per open reader), and the answer's bytes go from the socket
// straight into the caller's buffer. Nothing of go-hep runs on this path,
// so a server that dies mid-read is a read error on our own socket
// (ErrUnavailable), never a panic; every wait is a socket deadline of
// Timeout, and the caller's ctx moves the deadline to the past.
//
// It falls back to the go-hep session (read.go), which knows what this
// file does not, when the server asks for authentication at login or
// redirects the open (a redirector) -- a server that did so once is not
// tried again (Endpoint.noDirect) -- and, for one call, when the server
// asks to wait.
//
// Protocol reference: XRootD protocol v5 (XProtocol.hh): kXR_open,
// kXR_read, kXR_oksofar; responses to requests on different stream ids
// may come in any order, so a frame for a later request is kept aside
// (rare: xrootd answers one link's requests in order).

// kXR_open flags and kXR_stat flags (XProtocol.hh).
const (
	openRead    = 0x0010 // kXR_open_read
	openRetStat = 0x0400 // kXR_retstat

	statIsDir = 2 // kXR_isDir in the stat flags
)

// directChunk is the length of one kXR_read on the direct path, and
// directAhead how many are in flight. The answers go straight into the
// caller's buffers, so they cost no memory here; larger requests cost the
// server fewer of them. Measured against xrootd 5.5 on loopback
// (BenchmarkRead, 256 MiB): 2x8 MiB ~0.75-0.95 GB/s, 2x16 MiB ~1.2 GB/s,
// 2x32 MiB ~1.3-1.45 GB/s, 4x32 MiB no better.
const (
	directChunk = 32 << 20
	directAhead = 2
)

// errFallback says the direct path cannot serve this server: use go-hep
// from now on. errTryGoHEP says it cannot serve this call (the server
// asked to wait): use go-hep this time.
var (
	errFallback = errors.New("xroot: direct read not possible")
	errTryGoHEP = errors.New("xroot: direct read not possible now")
)

// deadlineSlack is how stale a socket deadline may get before a Read
// moves it: moving it costs a little on every call, and the deadline
// only has to catch a server that stops sending for about Timeout.
const deadlineSlack = 8

// dialDirect connects to addr and logs in, within d and ctx, and says
// whether the server is a data server (xrdwire.DialServer).
func dialDirect(ctx context.Context, addr, user string, d time.Duration) (net.Conn, bool, error) {
	c, dataServer, err := xrdwire.DialServer(ctx, addr, user, d)
	switch {
	case err == nil:
		return c, dataServer, nil
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return nil, false, ctxErr(ctx)
	case errors.Is(err, xrdwire.ErrNeedsAuth):
		return nil, false, errFallback
	}
	return nil, false, err
}

// openDirect sends kXR_open (read, with stat) for rp on c, a logged-in
// connection, and returns the file handle, size and whether rp is a
// directory. A server whose answer carries no stat (go-hep's) is asked
// with kXR_stat on the handle. A redirect gives errFallback, a wait
// errTryGoHEP; a server error comes back as xrdproto.ServerError.
func openDirect(c net.Conn, rp string) (fh [4]byte, size int64, isDir bool, err error) {
	req := make([]byte, 24+len(rp))
	binary.BigEndian.PutUint16(req[0:], 2)
	binary.BigEndian.PutUint16(req[2:], xrdwire.ReqOpen)
	binary.BigEndian.PutUint16(req[6:], openRead|openRetStat)
	binary.BigEndian.PutUint32(req[20:], uint32(len(rp)))
	copy(req[24:], rp)
	if _, err := c.Write(req); err != nil {
		return fh, 0, false, err
	}
	st, body, err := xrdwire.ReadAnswer(c, [2]byte{0, 2})
	switch {
	case err != nil:
		return fh, 0, false, err
	case st == xrdwire.StatusRedirect:
		return fh, 0, false, errFallback
	case st != xrdwire.StatusOK:
		return fh, 0, false, errTryGoHEP
	case len(body) < 4:
		return fh, 0, false, fmt.Errorf("open answer of %d bytes", len(body))
	}
	// fhandle[4], cpsize[4], cptype[4], then "id size flags mtime ..." (kXR_retstat).
	copy(fh[:], body)
	var text []byte
	if len(body) > 12 {
		text = body[12:]
	} else {
		// kXR_stat on the handle: options, reserved[11], fhandle, no path.
		req := make([]byte, 24)
		binary.BigEndian.PutUint16(req[0:], 3)
		binary.BigEndian.PutUint16(req[2:], xrdwire.ReqStat)
		copy(req[16:20], fh[:])
		if _, err := c.Write(req); err != nil {
			return fh, 0, false, err
		}
		st, text, err = xrdwire.ReadAnswer(c, [2]byte{0, 3})
		if err != nil {
			return fh, 0, false, err
		}
		if st != xrdwire.StatusOK {
			return fh, 0, false, errTryGoHEP
		}
	}
	f := strings.Fields(strings.TrimRight(string(text), "\x00"))
	if len(f) < 3 {
		return fh, 0, false, fmt.Errorf("stat answer %q", text)
	}
	size, err1 := strconv.ParseInt(f[1], 10, 64)
	flags, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil || size < 0 {
		return fh, 0, false, fmt.Errorf("bad stat answer %q", text)
	}
	return fh, size, flags&statIsDir != 0, nil
}

// openDirect opens p for reading on a connection of its own. errFallback
// means: use the go-hep session instead.
func (e *Endpoint) openDirect(ctx context.Context, p, rp string, off, n int64) (io.ReadCloser, error) {
	c, _, err := dialDirect(ctx, e.addr, e.user, e.timeout)
	if err != nil {
		if errors.Is(err, errFallback) {
			return nil, err
		}
		if isOurs(err) {
			return nil, wrapErr("open", p, err)
		}
		return nil, opErr("open", p, fmt.Errorf("%w: connect %s: %w", endpoint.ErrUnavailable, e.addr, err))
	}
	_ = c.SetDeadline(time.Now().Add(e.timeout))
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	fh, size, isDir, err := openDirect(c, rp)
	if !stop() {
		c.Close()
		return nil, wrapErr("open", p, ctxErr(ctx))
	}
	if err != nil {
		c.Close()
		switch {
		case errors.Is(err, errFallback), errors.Is(err, errTryGoHEP):
			return nil, err
		case serverCode(err) == codeIsDirectory:
			return nil, opErr("open", p, fmt.Errorf("%w: is a directory", endpoint.ErrRefused))
		case serverCode(err) != 0:
			return nil, wrapErr("open", p, err)
		}
		return nil, opErr("open", p, fmt.Errorf("%w: %w", endpoint.ErrUnavailable, err))
	}
	if isDir {
		c.Close()
		return nil, opErr("open", p, fmt.Errorf("%w: is a directory", endpoint.ErrRefused))
	}
	if off > size {
		c.Close()
		return nil, opErr("open", p, endpoint.BeyondEnd(off, size))
	}
	end := size
	if n >= 0 && off+n < size {
		end = off + n
	}
	r := &directReader{ctx: ctx, c: c, br: bufio.NewReaderSize(c, 64<<10), fh: fh, p: p,
		timeout: e.timeout, chunk: e.readChunk, next: off, end: end, size: size}
	r.stop = context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	return r, nil
}

// directReader streams one file over its own connection with up to
// directAhead kXR_reads of directChunk (Endpoint.readChunk) in flight.
// Its payload bytes may also be spliced from that connection
// (endpoint.Splicer), not copied: a proxy that forwards them to a
// socket never has them in its memory.
// It is not safe for concurrent use (io.Reader). Closing it closes the
// connection, which also makes the server close the file.
type directReader struct {
	ctx     context.Context
	c       net.Conn
	br      *bufio.Reader // over c: frame headers are small, bodies are read through it into the caller's buffer
	stop    func() bool   // stops the ctx watch on c
	fh      [4]byte
	p       string
	timeout time.Duration
	chunk   int64     // kXR_read length
	dl      time.Time // when the read deadline was last moved

	next, end int64 // next offset to ask for; where the caller wants to stop
	size      int64 // the file's size at open (endpoint.Versioned)
	sid       uint16
	inflight  []*directReq // asked for, in file order
	left      int          // bytes of the current frame (for inflight[0]) not yet read
	err       error        // sticky
	closed    bool
}

// Version is the size of the file the open found (kXR_retstat).
func (r *directReader) Version() endpoint.Info { return endpoint.Info{Size: r.size} }

// directReq is one kXR_read in flight.
type directReq struct {
	sid   [2]byte
	off   int64
	n     int64  // bytes asked for
	got   int64  // bytes the server announced so far
	final bool   // the last frame (kXR_ok) has been seen
	stash []byte // bytes that came before this request's turn, not yet returned
}

// fill keeps directAhead requests in flight, sent in one write.
func (r *directReader) fill() error {
	var buf []byte
	for len(r.inflight) < directAhead && r.next < r.end {
		n := min(r.chunk, r.end-r.next)
		r.sid++
		if r.sid == 0 || r.sid < 3 {
			r.sid = 3 // 1 and 2 were login and open
		}
		q := &directReq{off: r.next, n: n}
		binary.BigEndian.PutUint16(q.sid[:], r.sid)
		var req [24]byte
		copy(req[0:2], q.sid[:])
		binary.BigEndian.PutUint16(req[2:], xrdwire.ReqRead)
		copy(req[4:8], r.fh[:])
		binary.BigEndian.PutUint64(req[8:], uint64(r.next))
		binary.BigEndian.PutUint32(req[16:], uint32(n))
		buf = append(buf, req[:]...)
		r.inflight = append(r.inflight, q)
		r.next += n
	}
	if len(buf) == 0 {
		return nil
	}
	_ = r.c.SetWriteDeadline(time.Now().Add(r.timeout))
	r.recheck()
	_, err := r.c.Write(buf)
	return err
}

// moveDeadline gives the server Timeout from now to send more, unless it
// was given that recently.
func (r *directReader) moveDeadline() {
	now := time.Now()
	if now.Sub(r.dl) > r.timeout/deadlineSlack {
		r.dl = now
		_ = r.c.SetReadDeadline(now.Add(r.timeout))
		r.recheck()
	}
}

// recheck undoes a deadline just moved past the one ctx's end set (the
// AfterFunc may have run before the move).
func (r *directReader) recheck() {
	if r.ctx.Err() != nil {
		_ = r.c.SetDeadline(time.Unix(1, 0))
	}
}

// fail makes err sticky, wrapped for the caller, and returns it.
func (r *directReader) fail(err error) error {
	switch {
	case r.ctx.Err() != nil:
		err = ctxErr(r.ctx)
	case serverCode(err) != 0:
	case !isOurs(err):
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF // the server hung up mid-answer: never the end of the file
		}
		err = fmt.Errorf("%w: %w", endpoint.ErrUnavailable, err)
	}
	r.err = wrapErr("read", r.p, err)
	r.inflight = nil
	return r.err
}

// Read returns the next bytes of the range.
// upNext is the request whose answer comes next, the window filled
// first; io.EOF when the range is read, the reader's error once it
// failed.
func (r *directReader) upNext() (*directReq, error) {
	if r.err != nil {
		return nil, r.err
	}
	if err := r.fill(); err != nil {
		return nil, r.fail(err)
	}
	if len(r.inflight) == 0 {
		r.err = io.EOF
		return nil, io.EOF
	}
	return r.inflight[0], nil
}

func (r *directReader) Read(p []byte) (int, error) {
	if r.closed {
		return 0, opErr("read", r.p, fmt.Errorf("reader closed"))
	}
	if len(p) == 0 {
		return 0, nil
	}
	for {
		q, err := r.upNext()
		if err != nil {
			return 0, err
		}
		if len(q.stash) > 0 {
			n := copy(p, q.stash)
			q.stash = q.stash[n:]
			return n, nil
		}
		if r.left > 0 {
			r.moveDeadline()
			n, err := r.br.Read(p[:min(len(p), r.left)])
			r.left -= n
			if err != nil && n == 0 {
				return 0, r.fail(err)
			}
			return n, nil
		}
		if q.final {
			r.inflight = r.inflight[1:]
			if q.got < q.n {
				// The file shrank since open: what came was delivered.
				return 0, r.fail(fmt.Errorf("%w: %w: file ends at %d, range ends at %d",
					endpoint.ErrUnavailable, io.ErrUnexpectedEOF, q.off+q.got, r.end))
			}
			continue
		}
		if err := r.frame(); err != nil {
			return 0, r.fail(err)
		}
	}
}

// frame reads the next response header. A frame for inflight[0] is left
// in the stream (r.left) for Read to take into the caller's buffer; one
// for a later request is read into that request's stash.
func (r *directReader) frame() error {
	r.moveDeadline()
	var h [8]byte
	if _, err := io.ReadFull(r.br, h[:]); err != nil {
		return err
	}
	sid := [2]byte{h[0], h[1]}
	st := int(binary.BigEndian.Uint16(h[2:]))
	n := int64(binary.BigEndian.Uint32(h[4:]))
	var q *directReq
	for _, c := range r.inflight {
		if c.sid == sid {
			q = c
		}
	}
	if q == nil || q.final {
		return fmt.Errorf("answer on unexpected stream %v", sid)
	}
	switch st {
	case xrdwire.StatusOK, xrdwire.StatusOKSoFar:
	case xrdwire.StatusError:
		if n > xrdwire.MaxFrame {
			return fmt.Errorf("error answer of %d bytes", n)
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(r.br, body); err != nil {
			return err
		}
		se := xrdproto.ServerError{Code: codeServerError, Message: "malformed error"}
		if len(body) >= 4 {
			se.Code = xrdproto.ServerErrorCode(binary.BigEndian.Uint32(body))
			se.Message = strings.TrimRight(string(body[4:]), "\x00")
		}
		return se
	default:
		return fmt.Errorf("unexpected status %d on read", st)
	}
	if q.got+n > q.n {
		return fmt.Errorf("server sent %d bytes for a read of %d", q.got+n, q.n)
	}
	q.got += n
	q.final = st == xrdwire.StatusOK
	if q == r.inflight[0] {
		r.left = int(n)
		return nil
	}
	// Out of order: keep it until its turn (bounded by the request length).
	start := len(q.stash)
	q.stash = append(q.stash, make([]byte, n)...)
	_, err := io.ReadFull(r.br, q.stash[start:])
	return err
}

// Ready is endpoint.Splicer's: it waits for the next payload bytes of
// the kXR_read answers on the reader's own connection (reading the
// frame headers in between), and returns how many the socket has of
// them. Bytes that came out of order, before their turn, are in memory:
// ErrNoSplice, and Read hands them out.
func (r *directReader) Ready() (int64, error) {
	if r.closed {
		return 0, opErr("read", r.p, fmt.Errorf("reader closed"))
	}
	tc, ok := r.c.(*net.TCPConn)
	if !ok {
		return 0, endpoint.ErrNoSplice
	}
	for {
		q, err := r.upNext()
		if err != nil {
			return 0, err
		}
		switch {
		case len(q.stash) > 0:
			return 0, endpoint.ErrNoSplice
		case r.left > 0:
			r.moveDeadline()
			n, err := endpoint.Socket{Conn: tc, Buf: r.br}.Ready()
			if err != nil {
				return 0, r.fail(err)
			}
			return min(n, int64(r.left)), nil
		case q.final:
			r.inflight = r.inflight[1:]
			if q.got < q.n {
				return 0, r.fail(fmt.Errorf("%w: %w: file ends at %d, range ends at %d",
					endpoint.ErrUnavailable, io.ErrUnexpectedEOF, q.off+q.got, r.end))
			}
		default:
			if err := r.frame(); err != nil {
				return 0, r.fail(err)
			}
		}
	}
}

// SpliceTo is endpoint.Splicer's: it moves the next n bytes of the
// current answer frame, at most what Ready returned, from the socket to
// dst. A failure is sticky: where the stream stands is unknown.
func (r *directReader) SpliceTo(dst *net.TCPConn, n int64) (int64, error) {
	if r.err != nil {
		return 0, r.err
	}
	tc, ok := r.c.(*net.TCPConn)
	if !ok || r.closed || len(r.inflight) == 0 || len(r.inflight[0].stash) > 0 || r.left == 0 {
		return 0, endpoint.ErrNoSplice
	}
	r.moveDeadline()
	m, err := endpoint.Socket{Conn: tc, Buf: r.br}.SpliceTo(dst, min(n, int64(r.left)))
	r.left -= int(m)
	if err != nil {
		return m, r.fail(fmt.Errorf("splice: %w", err))
	}
	return m, nil
}

// WriteTo copies the rest of the range to w in large pieces, so io.Copy
// does not read a fast stream in small ones.
func (r *directReader) WriteTo(w io.Writer) (int64, error) {
	buf := make([]byte, 256<<10)
	var total int64
	for {
		n, err := r.Read(buf)
		if n > 0 {
			m, werr := w.Write(buf[:n])
			total += int64(m)
			if werr != nil {
				return total, werr
			}
		}
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// Close closes the file, then the connection. When no read is in flight
// it sends kXR_close and waits (within the timeout) for the answer: xrootd
// shares open file handles by path, and a handle left open until the
// server notices the dropped connection would serve a later open of the
// same path, after a Put replaced the file, the old bytes. A reader read
// to its end is such a reader too. With reads in flight (the caller
// stopped early) or after a failure the connection is just dropped. It
// always returns nil.
func (r *directReader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	r.stop()
	if len(r.inflight) == 0 && (r.err == nil || r.err == io.EOF) {
		req := make([]byte, 24)
		binary.BigEndian.PutUint16(req[0:], 4)
		binary.BigEndian.PutUint16(req[2:], xrdwire.ReqClose)
		copy(req[4:8], r.fh[:])
		_ = r.c.SetDeadline(time.Now().Add(r.timeout))
		if _, err := r.c.Write(req); err == nil {
			_, _, _ = xrdwire.ReadAnswer(r.br, [2]byte{0, 4})
		}
	}
	r.inflight = nil
	r.c.Close()
	return nil
}
