package xrootd

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"os"
	"strings"

	"go-hep.org/x/hep/xrootd/xrdproto"

	"github.com/lakefed/lakefed/internal/endpoint"
)

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
