package http

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/httpx"
	"github.com/lakefed/lakefed/internal/httpx/transport"
)

// Open reads n bytes of p from off (n < 0: to the end) with a ranged GET.
// off equal to the size gives an empty reader, off beyond it wraps
// ErrRefused, and a range running past the end is cut at the end.
//
// The Timeout bounds the wait for the answer's headers; the body is not
// bounded (large files), only ctx ends it. A body that ends early is an
// error of the reader: io.ErrUnexpectedEOF wrapped in ErrUnavailable.
//
// Servers that ignore Range and answer 200 are handled by skipping off
// bytes. XrdHttp 5.5.3 answers an open-ended range or one past the end with
// a broken 206 ("Content-Range: bytes 2--1/6", no body); Open then asks
// again for the exact range the Content-Range total allows.
func (e *Endpoint) Open(ctx context.Context, p string, off, n int64) (io.ReadCloser, error) {
	if off < 0 {
		return nil, fail("open", p, fmt.Errorf("%w: negative offset %d", endpoint.ErrRefused, off))
	}
	if n == 0 {
		in, err := e.Stat(ctx, p)
		if err != nil {
			return nil, fail("open", p, err)
		}
		if in.IsDir {
			return nil, fail("open", p, fmt.Errorf("%w: is a directory", endpoint.ErrRefused))
		}
		if off > in.Size {
			return nil, fail("open", p, endpoint.BeyondEnd(off, in.Size))
		}
		return emptyAt(in), nil
	}
	rc, total, err := e.get(ctx, p, off, n)
	if err == errRetryExact {
		end := total - 1
		if n >= 0 {
			end = min(end, off+n-1)
		}
		rc, _, err = e.get(ctx, p, off, end-off+1)
		if err == errRetryExact {
			err = fmt.Errorf("%w: server answers ranges inconsistently", endpoint.ErrUnavailable)
		}
	}
	if err != nil {
		return nil, fail("open", p, err)
	}
	return rc, nil
}

// errRetryExact asks Open to repeat a read with an exact, in-bounds range.
var errRetryExact = errors.New("retry with an exact range")

// get sends one GET. On errRetryExact the returned total is the file size.
func (e *Endpoint) get(ctx context.Context, p string, off, n int64) (io.ReadCloser, int64, error) {
	hdr := http.Header{}
	switch {
	case off == 0 && n < 0:
		// The whole file: no Range, so a server answers 200 even for an
		// empty file (where any range is unsatisfiable).
	case n < 0:
		hdr.Set("Range", fmt.Sprintf("bytes=%d-", off))
	default:
		hdr.Set("Range", fmt.Sprintf("bytes=%d-%d", off, off+n-1))
	}
	// Accept-Encoding identity: byte ranges of the file, never of a
	// compressed representation.
	hdr.Set("Accept-Encoding", "identity")

	ctx, cancel := context.WithCancel(ctx)
	timer := time.AfterFunc(e.timeout, cancel)
	resp, err := e.do(ctx, http.MethodGet, e.url(p, false), hdr, nil)
	if !timer.Stop() {
		if err == nil {
			resp.Body.Close()
		}
		cancel()
		return nil, 0, fmt.Errorf("%w: no answer within %v", endpoint.ErrUnavailable, e.timeout)
	}
	if err != nil {
		cancel()
		return nil, 0, err
	}
	abort := func(err error) (io.ReadCloser, int64, error) {
		drain(resp)
		cancel()
		return nil, 0, err
	}
	switch resp.StatusCode {
	case http.StatusOK:
		if isDir, err := e.isListing(ctx, p, resp); err != nil {
			return abort(err)
		} else if isDir {
			return abort(fmt.Errorf("%w: is a directory", endpoint.ErrRefused))
		}
		ver := e.versionOf(resp, resp.ContentLength)
		total := resp.ContentLength // -1 when unknown
		if total >= 0 && off > total {
			return abort(endpoint.BeyondEnd(off, total))
		}
		if off > 0 {
			// The server ignored Range: skip to off.
			if _, err := io.CopyN(io.Discard, resp.Body, off); err != nil {
				if err == io.EOF && total < 0 {
					return abort(endpoint.BeyondEnd(off, -1))
				}
				return abort(fmt.Errorf("%w: skipping to offset %d: %w", endpoint.ErrUnavailable, off, eofErr(err)))
			}
		}
		want := int64(-1)
		if total >= 0 {
			want = total - off
		}
		if n >= 0 && (want < 0 || n < want) {
			want = n
			if total < 0 {
				// Unknown length: a shorter body means the file is shorter.
				return &body{rc: resp.Body, remain: n, cancel: cancel, eofOK: true, ver: ver}, 0, nil
			}
		}
		return &body{rc: resp.Body, remain: want, cancel: cancel, ver: ver}, 0, nil
	case http.StatusPartialContent:
		first, last, total, ok := httpx.ParseContentRange(resp.Header.Get("Content-Range"))
		if !ok || first != off {
			return abort(fmt.Errorf("%w: bad Content-Range %q for offset %d", endpoint.ErrUnavailable, resp.Header.Get("Content-Range"), off))
		}
		if total >= 0 && (last < first || last >= total) {
			drain(resp)
			cancel()
			switch {
			case off > total:
				return nil, 0, endpoint.BeyondEnd(off, total)
			case off == total:
				return emptyAt(e.versionOf(resp, total)), 0, nil
			}
			return nil, total, errRetryExact
		}
		if last < first {
			return abort(fmt.Errorf("%w: bad Content-Range %q", endpoint.ErrUnavailable, resp.Header.Get("Content-Range")))
		}
		return &body{rc: resp.Body, remain: last - first + 1, cancel: cancel, ver: e.versionOf(resp, total)}, 0, nil
	case http.StatusRequestedRangeNotSatisfiable:
		_, _, total, _ := httpx.ParseContentRange(resp.Header.Get("Content-Range"))
		drain(resp)
		if total < 0 {
			in, err := e.Stat(ctx, p)
			cancel()
			if err != nil {
				return nil, 0, unwrapOp(err)
			}
			total = in.Size
		} else {
			cancel()
		}
		if off == total {
			return emptyAt(e.versionOf(resp, total)), 0, nil
		}
		return nil, 0, fmt.Errorf("%s: %w", resp.Status, endpoint.BeyondEnd(off, total))
	}
	se := statusError(resp, nil)
	cancel()
	return nil, 0, se
}

// isListing reports whether a 200 answer to GET p is a directory listing
// rather than the file: nginx redirects "dir" to "dir/", the storage role
// and XrdHttp answer with an HTML page (XrdHttp without a Content-Type).
// Only an answer that is HTML or untyped and starts with "<" costs a Stat
// to be sure. It may replace resp.Body with a buffered reader.
func (e *Endpoint) isListing(ctx context.Context, p string, resp *http.Response) (bool, error) {
	if strings.HasSuffix(resp.Request.URL.Path, "/") && p != "/" {
		return true, nil
	}
	ct := resp.Header.Get("Content-Type")
	if ct != "" && !strings.HasPrefix(ct, "text/html") {
		return false, nil
	}
	br := bufio.NewReaderSize(resp.Body, 512)
	resp.Body = struct {
		io.Reader
		io.Closer
	}{br, resp.Body}
	head, _ := br.Peek(64)
	if !bytes.HasPrefix(bytes.TrimLeft(head, " \t\r\n"), []byte("<")) {
		return false, nil
	}
	in, err := e.Stat(ctx, p)
	if err != nil {
		return false, unwrapOp(err)
	}
	return in.IsDir, nil
}

func eofErr(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// versionOf is what a GET answer says of the file: total is the whole
// file's size (a Content-Range total, or the length of a 200), -1 when
// the answer does not tell.
func (e *Endpoint) versionOf(resp *http.Response, total int64) endpoint.Info {
	in := endpoint.Info{Size: total, ETag: httpx.TrimETag(resp.Header.Get("ETag")), Strong: e.strong(resp.Header)}
	if t, err := http.ParseTime(resp.Header.Get("Last-Modified")); err == nil {
		in.ModTime = t
	}
	return in
}

// strong reports whether the ETag of an answer about a file names its
// bytes (endpoint.Info.Strong), and notes what it was worth for
// Validators. Only a lakefed storage role's is believed (its Server
// header, httpx.StorageServer: its tags hold the inode and the ctime). A
// W/ tag is weak by its own word; and nginx's ("hex(mtime)-hex(size)"),
// Apache's ("size-mtime", "inode-size-mtime") and x/net/webdav's are
// made of the modification time and the size, which a file replaced by
// one of the same size with its time kept (cp -p, touch -r) shares: they
// claim to be strong (no W/) and are not. Other servers' tags may be
// strong, but nothing in an answer tells them from those.
func (e *Endpoint) strong(h http.Header) bool {
	tag := h.Get("ETag")
	ok := tag != "" && !strings.HasPrefix(tag, "W/") && h.Get("Server") == httpx.StorageServer
	if tag == "" && h.Get("Server") == httpx.StorageServer {
		return false // an error answer (a 416) of a server whose tags are strong
	}
	v := validWeak
	if ok {
		v = validStrong
	}
	if e.validators.Load() != v {
		e.validators.Store(v)
	}
	return ok
}

// Validators is what the server's ETags are worth, from the last answer
// about a file (strong only for a lakefed storage role).
func (e *Endpoint) Validators() endpoint.Validators {
	switch e.validators.Load() {
	case validStrong:
		return endpoint.ValidatorsStrong
	case validWeak:
		return endpoint.ValidatorsWeak
	}
	return endpoint.ValidatorsUnknown
}

// empty is the reader of a read of nothing, at the end of a file of a
// known version.
type empty struct {
	io.Reader
	ver endpoint.Info
}

func emptyAt(ver endpoint.Info) io.ReadCloser {
	return empty{strings.NewReader(""), ver}
}

func (e empty) Close() error           { return nil }
func (e empty) Version() endpoint.Info { return e.ver }
func (b *body) Version() endpoint.Info { return b.ver }

// body is the reader Open returns: it hands out exactly remain bytes
// (remain < 0: until EOF) and turns an early end into an error.
type body struct {
	rc     io.ReadCloser
	remain int64
	cancel context.CancelFunc
	// eofOK: an early EOF is the end of the file, not a broken transfer
	// (a 200 of unknown length).
	eofOK bool
	err   error
	ver   endpoint.Info // the file the bytes come from (Versioned)
}

func (b *body) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.remain == 0 {
		return 0, io.EOF
	}
	if b.remain > 0 && int64(len(p)) > b.remain {
		p = p[:b.remain]
	}
	n, err := b.rc.Read(p)
	if b.remain > 0 {
		b.remain -= int64(n)
	}
	switch {
	case err == io.EOF && b.remain > 0 && !b.eofOK:
		b.err = fail("read", "", fmt.Errorf("%w: %w (%d bytes missing)", endpoint.ErrUnavailable, io.ErrUnexpectedEOF, b.remain))
		return n, b.err
	case err == io.EOF:
		b.err = io.EOF
	case err != nil:
		b.err = fail("read", "", fmt.Errorf("%w: %w", endpoint.ErrUnavailable, err))
		return n, b.err
	}
	if b.remain == 0 {
		return n, io.EOF
	}
	return n, b.err
}

// Ready is endpoint.Splicer's: the body can splice when it came on a
// connection of its own (transport.Own) with a known length.
func (b *body) Ready() (int64, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.remain == 0 {
		return 0, io.EOF
	}
	o, ok := b.rc.(*transport.OwnBody)
	if !ok || b.remain < 0 {
		return 0, endpoint.ErrNoSplice
	}
	n, err := o.Ready()
	if errors.Is(err, endpoint.ErrNoSplice) {
		return 0, err
	}
	if err != nil {
		b.err = fail("read", "", fmt.Errorf("%w: %w (%d bytes missing)", endpoint.ErrUnavailable, eofErr(err), b.remain))
		return 0, b.err
	}
	return min(n, b.remain), nil
}

// SpliceTo is endpoint.Splicer's.
func (b *body) SpliceTo(dst *net.TCPConn, n int64) (int64, error) {
	if b.err != nil {
		return 0, b.err
	}
	o, ok := b.rc.(*transport.OwnBody)
	if !ok || b.remain < 0 {
		return 0, endpoint.ErrNoSplice
	}
	n = min(n, b.remain)
	m, err := o.SpliceTo(dst, n)
	if errors.Is(err, endpoint.ErrNoSplice) {
		return m, err
	}
	b.remain -= m
	if err != nil {
		// Where the stream stands is unknown: splice may have taken
		// bytes it could not give.
		b.err = fail("read", "", fmt.Errorf("%w: splice: %w", endpoint.ErrUnavailable, err))
		return m, b.err
	}
	return m, nil
}

func (b *body) Close() error {
	err := b.rc.Close()
	b.cancel()
	return err
}
