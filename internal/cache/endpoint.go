package cache

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/httpx"
)

// Endpoint is the cache seen as an endpoint.Endpoint, for the servers of
// the same process that are not HTTP (the root:// door): reads come from
// the cached blocks with the same checks as an HTTP GET, writes and
// listings go to the origin.
type Endpoint struct{ c *Cache }

var (
	_ endpoint.Endpoint    = (*Endpoint)(nil)
	_ endpoint.Checksummer = (*Endpoint)(nil)
)

// Endpoint returns the cache as an endpoint.
func (c *Cache) Endpoint() *Endpoint { return &Endpoint{c: c} }

// Name is "cache".
func (e *Endpoint) Name() string { return "cache" }

// Stat describes p as the origin last confirmed it (revalidated after
// RevalidateAfter); a directory is the origin's answer.
func (e *Endpoint) Stat(ctx context.Context, p string) (endpoint.Info, error) {
	f := e.c.get(p)
	err := e.c.revalidate(ctx, f, false)
	if errors.Is(err, errIsDir) {
		e.c.dropUnknown(f)
		return e.c.origin.Stat(ctx, p)
	}
	if err != nil {
		e.c.dropUnknown(f)
		return endpoint.Info{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	in := f.hdr.version()
	in.Name = path.Base(p)
	if f.hdr.Adler32 != "" {
		in.Checksums = map[string]string{httpx.Adler32: f.hdr.Adler32}
	}
	return in, nil
}

// dropUnknown forgets an entry that never described a file.
func (c *Cache) dropUnknown(f *file) {
	f.mu.Lock()
	known := f.known
	f.mu.Unlock()
	if !known {
		c.drop(f)
	}
}

// List is the origin's listing.
func (e *Endpoint) List(ctx context.Context, dir string) ([]endpoint.Info, error) {
	return e.c.origin.List(ctx, dir)
}

// Open reads n bytes of p from off through the cache (n < 0: to the
// end). The reader is endpoint.Versioned.
func (e *Endpoint) Open(ctx context.Context, p string, off, n int64) (io.ReadCloser, error) {
	c := e.c
	for attempt := 0; attempt < 3; attempt++ {
		f := c.get(p)
		if err := c.revalidate(ctx, f, false); err != nil {
			c.dropUnknown(f)
			if errors.Is(err, errChanged) {
				continue
			}
			if errors.Is(err, errIsDir) {
				return nil, fmt.Errorf("cache: open %s: is a directory: %w", p, endpoint.ErrRefused)
			}
			return nil, err
		}
		f.mu.Lock()
		if f.gone {
			f.mu.Unlock()
			continue
		}
		hdr, epoch := f.hdr, f.epoch
		if off < 0 || off > hdr.Size {
			f.mu.Unlock()
			return nil, fmt.Errorf("cache: open %s: %w", p, endpoint.BeyondEnd(off, hdr.Size))
		}
		d, err := os.Open(f.dataPath())
		if err != nil {
			f.mu.Unlock()
			c.drop(f)
			continue
		}
		f.pins++
		f.mu.Unlock()
		if n < 0 || off+n > hdr.Size {
			n = hdr.Size - off
		}
		r := &reader{rd: &rangeReader{c: c, f: f, d: d, hdr: hdr, epoch: epoch, ctx: ctx}, off: off, end: off + n}
		r.rd.seq = c.record(f, []httpx.Range{{Start: off, Length: n}})
		return r, nil
	}
	return nil, fmt.Errorf("cache: %s: the origin file keeps changing: %w", p, endpoint.ErrUnavailable)
}

// reader reads a range of one epoch of a cached file.
type reader struct {
	rd       *rangeReader
	off, end int64
	closed   bool
}

// Version is the version the blocks are of.
func (r *reader) Version() endpoint.Info { return r.rd.hdr.version() }

func (r *reader) Read(p []byte) (int, error) {
	if r.off >= r.end {
		return 0, io.EOF
	}
	want := min(int64(len(p)), r.end-r.off)
	// Up to the end of the block holding off: copy reads whole blocks.
	bs := r.rd.hdr.Block
	want = min(want, (r.off/bs+1)*bs-r.off)
	w := &sliceWriter{b: p[:0:want]}
	if err := r.rd.copy(w, httpx.Range{Start: r.off, Length: want}); err != nil {
		r.off += int64(len(w.b))
		if len(w.b) > 0 {
			return len(w.b), nil
		}
		if errors.Is(err, errChanged) {
			return 0, fmt.Errorf("cache: %s changed at the origin while read: %w", r.rd.f.path, endpoint.ErrUnavailable)
		}
		return 0, err
	}
	r.off += int64(len(w.b))
	return len(w.b), nil
}

func (r *reader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	r.rd.close()
	r.rd.d.Close()
	r.rd.c.unpin(r.rd.f)
	return nil
}

// sliceWriter fills a slice up to its capacity.
type sliceWriter struct{ b []byte }

func (s *sliceWriter) Write(p []byte) (int, error) {
	if len(s.b)+len(p) > cap(s.b) {
		return 0, io.ErrShortBuffer
	}
	s.b = append(s.b, p...)
	return len(p), nil
}

// Put writes through to the origin and forgets the cached version.
func (e *Endpoint) Put(ctx context.Context, p string, r io.Reader, size int64) error {
	err := e.c.origin.Put(ctx, p, r, size)
	if f := e.c.peek(p); f != nil {
		e.c.drop(f)
	}
	return err
}

// Delete deletes at the origin and forgets the cached version.
func (e *Endpoint) Delete(ctx context.Context, p string) error {
	err := e.c.origin.Delete(ctx, p)
	if f := e.c.peek(p); f != nil {
		e.c.drop(f)
	}
	return err
}

// Mkdir is the origin's.
func (e *Endpoint) Mkdir(ctx context.Context, p string) error { return e.c.origin.Mkdir(ctx, p) }

// Probe is the origin's.
func (e *Endpoint) Probe(ctx context.Context) error { return e.c.origin.Probe(ctx) }

// Checksum is the origin's adler32 recorded for the version cached, else
// the origin's answer.
func (e *Endpoint) Checksum(ctx context.Context, p, algo string) (string, error) {
	if algo == httpx.Adler32 {
		if in, err := e.Stat(ctx, p); err == nil {
			if s := in.Checksums[httpx.Adler32]; s != "" {
				return s, nil
			}
		}
	}
	return endpoint.Checksum(ctx, e.c.origin, p, algo)
}

// Replicas is empty: the cache serves its files itself.
func (e *Endpoint) Replicas(context.Context, string) ([]*url.URL, error) { return nil, nil }

// peek returns the entry of p, or nil.
func (c *Cache) peek(p string) *file {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.files[p]
}
