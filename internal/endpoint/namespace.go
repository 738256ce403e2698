package endpoint

// The namespace powers beyond the Endpoint core: rename, truncate, chmod,
// a directory removal that sees the whole namespace, capacity, and where
// a path is held. Kinds implement the ones their protocol has; callers
// find them with the helpers below, which answer ErrUnsupported for a
// kind without the power, never a half-done imitation (a rename made of
// a copy and a delete is not a rename: readers would see both names, and
// a failure between the two would leave both).

import (
	"context"
	"fmt"
	"io/fs"
	"net/url"
)

// ErrNotEmpty: a directory that holds entries was to be removed (Delete
// of a directory, rmdir). It is a refusal: errors.Is(err, ErrRefused)
// holds too.
var ErrNotEmpty = &classed{msg: "directory not empty", class: ErrRefused}

// Renamer is implemented by kinds that rename in one step on the server
// (rename(2), WebDAV MOVE, kXR_mv): a reader sees the old name or the
// new one, never both, never neither.
type Renamer interface {
	// Rename moves the file or directory from to to. A file at to is
	// replaced; a directory at to, or anything at to when from is a
	// directory, wraps ErrExist. Missing parents of to are created. A
	// missing from wraps ErrNotFound; to inside from wraps ErrRefused.
	Rename(ctx context.Context, from, to string) error
}

// Rename renames from to to on ep when its kind can (Renamer), else
// wraps ErrUnsupported.
func Rename(ctx context.Context, ep Endpoint, from, to string) error {
	if r, ok := ep.(Renamer); ok {
		return r.Rename(ctx, from, to)
	}
	return fmt.Errorf("%s: rename: %w", ep.Name(), ErrUnsupported)
}

// Truncater is implemented by kinds that can change a file's size in
// place (truncate(2), kXR_truncate).
type Truncater interface {
	// Truncate sets the size of the file p to size bytes: cut, or
	// extended with zero bytes. A missing p wraps ErrNotFound; a
	// directory or a negative size wraps ErrRefused.
	Truncate(ctx context.Context, p string, size int64) error
}

// Truncate sets the size of p on ep when its kind can (Truncater), else
// wraps ErrUnsupported.
func Truncate(ctx context.Context, ep Endpoint, p string, size int64) error {
	if t, ok := ep.(Truncater); ok {
		return t.Truncate(ctx, p, size)
	}
	return fmt.Errorf("%s: truncate: %w", ep.Name(), ErrUnsupported)
}

// Chmoder is implemented by kinds with POSIX permissions (chmod(2),
// kXR_chmod).
type Chmoder interface {
	// Chmod sets the permission bits (fs.ModePerm of mode) of the file
	// or directory p. A missing p wraps ErrNotFound.
	Chmod(ctx context.Context, p string, mode fs.FileMode) error
}

// Chmod sets p's permission bits on ep when its kind can (Chmoder), else
// wraps ErrUnsupported.
func Chmod(ctx context.Context, ep Endpoint, p string, mode fs.FileMode) error {
	if c, ok := ep.(Chmoder); ok {
		return c.Chmod(ctx, p, mode)
	}
	return fmt.Errorf("%s: chmod: %w", ep.Name(), ErrUnsupported)
}

// DirRemover is implemented by namespaces over several endpoints (the
// federation), whose Delete of a directory removes it endpoint by
// endpoint: Rmdir first checks the directory is empty across all of them.
// For a single endpoint, Delete of a directory is its rmdir (the
// Endpoint contract refuses one with entries).
type DirRemover interface {
	// Rmdir removes the empty directory p. A missing p wraps
	// ErrNotFound, a directory with entries ErrNotEmpty, a file
	// ErrRefused.
	Rmdir(ctx context.Context, p string) error
}

// Space is what a store says of its capacity, in bytes.
type Space struct {
	// Total is the capacity; Free what is left of it; Used what is
	// taken (Total - Free on a file system, or a quota's use).
	Total, Free, Used int64
	// LargestFree is the largest file that fits (XRootD's oss.maxf):
	// Free on a file system.
	LargestFree int64
}

// SpaceReporter is implemented by kinds that can tell their capacity
// (statfs(2), RFC 4331 quota properties, kXR_query space).
type SpaceReporter interface {
	// Space reports the capacity of the store that holds p (p need not
	// exist on a file system; a WebDAV server answers for a collection
	// that does).
	Space(ctx context.Context, p string) (Space, error)
}

// SpaceOf asks ep for the capacity behind p when its kind can tell it
// (SpaceReporter), else wraps ErrUnsupported.
func SpaceOf(ctx context.Context, ep Endpoint, p string) (Space, error) {
	if s, ok := ep.(SpaceReporter); ok {
		return s.Space(ctx, p)
	}
	return Space{}, fmt.Errorf("%s: space: %w", ep.Name(), ErrUnsupported)
}

// Location is one endpoint of a namespace that holds a path.
type Location struct {
	// Endpoint is the endpoint's name.
	Endpoint string
	// URL is the path's URL on the endpoint, in the endpoint's own
	// scheme (root:// for an XRootD server, http(s):// for WebDAV,
	// s3://, file://).
	URL *url.URL
	// Writable says the namespace writes to that endpoint (it is not
	// read-only in the federation).
	Writable bool
}

// Locator is implemented by namespaces over several endpoints (the
// federation) that can say which of them hold a path: the root:// door
// answers kXR_locate from it.
type Locator interface {
	// Locations lists the endpoints holding p, best first. For a
	// directory they are the endpoints that have it; a directory of the
	// namespace itself (a prefix no endpoint holds) has none. A missing
	// p wraps ErrNotFound.
	Locations(ctx context.Context, p string) ([]Location, error)
}
