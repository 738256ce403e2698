package xrootd

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"go-hep.org/x/hep/xrootd/xrdfs"
	"go-hep.org/x/hep/xrootd/xrdproto"
	"golang.org/x/sys/unix"

	"github.com/lakefed/lakefed/internal/endpoint"
)

// turns runs the requests on one file handle one at a time, in the order
// the reader loop took their tickets.
type turns struct {
	mu        sync.Mutex
	cond      *sync.Cond
	next, now uint64
}

func (t *turns) take() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.next
	t.next++
	return n
}

func (t *turns) wait(n uint64) {
	t.mu.Lock()
	for t.now != n {
		t.cond.Wait()
	}
	t.mu.Unlock()
}

func (t *turns) done() {
	t.mu.Lock()
	t.now++
	t.cond.Broadcast()
	t.mu.Unlock()
}

// skip gives up ticket n without running: it waits for its turn and
// passes it on.
func (t *turns) skip(n uint64) {
	t.wait(n)
	t.done()
}

// file is one open file handle. Its I/O fields are used by one request
// at a time (turns); mu guards what stat and abort read beside them.
type file struct {
	turns turns
	c     *conn
	path  string
	ctx   context.Context // ends when the file is closed or the connection ends
	stop  context.CancelFunc

	// Read side: info from the open's Stat, and the reader kept for
	// sequential reads (pos is the offset its next byte has).
	info    endpoint.Info
	rc      io.ReadCloser
	pos     int64
	rcEnd   int64 // end of the range rc was opened for
	lastEnd int64 // end of the last read: a read starting there is sequential

	// Write side: the upload, stored by Put on close, and the bearer
	// token it was opened with (for the kXR_mv of a held upload);
	// createOnly when the token may create p but not replace it.
	token      string
	createOnly bool
	mu         sync.Mutex
	tmp        *os.File
	size       int64 // bytes up to the last one written
	failed     error // a write failed: close must not Put
}

func newFile(c *conn, p string) *file {
	f := &file{c: c, path: p, lastEnd: -1}
	f.turns.cond = sync.NewCond(&f.turns.mu)
	f.ctx, f.stop = context.WithCancel(c.ctx)
	return f
}

// stat describes the open file: as opened, or the upload so far.
func (f *file) stat() endpoint.Info {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.tmp != nil {
		return endpoint.Info{Name: f.path, Size: f.size}
	}
	return f.info
}

// abort drops the file: its reader, and its upload unstored.
func (f *file) abort() {
	f.stop()
	if f.rc != nil {
		f.rc.Close()
		f.rc = nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.tmp != nil {
		f.tmp.Close()
		os.Remove(f.tmp.Name())
		f.tmp = nil
	}
}

// file returns the open file with handle fh, or nil.
func (c *conn) file(fh uint32) *file {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.files[fh]
}

// addFile gives f a handle, or returns false at MaxFiles.
func (c *conn) addFile(f *file) (uint32, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.files == nil || len(c.files) >= c.s.opts.MaxFiles {
		return 0, false
	}
	for {
		c.nextFH++
		if _, ok := c.files[c.nextFH]; !ok {
			break
		}
	}
	c.files[c.nextFH] = f
	return c.nextFH, true
}

func (c *conn) dropFile(fh uint32) {
	c.mu.Lock()
	delete(c.files, fh)
	c.mu.Unlock()
}

// Open options that make an open a write.
const writeOpts = xrdfs.OpenOptionsDelete | xrdfs.OpenOptionsNew | xrdfs.OpenOptionsOpenUpdate |
	xrdfs.OpenOptionsOpenAppend | 0x8000 // kXR_open_wrto

// open answers kXR_open. For read it stats the file, then redirects to a
// root:// replica the client has not tried, or opens it here; for write
// (kXR_new, kXR_delete, kXR_open_updt...) it starts an upload that close
// stores with Put.
func (c *conn) open(h *header, data []byte) error {
	opts := xrdfs.OpenOptions(u16(h.params(), 2))
	p, cgi, err := splitPath(data)
	if err != nil {
		return c.sendFailure(h.sid(), "", codeArgInvalid, err)
	}
	if p == "/" {
		c.s.countError(classRefused)
		return c.sendError(h.sid(), codeIsDirectory, "/ is a directory")
	}
	key := "open " + p
	tok := c.tokenOf(cgi)
	write := opts&writeOpts != 0
	acts := []string{ActRead}
	if write {
		acts = []string{ActCreate, ActModify} // which one is needed depends on the Stat
	}
	if err := c.authorize(tok, p, acts...); err != nil {
		return c.refuse(h.sid(), err)
	}
	ctx, cancel := c.reqCtx(tok)
	defer cancel()
	info, err := c.s.ns.Stat(ctx, p)
	if write {
		return c.openWrite(h, p, tok, opts, err, info)
	}
	if err != nil {
		return c.sendFailure(h.sid(), key, codeArgInvalid, err)
	}
	if info.IsDir {
		c.s.countError(classRefused)
		return c.sendError(h.sid(), codeIsDirectory, p+" is a directory")
	}
	reps, err := c.s.ns.Replicas(ctx, p)
	if err != nil {
		return c.sendFailure(h.sid(), key, codeArgInvalid, err)
	}
	c.answered(key)
	if u, ok := redirectTarget(reps, cgi.Get("tried"), c.selfAddr()); ok {
		c.s.opens.Add(1)
		c.s.mOpens.Inc()
		c.s.redirects.Add(1)
		c.s.mRedirects.Inc()
		return c.send(h.sid(), uint16(xrdproto.Redirect), redirectBody(u, p))
	}
	f := newFile(c, p)
	f.info = info
	f.ctx = c.withBearer(f.ctx, tok) // its reads are the caller's
	fh, ok := c.addFile(f)
	if !ok {
		f.abort()
		c.s.countError(classRefused)
		return c.sendError(h.sid(), codeArgInvalid, fmt.Sprintf("too many open files on this connection (%d)", c.s.opts.MaxFiles))
	}
	c.s.opens.Add(1)
	c.s.mOpens.Inc()
	return c.send(h.sid(), uint16(xrdproto.Ok), openBody(fh, opts, p, info))
}

// openBody is the kXR_open answer: the handle, and with kXR_retstat (or
// kXR_compress) cpsize, cptype and the stat line.
func openBody(fh uint32, opts xrdfs.OpenOptions, p string, info endpoint.Info) []byte {
	b := binary.BigEndian.AppendUint32(nil, fh)
	if opts&(xrdfs.OpenOptionsReturnStatus|xrdfs.OpenOptionsCompress) == 0 {
		return b
	}
	b = append(b, 0, 0, 0, 0, 0, 0, 0, 0)
	if opts&xrdfs.OpenOptionsReturnStatus != 0 {
		b = append(b, statLine(p, info)...)
		b = append(b, 0)
	}
	return b
}

// openWrite starts an upload of p for the caller with token tok;
// statErr and info are what Stat said. Replacing a file needs
// ActModify, a new one ActCreate; a caller who may only create is
// checked again at close (see close).
func (c *conn) openWrite(h *header, p, tok string, opts xrdfs.OpenOptions, statErr error, info endpoint.Info) error {
	exists := statErr == nil
	createOnly := false
	if errors.Is(statErr, endpoint.ErrRefused) && !errors.Is(statErr, endpoint.ErrUnsupported) &&
		c.authorize(tok, p, ActRead) != nil && c.authorize(tok, p, ActModify) != nil {
		// A caller who may create but not read (storage.create alone)
		// is refused a look at the path by the endpoints themselves
		// when its token is passed on. Its upload goes on as a create:
		// the endpoint keeps it from replacing a file at the write, as
		// the door's auth would (the caller's token makes it If-None-
		// Match: * there).
		statErr = fmt.Errorf("%s: %w", statErr, endpoint.ErrNotFound)
	}
	if statErr == nil || errors.Is(statErr, endpoint.ErrNotFound) {
		act := ActCreate
		if exists {
			act = ActModify
		}
		if err := c.authorize(tok, p, act); err != nil {
			return c.refuse(h.sid(), err)
		}
		createOnly = !exists && c.authorize(tok, p, ActModify) != nil
	}
	switch {
	case statErr == nil && info.IsDir:
		c.s.countError(classRefused)
		return c.sendError(h.sid(), codeIsDirectory, p+" is a directory")
	case statErr == nil && opts&xrdfs.OpenOptionsNew != 0 && opts&xrdfs.OpenOptionsDelete == 0:
		c.s.countError(classRefused)
		return c.sendError(h.sid(), codeItExists, p+" exists (kXR_new); use kXR_delete (xrdcp -f) to replace it")
	case statErr == nil && opts&xrdfs.OpenOptionsDelete == 0:
		c.s.countError(classRefused)
		return c.sendError(h.sid(), codeUnsupported, p+" exists: lakefed cannot update files in place; open with kXR_delete (xrdcp -f) to replace it")
	case statErr != nil && !errors.Is(statErr, endpoint.ErrNotFound):
		// Whether the file exists is unknown: kXR_new cannot be kept.
		return c.sendFailure(h.sid(), "open "+p, codeNotAuthorized, statErr)
	}
	tmp, err := os.CreateTemp(c.s.opts.TempDir, "lakefed-xroot-upload-*")
	if err != nil {
		c.s.countError(classServer)
		return c.sendError(h.sid(), codeServerError, "upload buffer: "+err.Error())
	}
	f := newFile(c, p)
	f.tmp, f.token, f.createOnly = tmp, tok, createOnly
	fh, ok := c.addFile(f)
	if !ok {
		f.abort()
		c.s.countError(classRefused)
		return c.sendError(h.sid(), codeArgInvalid, fmt.Sprintf("too many open files on this connection (%d)", c.s.opts.MaxFiles))
	}
	c.s.opens.Add(1)
	c.s.mOpens.Inc()
	return c.send(h.sid(), uint16(xrdproto.Ok), openBody(fh, opts, p, endpoint.Info{Name: p}))
}

// readAt reads len(p) bytes of f at off, or fewer at the end of the
// file (n < len(p) with a nil error means EOF), from the handle's kept
// reader (see seek).
func (f *file) readAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	tmp := f.tmp
	f.mu.Unlock()
	if tmp != nil {
		n, err := tmp.ReadAt(p, off)
		if errors.Is(err, io.EOF) {
			err = nil
		}
		return n, err
	}
	size := f.info.Size
	if off >= size || len(p) == 0 {
		return 0, nil
	}
	want := min(int64(len(p)), size-off)
	if err := f.seek(off, want); err != nil {
		return 0, err
	}
	n, err := io.ReadFull(f.rc, p[:want])
	f.advance(off, int64(n))
	if err != nil {
		f.dropReader()
		return n, f.shortErr(err)
	}
	if _, ok := f.rc.(endpoint.RangeSeeker); !ok && f.pos >= f.rcEnd {
		f.dropReader() // its range is read; another needs a new Open
	}
	return n, nil
}

// seek makes the handle's reader read from off, with at least want bytes
// left in its range. A read that starts where the last one ended goes on
// with the reader kept from it, opened to the end of the file; any other
// read asks for exactly the range it needs. The reader is opened once
// per handle and then moved from range to range (endpoint.RangeSeeker:
// the federation's, which keeps its replica and failover state), so a
// read costs no new look-up; a namespace whose readers cannot move gets
// a new Open per range.
func (f *file) seek(off, want int64) error {
	if f.rc != nil && f.pos == off && off+want <= f.rcEnd {
		return nil
	}
	n, end := want, off+want
	if off == f.lastEnd {
		n, end = -1, f.info.Size
	}
	if s, ok := f.rc.(endpoint.RangeSeeker); ok {
		if err := s.SeekRange(off, n); err != nil {
			f.dropReader()
			return err
		}
		f.pos, f.rcEnd = off, end
		return nil
	}
	f.dropReader()
	ctx := f.ctx
	if _, ok := f.c.nc.(*net.TCPConn); ok {
		// kXR_read moves the bytes to the client by splice (spliceRead).
		ctx = endpoint.WithSplice(ctx)
	}
	rc, err := f.c.s.ns.Open(ctx, f.path, off, n)
	if err != nil {
		return err
	}
	// Every read of one handle is of the version its open saw: a file
	// replaced since must not lend its bytes, cut or padded to the old
	// size, to this handle.
	if v, ok := endpoint.VersionOf(rc); ok && !endpoint.SameVersion(f.info, v) {
		rc.Close()
		return fmt.Errorf("%w: %s changed since it was opened", endpoint.ErrUnavailable, f.path)
	}
	f.rc, f.pos, f.rcEnd = rc, off, end
	return nil
}

// advance records n bytes read at off from the kept reader.
func (f *file) advance(off, n int64) {
	f.pos += n
	f.lastEnd = off + n
}

// dropReader closes the kept reader: after a failure a read starts
// afresh with a new Open.
func (f *file) dropReader() {
	if f.rc != nil {
		f.rc.Close()
		f.rc = nil
	}
}

// shortErr is the error of a read that failed with err: an early end is
// a file shorter than the size its open saw.
func (f *file) shortErr(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: file shorter than its size %d", endpoint.ErrUnavailable, f.info.Size)
	}
	return err
}

// uploading reports whether f is open for writing.
func (f *file) uploading() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tmp != nil
}

// readScratch is what one read, pgread or readv answer works in: a part
// of file data and the head and vectors it is written with. Answers
// take one from Server.bufs and give it back, so a read allocates
// nothing.
type readScratch struct {
	buf  []byte           // readVBuf bytes of file data
	crcs []byte           // pgread: the CRC32C of each page of a part
	head [8 + 16 + 8]byte // a response header, or pgread's status head
	bufs net.Buffers      // the vectors of one writev
}

func newReadScratch() *readScratch {
	return &readScratch{
		buf:  make([]byte, readVBuf),
		crcs: make([]byte, 4*(readVBuf/pageSize+1)),
		bufs: make(net.Buffers, 0, 2*(readVBuf/pageSize+1)+1),
	}
}

// sendPart writes one response part from the scratch: status and
// data, whole, under the write lock.
func (c *conn) sendPart(sc *readScratch, sid [2]byte, status uint16, data []byte) error {
	putRespHeader(sc.head[:8], sid, status, len(data))
	sc.bufs = append(sc.bufs[:0], sc.head[:8], data)
	return c.sendRaw(sc.bufs)
}

// answeredRead is answered for a read of handle fh of p. A read that
// was told to wait (kXR_wait) and now succeeds is rare: the key is
// built only when some wait is counted.
func (c *conn) answeredRead(fh uint32, p string) {
	c.mu.Lock()
	waits := len(c.waits)
	c.mu.Unlock()
	if waits > 0 {
		c.answered(fmt.Sprintf("read %d %s", fh, p))
	}
}

// readFailure answers a read that failed with err.
func (c *conn) readFailure(h *header, f *file, err error) error {
	if f.ctx.Err() != nil {
		err = fmt.Errorf("%w: %w", endpoint.ErrUnavailable, err)
	}
	return c.sendFailure(h.sid(), fmt.Sprintf("read %d %s", h.fhandle(), f.path), codeArgInvalid, err)
}

// read answers kXR_read in parts of at most 2 MiB (kXR_oksofar, then
// kXR_ok), so a large read never needs a buffer of its size: spliced
// from the origin's socket when it can be (spliceRead), else copied
// through a pooled buffer.
func (c *conn) read(h *header, f *file) error {
	if f == nil {
		c.s.countError(classProtocol)
		return c.sendError(h.sid(), codeFileNotOpen, "read of a handle that is not open")
	}
	off := int64(u64(h.params(), 4))
	rlen := int64(int32(u32(h.params(), 12)))
	if off < 0 || rlen < 0 {
		c.s.countError(classProtocol)
		return c.sendError(h.sid(), codeArgInvalid, "negative offset or length")
	}
	sent, done, err := c.spliceRead(h, f, off, rlen)
	if done {
		return err
	}
	off += sent
	rlen -= sent
	sc := c.s.bufs.Get().(*readScratch)
	defer c.s.bufs.Put(sc)
	buf := sc.buf
	for {
		want := min(rlen, int64(len(buf)))
		n, err := f.readAt(buf[:want], off)
		if err != nil {
			return c.readFailure(h, f, err)
		}
		c.s.readBytes.Add(int64(n))
		c.s.mRead.Add(float64(n))
		rlen -= int64(n)
		off += int64(n)
		if int64(n) < want || rlen == 0 {
			c.answeredRead(h.fhandle(), f.path)
			return c.sendPart(sc, h.sid(), uint16(xrdproto.Ok), buf[:n])
		}
		if err := c.sendPart(sc, h.sid(), uint16(xrdproto.OkSoFar), buf[:n]); err != nil {
			return err
		}
	}
}

// spliceRead answers what it can of a kXR_read of rlen bytes at off with
// splice(2), from the kept reader's socket to the client's, so the bytes
// never enter the door's memory: over plain TCP, when the reader is an
// endpoint.Splicer (the federation's, reading a plain-HTTP replica).
// Each part is as large as what the reader has ready, at most 2 MiB:
// the write lock is held while the client takes the part, never while
// the origin is waited for. It returns the bytes sent and whether the
// answer is complete (its last part sent, or failed); the rest of an
// incomplete one goes through read's buffer (a failover to a replica
// that cannot splice).
func (c *conn) spliceRead(h *header, f *file, off, rlen int64) (int64, bool, error) {
	tc, ok := c.nc.(*net.TCPConn)
	total := min(rlen, f.info.Size-off)
	if !ok || total <= 0 || f.uploading() {
		return 0, false, nil
	}
	if err := f.seek(off, total); err != nil {
		return 0, true, c.readFailure(h, f, err)
	}
	sp, ok := f.rc.(endpoint.Splicer)
	if !ok {
		return 0, false, nil
	}
	var sent int64
	for sent < total {
		n, err := sp.Ready()
		if errors.Is(err, endpoint.ErrNoSplice) {
			return sent, false, nil
		}
		if err != nil {
			f.dropReader()
			return sent, true, c.readFailure(h, f, f.shortErr(err))
		}
		part := min(n, total-sent, readVBuf)
		status := uint16(xrdproto.OkSoFar)
		if sent+part == total {
			status = uint16(xrdproto.Ok)
		}
		m, err := c.sendSpliced(h.sid(), status, part, sp, tc)
		f.advance(off+sent, m)
		c.s.readBytes.Add(m)
		c.s.mRead.Add(float64(m))
		c.s.splicedBytes.Add(m)
		c.s.mSpliced.Add(float64(m))
		if err != nil || m < part {
			// The client was promised part bytes and got fewer: the
			// stream cannot be put back in step.
			f.dropReader()
			return sent + m, true, fmt.Errorf("xrootd: read %s: %d of %d bytes spliced: %w", f.path, m, part, cmp.Or(err, io.ErrShortWrite))
		}
		sent += part
	}
	c.answeredRead(h.fhandle(), f.path)
	return sent, true, nil
}

// sendSpliced writes one response part of n bytes: its head, then the
// bytes spliced from sp (which has them ready), whole, under the write
// lock and within IOTimeout.
func (c *conn) sendSpliced(sid [2]byte, status uint16, n int64, sp endpoint.Splicer, tc *net.TCPConn) (int64, error) {
	var head [8]byte
	putRespHeader(head[:], sid, status, int(n))
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = tc.SetWriteDeadline(time.Now().Add(c.s.opts.IOTimeout))
	if err := writeMore(tc, head[:]); err != nil {
		return 0, err
	}
	return sp.SpliceTo(tc, n)
}

// writeMore writes b to tc with MSG_MORE: the kernel holds it to go out
// with the spliced bytes that follow, not in a segment of its own.
func writeMore(tc *net.TCPConn, b []byte) error {
	sc, err := tc.SyscallConn()
	if err != nil {
		return err
	}
	var werr error
	err = sc.Write(func(fd uintptr) bool {
		for len(b) > 0 {
			n, err := unix.SendmsgN(int(fd), b, nil, nil, unix.MSG_MORE)
			switch {
			case err == unix.EINTR:
				continue
			case err == unix.EAGAIN:
				return false // wait until writable
			case err != nil:
				werr = err
				return true
			}
			b = b[n:]
		}
		return true
	})
	return cmp.Or(err, werr)
}

// pgread answers kXR_pgread: kXR_status parts, each with its file offset
// and its pages, every page's CRC32C before it, at most 2 MiB of data
// per part (XrdXrootdProtocol::do_PgRIO).
func (c *conn) pgread(h *header, f *file) error {
	if f == nil {
		c.s.countError(classProtocol)
		return c.sendError(h.sid(), codeFileNotOpen, "pgread of a handle that is not open")
	}
	off := int64(u64(h.params(), 4))
	rlen := int64(int32(u32(h.params(), 12)))
	if off < 0 || rlen <= 0 {
		c.s.countError(classProtocol)
		return c.sendError(h.sid(), codeArgInvalid, "pgread: invalid offset or length")
	}
	sc := c.s.bufs.Get().(*readScratch)
	defer c.s.bufs.Put(sc)
	// Parts of at most 511 pages; the pages go out as they were read,
	// each after its CRC (writev), without a copy.
	buf := sc.buf[:readVBuf-pageSize]
	for {
		// Parts end on page boundaries, so the next part's pages align.
		want := min(rlen, int64(len(buf))-off%pageSize)
		n, err := f.readAt(buf[:want], off)
		if err != nil {
			return c.readFailure(h, f, err)
		}
		c.s.readBytes.Add(int64(n))
		c.s.mRead.Add(float64(n))
		final := int64(n) < want || rlen == int64(n)
		var dlen int
		sc.bufs, dlen = appendPages(append(sc.bufs[:0], nil), sc.crcs, buf[:n], off)
		var info [8]byte
		binary.BigEndian.PutUint64(info[:], uint64(off))
		sc.bufs[0] = putStatusHead(sc.head[:], h.sid(), reqPgRead, final, info[:], dlen)
		if err := c.sendRaw(sc.bufs); err != nil {
			return err
		}
		if final {
			c.answeredRead(h.fhandle(), f.path)
			return nil
		}
		rlen -= int64(n)
		off += int64(n)
	}
}

// appendPages appends data, read from file offset off, to bufs as
// pgread sends it: each page's CRC32C (kept in crcs) before the page,
// pages aligned on file offsets, so the first may be short. It returns
// bufs and the bytes added.
func appendPages(bufs net.Buffers, crcs, data []byte, off int64) (net.Buffers, int) {
	first := pageSize - int(off%pageSize)
	total := 0
	for i := 0; len(data) > 0; i += 4 {
		n := min(first, len(data))
		first = pageSize
		binary.BigEndian.PutUint32(crcs[i:], crc32.Checksum(data[:n], castagnoli))
		bufs = append(bufs, crcs[i:i+4], data[:n])
		total += 4 + n
		data = data[n:]
	}
	return bufs, total
}

// readv answers kXR_readv: for each item of the list (fhandle, length,
// offset) its 16-byte head with the length read, then the bytes. Items
// are sent in kXR_oksofar parts of at most 2 MiB and never split; all
// must name one file. The items are read one after the other from the
// handle's kept reader.
func (c *conn) readv(h *header, data []byte) error {
	if len(data) == 0 || len(data)%16 != 0 || len(data)/16 > maxReadVItems {
		c.s.countError(classProtocol)
		return c.sendError(h.sid(), codeArgInvalid, fmt.Sprintf("readv list of %d bytes (16 per item, at most %d items)", len(data), maxReadVItems))
	}
	fh := u32(data, 0)
	for i := 0; i < len(data); i += 16 {
		rlen := int32(u32(data, i+4))
		if u32(data, i) != fh {
			c.s.countError(classProtocol)
			return c.sendError(h.sid(), codeArgInvalid, "readv items name several files")
		}
		if rlen < 0 || rlen > maxReadVItem || int64(u64(data, i+8)) < 0 {
			c.s.countError(classProtocol)
			return c.sendError(h.sid(), codeArgInvalid, fmt.Sprintf("readv item of %d bytes (at most %d)", rlen, maxReadVItem))
		}
	}
	f := c.file(fh)
	if f == nil {
		c.s.countError(classProtocol)
		return c.sendError(h.sid(), codeFileNotOpen, "readv of a handle that is not open")
	}
	f.turns.wait(f.turns.take())
	defer f.turns.done()
	sc := c.s.bufs.Get().(*readScratch)
	defer c.s.bufs.Put(sc)
	buf := sc.buf
	used := 0
	for i := 0; i < len(data); i += 16 {
		rlen := int(u32(data, i+4))
		off := int64(u64(data, i+8))
		if used+16+rlen > len(buf) {
			if err := c.sendPart(sc, h.sid(), uint16(xrdproto.OkSoFar), buf[:used]); err != nil {
				return err
			}
			used = 0
		}
		n, err := f.readAt(buf[used+16:used+16+rlen], off)
		if err != nil {
			return c.readFailure(h, f, err)
		}
		c.s.readBytes.Add(int64(n))
		c.s.mRead.Add(float64(n))
		copy(buf[used:], data[i:i+16])
		binary.BigEndian.PutUint32(buf[used+4:], uint32(n))
		used += 16 + n
	}
	c.answeredRead(fh, f.path)
	return c.sendPart(sc, h.sid(), uint16(xrdproto.Ok), buf[:used])
}

// write handles kXR_write and kXR_pgwrite in the reader loop: the data
// streams from the socket into the upload file, page by page for
// pgwrite, whose CRC32Cs are checked. A bad CRC fails the upload
// (kXR_ChkSumErr; close will not store it) rather than asking for the
// page again. It returns an error only when the connection must end.
func (c *conn) write(h *header) error {
	dlen := h.dlen()
	off := int64(u64(h.params(), 4))
	var tmp *os.File
	f := c.file(h.fhandle())
	if f != nil {
		f.turns.wait(f.turns.take())
		defer f.turns.done()
		f.mu.Lock()
		defer f.mu.Unlock()
		tmp = f.tmp
	}
	if tmp == nil || off < 0 {
		if _, err := io.CopyN(io.Discard, c.br, dlen); err != nil {
			return err
		}
		c.s.countError(classProtocol)
		if tmp == nil {
			return c.sendError(h.sid(), codeFileNotOpen, "write to a handle not open for writing")
		}
		return c.sendError(h.sid(), codeArgInvalid, "negative offset")
	}
	var n int64
	var err error
	if h.id() == reqPgWrite {
		n, err = pgwriteTo(tmp, c.br, off, dlen)
	} else {
		n, err = io.Copy(errWriter{io.NewOffsetWriter(tmp, off)}, io.LimitReader(c.br, dlen))
		if err == nil && n < dlen {
			err = io.ErrUnexpectedEOF
		}
	}
	if err != nil {
		var we *writeErr
		if !errors.As(err, &we) && !errors.Is(err, errBadCRC) {
			return err // the socket failed
		}
		// The upload failed, the connection did not: drop what is left
		// of the data to keep the stream in step, and fail the upload.
		if _, rerr := io.CopyN(io.Discard, c.br, dlen-n); rerr != nil {
			return rerr
		}
		if f.failed == nil {
			f.failed = err
		}
		if errors.Is(err, errBadCRC) {
			c.s.countError(classRefused)
			return c.sendError(h.sid(), codeChkSumErr, err.Error())
		}
		c.s.countError(classServer)
		return c.sendError(h.sid(), codeIOError, "upload buffer: "+err.Error())
	}
	written := n
	if h.id() == reqPgWrite {
		written = n - 4*int64(pageCount(off, dlen))
	}
	f.size = max(f.size, off+written)
	c.s.writtenBytes.Add(written)
	c.s.mWritten.Add(float64(written))
	if h.id() == reqPgWrite {
		var info [8]byte
		binary.BigEndian.PutUint64(info[:], uint64(off))
		return c.sendRaw(net.Buffers{statusHead(h.sid(), reqPgWrite, true, info[:], 0)})
	}
	return c.send(h.sid(), uint16(xrdproto.Ok))
}

// writeErr is a failure of the upload file, not of the socket.
type writeErr struct{ err error }

func (e *writeErr) Error() string { return e.err.Error() }
func (e *writeErr) Unwrap() error { return e.err }

// errWriter marks the errors of its writer as writeErr.
type errWriter struct{ w io.Writer }

func (e errWriter) Write(p []byte) (int, error) {
	n, err := e.w.Write(p)
	if err != nil {
		err = &writeErr{err}
	}
	return n, err
}

// errBadCRC is a pgwrite page whose CRC32C does not match its bytes.
var errBadCRC = errors.New("pgwrite page checksum mismatch")

// pageCount is how many pgwrite units (CRC + page) dlen bytes at off hold.
func pageCount(off, dlen int64) int {
	n := 0
	first := pageSize - off%pageSize
	for dlen > 0 {
		u := min(4+first, dlen)
		dlen -= u
		first = pageSize
		n++
	}
	return n
}

// pgwriteTo copies pgwrite data (CRC32C, page; the first page ends at a
// page boundary of the file) from r to w at off, checking each page. It
// returns the bytes consumed from r.
func pgwriteTo(w io.WriterAt, r io.Reader, off, dlen int64) (int64, error) {
	var unit [4 + pageSize]byte
	first := pageSize - off%pageSize
	var n int64
	for n < dlen {
		u := min(4+first, dlen-n)
		first = pageSize
		if u <= 4 {
			m, err := io.ReadFull(r, unit[:u])
			n += int64(m)
			if err != nil {
				return n, err
			}
			return n, errBadCRC
		}
		m, err := io.ReadFull(r, unit[:u])
		n += int64(m)
		if err != nil {
			return n, err
		}
		page := unit[4:u]
		if crc32.Checksum(page, castagnoli) != binary.BigEndian.Uint32(unit[:4]) {
			return n, errBadCRC
		}
		if _, err := w.WriteAt(page, off); err != nil {
			return n, &writeErr{err}
		}
		off += int64(len(page))
	}
	return n, nil
}

// sync answers kXR_sync: uploads are made durable by Put on close, so
// there is nothing to do but check the handle.
func (c *conn) sync(h *header, f *file) error {
	if f == nil {
		c.s.countError(classProtocol)
		return c.sendError(h.sid(), codeFileNotOpen, "sync of a handle that is not open")
	}
	return c.send(h.sid(), uint16(xrdproto.Ok))
}

// close answers kXR_close. For an upload it Puts the file and answers
// with the Put's outcome: only a complete, stored file gets kXR_ok; a
// failed write or Put leaves nothing visible and says why. An upload to
// a temporary name of lakefed's own root:// client is held instead,
// for the kXR_mv that follows (see hold).
func (c *conn) close(h *header, f *file) error {
	if f == nil {
		c.s.countError(classProtocol)
		return c.sendError(h.sid(), codeFileNotOpen, "close of a handle that is not open")
	}
	c.dropFile(h.fhandle())
	f.mu.Lock()
	tmp, size, failed := f.tmp, f.size, f.failed
	f.tmp = nil
	f.mu.Unlock()
	f.abort()
	if tmp == nil {
		return c.send(h.sid(), uint16(xrdproto.Ok))
	}
	if failed != nil {
		dropUpload(tmp)
		c.s.countError(classRefused)
		return c.sendError(h.sid(), codeIOError, "upload not stored: "+failed.Error())
	}
	if isHeldName(f.path) && c.hold(f.path, held{tmp, size, f.token}) {
		return c.send(h.sid(), uint16(xrdproto.Ok))
	}
	defer dropUpload(tmp)
	if f.createOnly {
		if err := c.stillNew(f.path, f.token); err != nil {
			return c.refuse(h.sid(), err)
		}
	}
	if err := c.put(f.path, f.token, tmp, size); err != nil {
		// No wait here: the upload file goes with this answer.
		return c.sendFailure(h.sid(), "", codeNotAuthorized, err)
	}
	return c.send(h.sid(), uint16(xrdproto.Ok))
}

// stillNew refuses the upload of a caller who may create p but not
// replace it, when p appeared after the open: Put has no "only if new".
// A file that appears between this Stat and the Put is the window left.
func (c *conn) stillNew(p, tok string) error {
	ctx, cancel := c.reqCtx(tok)
	defer cancel()
	if _, err := c.s.ns.Stat(ctx, p); err == nil {
		return fmt.Errorf("%s was created since the open, and this caller may not replace files", p)
	}
	return nil
}

// writeAllowed checks that tok may store an upload as p: ActModify when
// p exists, ActCreate when it does not. When the Stat fails (an
// endpoint down) a caller with both goes on, one with neither is
// refused, and one with just one of them gets the Stat's error: an
// outage, which the client may retry, never a refusal it would not.
func (c *conn) writeAllowed(tok, p string) error {
	ctx, cancel := c.reqCtx(tok)
	defer cancel()
	_, err := c.s.ns.Stat(ctx, p)
	switch {
	case err == nil:
		return c.authorize(tok, p, ActModify)
	case errors.Is(err, endpoint.ErrNotFound):
		return c.authorize(tok, p, ActCreate)
	}
	errCreate, errModify := c.authorize(tok, p, ActCreate), c.authorize(tok, p, ActModify)
	switch {
	case errCreate == nil && errModify == nil:
		return nil
	case errCreate != nil && errModify != nil:
		return errCreate
	}
	return err
}

// put stores size bytes of tmp as p for the caller with token tok.
func (c *conn) put(p, tok string, tmp *os.File, size int64) error {
	ctx, cancel := c.reqCtx(tok)
	defer cancel()
	return c.s.ns.Put(ctx, p, io.NewSectionReader(tmp, 0, size), size)
}

// dropUpload closes and removes an upload file.
func dropUpload(tmp *os.File) {
	tmp.Close()
	os.Remove(tmp.Name())
}

// held is a closed upload kept for a rename, with the bearer token of
// its open.
type held struct {
	tmp   *os.File
	size  int64
	token string
}

// isHeldName reports whether p is a temporary name of lakefed's own
// root:// client (internal/endpoint/xroot: ".name.lakefed-<16 hex>"
// beside the target). That client makes a Put atomic on any XRootD
// server by writing such a file, closing it and renaming it (kXR_mv)
// onto the target. The door's uploads are atomic already, and a rename
// through the namespace is bound to one endpoint: it keeps such an
// upload, unstored, until the kXR_mv names its real path, and drops it
// if none comes before the connection ends or a kXR_rm removes it.
func isHeldName(p string) bool {
	i := strings.LastIndexByte(p, '/')
	name := p[i+1:]
	j := strings.LastIndex(name, ".lakefed-")
	if !strings.HasPrefix(name, ".") || j < 2 || len(name)-j != len(".lakefed-")+16 {
		return false
	}
	for _, r := range name[j+len(".lakefed-"):] {
		if !strings.ContainsRune("0123456789abcdef", r) {
			return false
		}
	}
	return true
}

// hold keeps a closed upload under p, or returns false at MaxFiles held.
func (c *conn) hold(p string, u held) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.files == nil || len(c.held) >= c.s.opts.MaxFiles {
		return false
	}
	if old, ok := c.held[p]; ok {
		dropUpload(old.tmp)
	}
	c.held[p] = u
	return true
}

// takeHeld removes and returns the upload held under p.
func (c *conn) takeHeld(p string) (held, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	u, ok := c.held[p]
	delete(c.held, p)
	return u, ok
}

// rename answers kXR_mv. A held upload is stored under the new name;
// any other rename is the namespace's (move).
func (c *conn) rename(h *header, data []byte) error {
	n := int(u16(h.params(), 14))
	s := string(data)
	if n <= 0 || n >= len(s) || s[n] != ' ' {
		n = strings.IndexByte(s, ' ')
	}
	if n <= 0 {
		c.s.countError(classProtocol)
		return c.sendError(h.sid(), codeArgMissing, "kXR_mv needs two paths")
	}
	from, fromCGI, err1 := splitPath(data[:n])
	to, toCGI, err2 := splitPath(data[n+1:])
	if err := errors.Join(err1, err2); err != nil {
		return c.sendFailure(h.sid(), "", codeArgInvalid, err)
	}
	u, ok := c.takeHeld(from)
	if !ok {
		return c.move(h, from, to, fromCGI, toCGI)
	}
	defer dropUpload(u.tmp)
	// The upload was allowed under its temporary name; its real name is
	// decided now, with the token the kXR_mv carries, else the open's.
	tok := bearerToken(toCGI)
	if tok == "" {
		tok = u.token
	}
	if tok == "" {
		tok = c.tokenOf(nil)
	}
	if err := c.writeAllowed(tok, to); err != nil {
		if errors.Is(err, endpoint.ErrUnavailable) {
			return c.sendFailure(h.sid(), "", codeNotAuthorized, err)
		}
		return c.refuse(h.sid(), err)
	}
	if err := c.put(to, tok, u.tmp, u.size); err != nil {
		return c.sendFailure(h.sid(), "", codeNotAuthorized, err)
	}
	return c.send(h.sid(), uint16(xrdproto.Ok))
}
