package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path"
	"strings"

	"github.com/lakefed/lakefed/internal/buffer"
	"github.com/lakefed/lakefed/internal/config"
	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/endpoint/kinds"
	"github.com/lakefed/lakefed/internal/shared"
)

// bufferRole is the write buffer, in front of the federator on its
// listener; its mover runs until the role stops.
type bufferRole struct {
	goroutine
	s       *Server
	b       *buffer.Buffer
	targets []endpoint.Endpoint
}

func (r *bufferRole) start(ctx context.Context, s *Server) error {
	r.s = s
	bc := s.cfg.Buffer
	cfg := buffer.Config{
		Dir:                bc.Dir,
		MaxBytes:           int64(bc.MaxBytes),
		KeepAfterMigration: bc.KeepAfterMigration.D(),
		Parallel:           bc.Parallel,
		RetryInitial:       bc.Retry.Initial.D(),
		RetryMax:           bc.Retry.Max.D(),
		WhenFull:           bc.WhenFull,
	}
	if bc.KeepAfterMigration == 0 {
		cfg.KeepAfterMigration = config.DefaultKeepAfterMigration.D()
	}
	made := map[string]endpoint.Endpoint{} // one endpoint per target, shared by prefixes
	for _, p := range bc.Prefixes {
		bp := buffer.Prefix{Prefix: p.Prefix}
		for _, t := range p.Targets {
			ep := made[t]
			if ep == nil {
				var err error
				if ep, err = r.target(ctx, s, t); err != nil {
					r.close()
					return fmt.Errorf("buffer: target %s: %w", t, err)
				}
				made[t] = ep
				r.targets = append(r.targets, ep)
			}
			bp.Targets = append(bp.Targets, ep)
		}
		cfg.Prefixes = append(cfg.Prefixes, bp)
	}
	opts := buffer.Options{Log: s.log, Registerer: s.fed.Registry(), OnWrite: s.wrote, MayList: s.mayList()}
	if s.shared != nil {
		opts.Lake = &bufferLake{c: s.shared, self: s.cfg.Shared.Advertise, alone: s.cfg.Shared.WritesWhenDegraded == config.WritesLocal}
	}
	b, err := buffer.New(ctx, cfg, opts)
	if err != nil {
		r.close()
		return err
	}
	r.b, s.buffer = b, b
	s.sharedBuffer.Store(b)
	r.run(s.runCtx, b.Run)
	fmt.Fprintf(s.out, "write buffer in %s for %d prefixes, on the federator's listener\n", bc.Dir, len(bc.Prefixes))
	return nil
}

// target builds the endpoint a buffer target names: a federation
// endpoint by its name (seen through its prefix and path, so the buffer
// writes logical paths), else a URL.
func (r *bufferRole) target(ctx context.Context, s *Server, t string) (endpoint.Endpoint, error) {
	for _, ec := range s.cfg.Federation.Endpoints {
		if ec.Name != t {
			continue
		}
		ep, err := kinds.New(ctx, ec.Config, s.log)
		if err != nil {
			return nil, err
		}
		if ec.Prefix == "/" && ec.Path == "/" {
			return ep, nil
		}
		return &mapped{Endpoint: ep, prefix: ec.Prefix, path: ec.Path}, nil
	}
	return kinds.New(ctx, endpoint.Config{Name: t, URL: t}, s.log)
}

func (r *bufferRole) stop(ctx context.Context) error {
	if s := r.s; s != nil {
		s.sharedBuffer.Store(nil)
	}
	r.goroutine.stop(ctx)
	err := r.b.Close()
	r.close()
	return err
}

func (r *bufferRole) close() {
	for _, ep := range r.targets {
		if c, ok := ep.(io.Closer); ok {
			c.Close()
		}
	}
}

// wroteLocal is the process's write hook as the federator calls it
// (Options.OnWrite), for every write it carries or directs, over HTTP or
// a root:// door, before the writer's answer: the federator has dropped
// the path from its metadata (and told the federators it shares state
// with); the cache drops its blocks, so no reader in the process is
// served the old version.
func (s *Server) wroteLocal(p string) {
	if c := s.wroteCache.Load(); c != nil {
		c.Forget(p)
	}
}

// wrote is the write hook of the roles that write behind the federator
// (the buffer, for the writes and deletes it takes and the files it
// retires): through the federator, so its metadata, the cache and the
// federators sharing state all drop the path. Its error says the others
// could not be told.
func (s *Server) wrote(ctx context.Context, p string) error {
	if s.fed == nil {
		s.wroteLocal(p)
		return nil
	}
	return s.fed.Wrote(ctx, p)
}

// bufferLake is the write buffer's buffer.Lake: its holds in the shared
// state, as this process's federator's URL (shared.advertise), which
// the other federators send the held paths' readers and writers to.
type bufferLake struct {
	c    *shared.Client
	self string
	// alone: writes_when_degraded: local; while Redis cannot be reached
	// the buffer takes writes all the same, and tells the others when it
	// is back (Resync).
	alone bool
}

func (l *bufferLake) degradedAlone(err error) bool {
	return l.alone && errors.Is(err, shared.ErrDegraded)
}

func (l *bufferLake) Claim(ctx context.Context, p string) (bool, error) {
	ok, _, err := l.c.ClaimHold(ctx, p, l.self)
	if l.degradedAlone(err) {
		return true, nil
	}
	return ok, err
}

func (l *bufferLake) Hold(ctx context.Context, p string, seq int64, v endpoint.Info, deleted bool) error {
	err := l.c.PutHold(ctx, p, shared.Hold{Owner: l.self, Seq: seq, Deleted: deleted,
		Size: v.Size, ETag: v.ETag, ModTime: v.ModTime.UnixNano(), Sums: v.Checksums})
	switch {
	case errors.Is(err, shared.ErrHeldElsewhere):
		return fmt.Errorf("%w: %w", buffer.ErrHeldElsewhere, err)
	case l.degradedAlone(err):
		return nil
	}
	return err
}

// Release fails while Redis cannot be reached, whatever the policy: the
// file stays, migrated or deleted, until the others can be told.
func (l *bufferLake) Release(ctx context.Context, p string, seq int64) error {
	return l.c.DropHold(ctx, p, l.self, seq)
}

func (l *bufferLake) Held(ctx context.Context) ([]string, error) { return l.c.HeldBy(ctx, l.self) }

// mapped is a federation endpoint seen with logical paths: its prefix
// of the namespace lives at its path on the endpoint.
type mapped struct {
	endpoint.Endpoint
	prefix, path string
}

func (m *mapped) at(p string) string {
	rest := strings.TrimPrefix(p, m.prefix)
	if m.prefix != "/" && rest != "" && !strings.HasPrefix(rest, "/") {
		rest = "/" + rest
	}
	return path.Join("/", m.path, rest)
}

func (m *mapped) Stat(ctx context.Context, p string) (endpoint.Info, error) {
	return m.Endpoint.Stat(ctx, m.at(p))
}

func (m *mapped) List(ctx context.Context, p string) ([]endpoint.Info, error) {
	return m.Endpoint.List(ctx, m.at(p))
}

func (m *mapped) Open(ctx context.Context, p string, off, n int64) (io.ReadCloser, error) {
	return m.Endpoint.Open(ctx, m.at(p), off, n)
}

func (m *mapped) Put(ctx context.Context, p string, r io.Reader, size int64) error {
	return m.Endpoint.Put(ctx, m.at(p), r, size)
}

// PutIf keeps the endpoint's conditional writes (the buffer's mover
// relies on them), falling back as endpoint.PutIf does.
func (m *mapped) PutIf(ctx context.Context, p string, r io.Reader, size int64, cond endpoint.Cond) error {
	return endpoint.PutIf(ctx, m.Endpoint, m.at(p), r, size, cond)
}

func (m *mapped) Delete(ctx context.Context, p string) error {
	return m.Endpoint.Delete(ctx, m.at(p))
}

func (m *mapped) Mkdir(ctx context.Context, p string) error {
	return m.Endpoint.Mkdir(ctx, m.at(p))
}

func (m *mapped) Checksum(ctx context.Context, p, algo string) (string, error) {
	return endpoint.Checksum(ctx, m.Endpoint, m.at(p), algo)
}

func (m *mapped) RedirectURL(ctx context.Context, p string, op endpoint.Op) (*url.URL, error) {
	return endpoint.RedirectURL(ctx, m.Endpoint, m.at(p), op)
}

// namespace is the federation as the roles of the process read and write
// it: through the write buffer when there is one (its pending files
// first, its prefixes' writes buffered), else the federator's Namespace.
func (s *Server) namespace() endpoint.Endpoint {
	if s.buffer != nil {
		return s.buffer.Overlay(s.fed.Namespace())
	}
	return s.fed.Namespace()
}
