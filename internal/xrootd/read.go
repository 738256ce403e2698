package xrootd

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"time"

	"go-hep.org/x/hep/xrootd/xrdproto"
	"golang.org/x/sys/unix"

	"github.com/lakefed/lakefed/internal/endpoint"
)

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
