package xrootd

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"sync"

	"go-hep.org/x/hep/xrootd/xrdfs"
	"go-hep.org/x/hep/xrootd/xrdproto"

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
	var info endpoint.Info
	var reps []*url.URL
	rs, both := c.s.ns.(ReplicaStater)
	if both && !write {
		info, reps, err = rs.StatReplicas(ctx, p)
	} else {
		info, err = c.s.ns.Stat(ctx, p)
	}
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
	if !both {
		if reps, err = c.s.ns.Replicas(ctx, p); err != nil {
			return c.sendFailure(h.sid(), key, codeArgInvalid, err)
		}
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
