package federation

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"path"
	"slices"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/httpx"
)

// Namespace is the federation seen as one endpoint.Endpoint, for the
// roles of the same process that read and write through it: a cache
// whose origin is the federation, the root:// door, a write buffer's
// read-your-writes view. It keeps the HTTP front's guarantees, because
// it runs the same code:
//
//   - Open opens a replica before it returns and checks that the replica
//     still holds the version the metadata describes (a stale entry is
//     looked up again once); its reader is endpoint.Versioned, and moves
//     mid-stream only to a replica proven identical by a checksum.
//   - Errors keep the federation's classes: ErrNotFound only when every
//     endpoint that could hold the path said so, ErrUnavailable when one
//     could not answer.
//   - Put, Delete and Mkdir are the federator's own (Federator.Put,
//     Delete, Mkdir), which the front's PUT, DELETE and MKCOL adapt to
//     HTTP; the federator carries the bytes (a caller in the process
//     cannot follow a 307).
type Namespace struct{ f *Federator }

var (
	_ endpoint.Endpoint    = (*Namespace)(nil)
	_ endpoint.Checksummer = (*Namespace)(nil)
)

// Namespace returns the federation as an endpoint.
func (f *Federator) Namespace() *Namespace { return &Namespace{f: f} }

// Name is "federation", the name a cache's config gives this origin.
func (n *Namespace) Name() string { return "federation" }

// errOfStatus turns a look-up's status into the federation's error for p.
func errOfStatus(p string, status int) error {
	return fmt.Errorf("federation: %s: %w", p, endpoint.ClassOfStatus(status))
}

// found looks p up and returns its entry, or the error its status means.
func (n *Namespace) found(ctx context.Context, p string) (*snapshot, *entry, error) {
	s := n.f.snap.Load()
	e := n.f.lookup(ctx, s, p, 0)
	if e.status != http.StatusOK {
		return s, nil, errOfStatus(p, e.status)
	}
	return s, e, nil
}

// ranked is the live replicas of e in the entry's own order (primary
// first), not by the network: a role of the process reads through the
// namespace as one client, and a Stat and the Opens after it must read
// the same replica while the entry lives. Ranked by latency, replicas
// that disagree (a copy changed behind the federation's back) would
// answer a cache's Stat with one version and its fills with the other,
// each fill then found "changed", and the file never read.
func (n *Namespace) ranked(s *snapshot, e *entry) []ranked {
	rk := n.f.rank(s, e, netip.Addr{}, nil, nil)
	slices.SortStableFunc(rk, func(a, b ranked) int { return int(a.r.idx) - int(b.r.idx) })
	return rk
}

// Stat describes p as the first live replica of its entry does; a
// directory anywhere is a directory.
func (n *Namespace) Stat(ctx context.Context, p string) (endpoint.Info, error) {
	s, e, err := n.found(ctx, p)
	if err != nil {
		return endpoint.Info{}, err
	}
	if e.isDir {
		return endpoint.Info{Name: path.Base(p), IsDir: true, ModTime: e.modTime()}, nil
	}
	return infoOf(p, e, n.ranked(s, e))
}

// infoOf is Stat's answer for the file entry e of p, whose live replicas
// rk are in the entry's order.
func infoOf(p string, e *entry, rk []ranked) (endpoint.Info, error) {
	if len(rk) == 0 {
		return endpoint.Info{}, fmt.Errorf("federation: %s: every replica is down: %w", p, endpoint.ErrUnavailable)
	}
	it := rk[0].r.info()
	it.Name = path.Base(p)
	if sums := e.sums.Load(); sums != nil && it.Checksums == nil {
		it.Checksums = *sums
	}
	return it, nil
}

// StatReplicas is Stat and Replicas from one look-up (the door's open
// for read: xrootd.ReplicaStater).
func (n *Namespace) StatReplicas(ctx context.Context, p string) (endpoint.Info, []*url.URL, error) {
	s, e, err := n.found(ctx, p)
	if err != nil {
		return endpoint.Info{}, nil, err
	}
	if e.isDir {
		return endpoint.Info{Name: path.Base(p), IsDir: true, ModTime: e.modTime()}, nil, nil
	}
	rk := n.f.rank(s, e, netip.Addr{}, nil, nil)
	urls := replicaURLs(rk)
	slices.SortStableFunc(rk, func(a, b ranked) int { return int(a.r.idx) - int(b.r.idx) })
	it, err := infoOf(p, e, rk)
	if err != nil {
		return endpoint.Info{}, nil, err
	}
	return it, urls, nil
}

// List is the directory merged across endpoints, as PROPFIND lists it.
func (n *Namespace) List(ctx context.Context, dir string) ([]endpoint.Info, error) {
	l := n.f.list(ctx, n.f.snap.Load(), dir, 0)
	if l.status != http.StatusOK {
		return nil, errOfStatus(dir, l.status)
	}
	return l.items, nil
}

// Open reads n bytes of p from off (count < 0: to the end) from the best
// replica that still holds the version looked up, with the proxy's
// failover. A range past the end of the file is cut at the end.
func (n *Namespace) Open(ctx context.Context, p string, off, count int64) (io.ReadCloser, error) {
	for fresh := false; ; fresh = true {
		rc, err := n.open(ctx, p, off, count, fresh)
		if !errors.Is(err, errStale) || fresh {
			return rc, err
		}
	}
}

func (n *Namespace) open(ctx context.Context, p string, off, count int64, fresh bool) (io.ReadCloser, error) {
	s, e, err := n.found(ctx, p)
	if err != nil {
		return nil, err
	}
	if e.isDir {
		return nil, fmt.Errorf("federation: open %s: is a directory: %w", p, endpoint.ErrRefused)
	}
	rk := n.ranked(s, e)
	if len(rk) == 0 {
		return nil, fmt.Errorf("federation: %s: every replica is down: %w", p, endpoint.ErrUnavailable)
	}
	size := rk[0].r.ver.size
	if off < 0 || off > size {
		return nil, fmt.Errorf("federation: open %s: %w", p, endpoint.BeyondEnd(off, size))
	}
	if count < 0 || off+count > size {
		count = size - off
	}
	reps := make([]*replica, 0, len(rk))
	for _, x := range rk {
		if x.r.ver.size == size {
			reps = append(reps, x.r)
		}
	}
	fr := &failoverReader{ctx: ctx, f: n.f, s: s, p: p, idle: s.cfg.ProxyIdleTimeout.D()}
	if err := fr.openFirst(reps, httpx.Range{Start: off, Length: count}, fresh); err != nil {
		fr.Close()
		if errors.Is(err, errStale) {
			s.invalidate(p, 0)
		}
		return nil, err
	}
	if fr.changed {
		s.invalidate(p, 0)
	}
	// As the proxy does before its first byte: the served replica's
	// checksum, which a failover needs to prove another replica holds
	// the same bytes, is asked while the replica still answers.
	fr.waitSums(sumWait)
	return &namespaceReader{failoverReader: fr, size: size}, nil
}

// namespaceReader is a failoverReader that says which version it reads,
// can go on with another range of it (SeekRange) and can splice.
type namespaceReader struct {
	*failoverReader
	size int64
}

var (
	_ endpoint.Versioned   = (*namespaceReader)(nil)
	_ endpoint.RangeSeeker = (*namespaceReader)(nil)
	_ endpoint.Splicer     = (*namespaceReader)(nil)
)

// SeekRange reads n bytes from off next (n < 0: to the end), from the
// replica served or, when it fails, one proven to hold the same bytes:
// the look-up, the ranking and the checksum the open waited for are
// kept. A range running past the end is cut at the end.
func (r *namespaceReader) SeekRange(off, n int64) error {
	if off < 0 || off > r.size {
		return fmt.Errorf("federation: read %s: %w", r.p, endpoint.BeyondEnd(off, r.size))
	}
	if n < 0 || off+n > r.size {
		n = r.size - off
	}
	return r.seek(httpx.Range{Start: off, Length: n})
}

// Version is the version the first replica confirmed on opening; every
// byte read is of it.
func (r *namespaceReader) Version() endpoint.Info {
	v := r.ver
	v.Size = r.size
	return v
}

// Checksum returns p's checksum for algo from the best replica: known
// from the look-up, else asked of it (and kept for the next caller).
func (n *Namespace) Checksum(ctx context.Context, p, algo string) (string, error) {
	s, e, err := n.found(ctx, p)
	if err != nil {
		return "", err
	}
	if e.isDir {
		return "", fmt.Errorf("federation: checksum %s: is a directory: %w", p, endpoint.ErrRefused)
	}
	rk := n.ranked(s, e)
	for _, x := range rk {
		if sum := x.r.checksum(ctx, algo); sum != "" {
			return sum, nil
		}
	}
	return "", fmt.Errorf("federation: checksum %s %s: no replica has it: %w", algo, p, endpoint.ErrUnsupported)
}

// Replicas lists the URLs of p's replicas, best first: the URL a client
// is redirected to when there is one, else the endpoint's own URL of the
// file (a root:// data server without an HTTP door, a directory). The
// root:// door redirects to the root:// ones.
func (n *Namespace) Replicas(ctx context.Context, p string) ([]*url.URL, error) {
	s, e, err := n.found(ctx, p)
	if err != nil {
		return nil, err
	}
	return replicaURLs(n.f.rank(s, e, netip.Addr{}, nil, nil)), nil
}

// replicaURLs is the URLs of the replicas rk, in rk's order.
func replicaURLs(rk []ranked) []*url.URL {
	var out []*url.URL
	for _, x := range rk {
		rep := x.r
		raw := rep.url()
		if raw == "" {
			u, err := url.Parse(rep.m.url)
			if err != nil {
				continue
			}
			u.Path = path.Join("/", u.Path, rep.path)
			raw = u.String()
		}
		if u, err := url.Parse(raw); err == nil {
			out = append(out, u)
		}
	}
	return out
}

// Put writes p through the federator as a PUT would (Federator.Put),
// the federator carrying the bytes. size is the exact length of r, or
// -1 when unknown.
func (n *Namespace) Put(ctx context.Context, p string, r io.Reader, size int64) error {
	_, err := n.f.Put(ctx, p, r, size, WriteOptions{})
	return err
}

// Delete removes every replica of p, as DELETE does (Federator.Delete).
// A directory with entries is refused with endpoint.ErrNotEmpty, as the
// Endpoint contract says.
func (n *Namespace) Delete(ctx context.Context, p string) error {
	err := n.f.Delete(ctx, p, WriteOptions{})
	if errors.Is(err, endpoint.ErrRefused) && !errors.Is(err, endpoint.ErrNotEmpty) {
		// The endpoints' refusals are in the report, not in the chain.
		if items, lerr := n.List(ctx, p); lerr == nil && len(items) > 0 {
			return fmt.Errorf("%w: %w", err, endpoint.ErrNotEmpty)
		}
	}
	return err
}

// Mkdir creates p on every healthy writable endpoint that could hold it
// (Federator.Mkdir).
func (n *Namespace) Mkdir(ctx context.Context, p string) error { return n.f.Mkdir(ctx, p) }

// Probe answers whether any endpoint is up.
func (n *Namespace) Probe(context.Context) error {
	for _, m := range n.f.snap.Load().members {
		if m.h.Up() {
			return nil
		}
	}
	return fmt.Errorf("federation: every endpoint is down: %w", endpoint.ErrUnavailable)
}

// Forget drops what the metadata cache holds for p: another role of the
// process changed the path under the federator (a buffered file retired
// after its migration, whose replicas are now the answer).
func (f *Federator) Forget(p string) { f.snap.Load().invalidate(p, 0) }
