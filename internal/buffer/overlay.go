package buffer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/httpx"
)

// Overlay returns origin seen through the buffer: Stat, Open, List and
// Checksum see the files the buffer holds first (their newest version),
// and origin for everything else. It is the read-your-writes view for
// the roles that read through an endpoint (the cache's origin, the
// root:// door). Writes (Put, Delete, Mkdir) and Probe go to origin
// unchanged. Its readers implement endpoint.Versioned, so a reader that
// checks versions sees the buffered version it reads.
//
// The overlay is not a Redirecter even when origin is one: a client sent
// to origin would miss the buffered files.
func (b *Buffer) Overlay(origin endpoint.Endpoint) endpoint.Endpoint {
	return &overlay{b: b, origin: origin}
}

type overlay struct {
	b      *Buffer
	origin endpoint.Endpoint
}

var (
	_ endpoint.Endpoint    = (*overlay)(nil)
	_ endpoint.Checksummer = (*overlay)(nil)
)

func (o *overlay) Name() string { return o.origin.Name() }

// deletedErr is what a read of a path with a pending delete gets.
func deletedErr(op, p string) error {
	return &endpoint.OpError{Kind: "buffer", Op: op, Path: p, Err: fmt.Errorf("%w: deleted", endpoint.ErrNotFound)}
}

func (o *overlay) Stat(ctx context.Context, p string) (endpoint.Info, error) {
	if in, ok := o.b.stat(p); ok {
		return in, nil
	}
	if o.b.deleted(p) {
		return endpoint.Info{}, deletedErr("stat", p)
	}
	in, err := o.origin.Stat(ctx, p)
	if errors.Is(err, endpoint.ErrNotFound) && len(o.b.children(p)) > 0 {
		// A directory only buffered files are in so far.
		return endpoint.Info{Name: baseName(p), IsDir: true}, nil
	}
	return in, err
}

func (o *overlay) List(ctx context.Context, dir string) ([]endpoint.Info, error) {
	if _, ok := o.b.stat(dir); ok {
		return nil, &endpoint.OpError{Kind: "buffer", Op: "list", Path: dir, Err: fmt.Errorf("%w: not a directory", endpoint.ErrRefused)}
	}
	if o.b.deleted(dir) {
		return nil, deletedErr("list", dir)
	}
	kids, gone := o.b.children(dir), o.b.deletedIn(dir)
	items, err := o.origin.List(ctx, dir)
	if err != nil {
		if len(kids) > 0 && errors.Is(err, endpoint.ErrNotFound) {
			return kids, nil
		}
		return nil, err
	}
	if len(gone) > 0 {
		items = slices.DeleteFunc(items, func(it endpoint.Info) bool { return gone[it.Name] })
	}
	if len(kids) == 0 {
		return items, nil
	}
	idx := make(map[string]int, len(items))
	for i, it := range items {
		idx[it.Name] = i
	}
	for _, k := range kids {
		if i, ok := idx[k.Name]; ok {
			if !k.IsDir {
				items[i] = k
			}
			continue
		}
		items = append(items, k)
	}
	slices.SortFunc(items, func(a, c endpoint.Info) int { return strings.Compare(a.Name, c.Name) })
	return items, nil
}

func (o *overlay) Open(ctx context.Context, p string, off, n int64) (io.ReadCloser, error) {
	e := o.b.acquire(p)
	if e == nil {
		if o.b.deleted(p) {
			return nil, deletedErr("open", p)
		}
		return o.origin.Open(ctx, p, off, n)
	}
	o.b.mu.Lock()
	damaged := e.damaged
	o.b.mu.Unlock()
	if damaged != "" {
		o.b.release(e)
		return nil, &endpoint.OpError{Kind: "buffer", Op: "open", Path: p, Err: fmt.Errorf("%w: %s", endpoint.ErrUnavailable, damaged)}
	}
	if off < 0 || off > e.size {
		o.b.release(e)
		return nil, &endpoint.OpError{Kind: "buffer", Op: "open", Path: p,
			Err: endpoint.BeyondEnd(off, e.size)}
	}
	f, err := o.b.open(e)
	if err != nil {
		o.b.release(e)
		return nil, &endpoint.OpError{Kind: "buffer", Op: "open", Path: p, Err: fmt.Errorf("%w: %w", endpoint.ErrUnavailable, err)}
	}
	if n < 0 || off+n > e.size {
		n = e.size - off
	}
	r := &overlayReader{
		spoolReader: spoolReader{f: f, r: io.NewSectionReader(f, off, n), ver: e.info()},
		release:     func() { o.b.release(e) },
	}
	if off == 0 && n == e.size {
		r.check = o.b.newSumCheck(e, nil)
	}
	return r, nil
}

// overlayReader holds its version's file until closed.
type overlayReader struct {
	spoolReader
	release func()
	closed  bool
}

func (r *overlayReader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	err := r.f.Close()
	r.release()
	return err
}

func (o *overlay) Checksum(ctx context.Context, p, algo string) (string, error) {
	if o.b.deleted(p) {
		return "", deletedErr("checksum", p)
	}
	if in, ok := o.b.stat(p); ok {
		if v, ok := in.Checksums[algo]; ok {
			return v, nil
		}
		if !httpx.KnownAlgorithm(algo) {
			return "", fmt.Errorf("buffer: checksum %q: %s: %w", p, algo, endpoint.ErrUnsupported)
		}
		rc, err := o.Open(ctx, p, 0, -1)
		if err != nil {
			return "", err
		}
		defer rc.Close()
		sums, _, err := httpx.Sums(rc, algo)
		if err != nil {
			return "", &endpoint.OpError{Kind: "buffer", Op: "checksum", Path: p, Err: fmt.Errorf("%w: %w", endpoint.ErrUnavailable, err)}
		}
		return sums[algo], nil
	}
	return endpoint.Checksum(ctx, o.origin, p, algo)
}

// Put under a buffered prefix is a buffered write, acknowledged (nil)
// once durable, journaled and shown to the lake, as a PUT through Wrap;
// when the buffer is full it goes to origin with when_full: direct, else
// fails with ErrUnavailable. Elsewhere, and where another process of the
// lake holds the path (Lake.Claim), it goes to origin.
func (o *overlay) Put(ctx context.Context, p string, r io.Reader, size int64) error {
	pre := o.b.prefixOf(p)
	if pre == nil {
		return o.origin.Put(ctx, p, r, size)
	}
	fail := func(class error, msg string) error {
		return &endpoint.OpError{Kind: "buffer", Op: "put", Path: p, Err: fmt.Errorf("%w: %s", class, msg)}
	}
	if p == "/" {
		return fail(endpoint.ErrRefused, "is the root")
	}
	if msg := o.b.conflict(p); msg != "" {
		return fail(endpoint.ErrRefused, msg)
	}
	unlock := o.b.paths.lock(p)
	defer unlock()
	switch mine, err := o.b.claim(ctx, p); {
	case err != nil:
		return fail(endpoint.ErrUnavailable, "not taken: the other processes of the lake cannot be told of it: "+err.Error())
	case !mine:
		return o.origin.Put(ctx, p, r, size)
	}
	e, _, err := o.b.accept(ctx, p, pre, r, size, nil, false)
	if err != nil {
		o.b.unclaim(ctx, p)
	}
	switch {
	case err == nil:
		if err := o.b.publish(ctx, e, false); err != nil {
			return notTold(p, err)
		}
		return nil
	case err == errFull && o.b.cfg.WhenFull == WhenFullDirect:
		o.b.m.rejected.Inc()
		return o.origin.Put(ctx, p, r, size)
	case err == errFull:
		o.b.m.rejected.Inc()
		return fail(endpoint.ErrUnavailable, "buffer full")
	}
	code, msg, _ := httpx.StatusOf(err)
	if code < 500 {
		return fail(endpoint.ErrRefused, msg)
	}
	o.b.log.ErrorContext(ctx, "buffer a put", "path", p, "err", err)
	return fail(endpoint.ErrUnavailable, msg)
}

// Delete of a path the buffer holds is the buffer's DELETE (see
// serveDelete): origin's delete first; when it deleted, found nothing or
// could not reach a target, a pending delete is journaled, which the
// mover carries to the targets, and Delete returns nil (the path is gone
// for every reader of the buffer); a refusal is returned and changes
// nothing. A path with a pending delete is not found. Other paths go to
// origin.
func (o *overlay) Delete(ctx context.Context, p string) error {
	pre := o.b.prefixOf(p)
	if pre == nil {
		return o.origin.Delete(ctx, p)
	}
	unlock := o.b.paths.lock(p)
	defer unlock()
	o.b.mu.Lock()
	e := o.b.cur[p]
	o.b.mu.Unlock()
	switch {
	case e == nil:
		return o.origin.Delete(ctx, p)
	case e.deleting():
		return deletedErr("delete", p)
	}
	err := o.origin.Delete(ctx, p)
	if class := endpoint.Class(err); class == endpoint.ErrRefused {
		return err
	}
	return o.b.markDeleted(ctx, p, pre)
}

func (o *overlay) Mkdir(ctx context.Context, p string) error { return o.origin.Mkdir(ctx, p) }
func (o *overlay) Probe(ctx context.Context) error           { return o.origin.Probe(ctx) }

// Replicas lists the origin's replica URLs of p (for a root:// door to
// redirect to), and none while the buffer holds p: its bytes are here.
func (o *overlay) Replicas(ctx context.Context, p string) ([]*url.URL, error) {
	if _, ok := o.b.stat(p); ok || o.b.deleted(p) {
		return nil, nil
	}
	if r, ok := o.origin.(interface {
		Replicas(context.Context, string) ([]*url.URL, error)
	}); ok {
		return r.Replicas(ctx, p)
	}
	return nil, nil
}
