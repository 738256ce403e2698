package server

import (
	"context"
	"fmt"
	"io/fs"

	"github.com/lakefed/lakefed/internal/buffer"
	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/federation"
	"github.com/lakefed/lakefed/internal/xrootd"
)

// bufferedDoor is what the federation's root:// door serves when the
// process runs a write buffer: the buffer's overlay of the federation
// (its files first, for reads, uploads, rm and mkdir), with the
// federation's own namespace operations (rename, rmdir, truncate,
// chmod, space, locate) where the buffer has no say. Under a buffered
// prefix a file may still be only in the buffer, or on its way to its
// endpoint: a rename, truncate or chmod there is refused (kXR_Unsupported
// with the reason) rather than done to an older copy the migration
// would then overwrite; rmdir checks emptiness through the overlay,
// which sees the buffered files too.
type bufferedDoor struct {
	xrootd.Namespace // the overlay
	ep               endpoint.Endpoint
	fed              *federation.Namespace
	buf              *buffer.Buffer
}

var (
	_ endpoint.Renamer       = (*bufferedDoor)(nil)
	_ endpoint.Truncater     = (*bufferedDoor)(nil)
	_ endpoint.Chmoder       = (*bufferedDoor)(nil)
	_ endpoint.DirRemover    = (*bufferedDoor)(nil)
	_ endpoint.SpaceReporter = (*bufferedDoor)(nil)
	_ endpoint.Locator       = (*bufferedDoor)(nil)

	// Without a write buffer the door serves the federation's
	// Namespace, whose open for read is one look-up. bufferedDoor is
	// not one: its overlay answers Stat.
	_ xrootd.ReplicaStater = (*federation.Namespace)(nil)
)

// newBufferedDoor wraps overlay, the buffer's view of fed.
func (s *Server) newBufferedDoor(overlay endpoint.Endpoint, fed *federation.Namespace) *bufferedDoor {
	return &bufferedDoor{Namespace: overlay.(xrootd.Namespace), ep: overlay, fed: fed, buf: s.buffer}
}

func (d *bufferedDoor) Name() string                               { return d.ep.Name() }
func (d *bufferedDoor) Delete(ctx context.Context, p string) error { return d.ep.Delete(ctx, p) }
func (d *bufferedDoor) Mkdir(ctx context.Context, p string) error  { return d.ep.Mkdir(ctx, p) }

func (d *bufferedDoor) refuse(op, p, pre string) error {
	return fmt.Errorf("%s %s: the write buffer holds %s, where a file may not have reached its endpoint yet; a %s there is not supported: %w",
		op, p, pre, op, endpoint.ErrUnsupported)
}

func (d *bufferedDoor) Rename(ctx context.Context, from, to string) error {
	for _, p := range []string{from, to} {
		if pre := d.buf.Holds(p, true); pre != "" {
			return d.refuse("mv", p, pre)
		}
	}
	return d.fed.Rename(ctx, from, to)
}

func (d *bufferedDoor) Truncate(ctx context.Context, p string, size int64) error {
	if pre := d.buf.Holds(p, false); pre != "" {
		return d.refuse("truncate", p, pre)
	}
	return d.fed.Truncate(ctx, p, size)
}

func (d *bufferedDoor) Chmod(ctx context.Context, p string, mode fs.FileMode) error {
	if pre := d.buf.Holds(p, false); pre != "" {
		return d.refuse("chmod", p, pre)
	}
	return d.fed.Chmod(ctx, p, mode)
}

// Rmdir refuses a directory the overlay lists entries in (buffered
// files count), then removes it through the federation.
func (d *bufferedDoor) Rmdir(ctx context.Context, p string) error {
	items, err := d.ep.List(ctx, p)
	if err != nil {
		return err
	}
	if len(items) > 0 {
		return fmt.Errorf("rmdir %s: %d entries (%s...): %w", p, len(items), items[0].Name, endpoint.ErrNotEmpty)
	}
	return d.fed.Rmdir(ctx, p)
}

func (d *bufferedDoor) Space(ctx context.Context, p string) (endpoint.Space, error) {
	return d.fed.Space(ctx, p)
}

func (d *bufferedDoor) Locations(ctx context.Context, p string) ([]endpoint.Location, error) {
	return d.fed.Locations(ctx, p)
}
