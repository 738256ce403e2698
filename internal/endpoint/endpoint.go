// Package endpoint defines the one interface every kind of storage lakefed
// talks to implements (a local directory, a WebDAV/HTTP server, S3, XRootD,
// another lakefed federator), the errors they return, and the optional powers
// some kinds have.
//
// Paths given to an Endpoint are clean, slash-separated and absolute relative
// to the endpoint's root: "/" is the root itself, "/atlas/f.root" a file in
// it. Callers clean them with httpx.CleanPath first; kinds may rely on it.
//
//	ep, _ := kinds.New(ctx, endpoint.Config{Name: "site-a", URL: "http://127.0.0.1:9001/"}, nil)
//	info, err := ep.Stat(ctx, "/atlas/f.root")
//	switch {
//	case errors.Is(err, endpoint.ErrNotFound):    // the endpoint said no
//	case errors.Is(err, endpoint.ErrUnavailable): // could not ask: try another
//	}
package endpoint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"time"
)

// Endpoint is one storage endpoint. Every method may be called concurrently.
type Endpoint interface {
	// Name is the endpoint's name from the config; used in logs and metrics.
	Name() string

	// Stat describes path. A missing path gives an error wrapping ErrNotFound.
	// Checksums are filled only when the endpoint has them cheaply.
	Stat(ctx context.Context, path string) (Info, error)

	// List returns the entries directly inside dir, in no particular order.
	// A missing dir wraps ErrNotFound; a file (not a directory) wraps ErrRefused.
	List(ctx context.Context, dir string) ([]Info, error)

	// Open reads n bytes of path from offset off (n < 0: to the end). Like
	// io.ReaderAt, reading less than asked before EOF is an error of the
	// returned reader, not a short success. off beyond the size wraps ErrRefused.
	Open(ctx context.Context, path string, off, n int64) (io.ReadCloser, error)

	// Put stores r as path, replacing any file there and creating missing
	// parent directories. size is the exact length of r, or -1 when unknown.
	// The file becomes visible only complete: a failed Put leaves the old
	// content (or nothing) in place.
	Put(ctx context.Context, path string, r io.Reader, size int64) error

	// Delete removes the file (or empty directory) path. A missing path wraps
	// ErrNotFound.
	Delete(ctx context.Context, path string) error

	// Mkdir creates the directory path and its missing parents. An existing
	// directory is not an error.
	Mkdir(ctx context.Context, path string) error

	// Probe checks that the endpoint answers at all; it is the active health
	// check. It returns nil or an error wrapping ErrUnavailable.
	Probe(ctx context.Context) error
}

// Info describes one file or directory.
type Info struct {
	// Name is the base name ("f.root"); "/" for the root.
	Name    string
	Size    int64
	ModTime time.Time
	IsDir   bool
	// ETag is the server's entity tag, without quotes, or "".
	ETag string
	// Strong says the version named by Size, ModTime and ETag names the
	// bytes: two reads of the path whose versions are equal (SameBytes)
	// read the same bytes. A kind sets it only when it knows how its
	// server makes the tag: from the content (S3's MD5), or from more
	// than the modification time and the size (the storage role's inode
	// and ctime, a local file's fstat). It is false (weak) for a W/ tag,
	// for a tag of the modification time and size only, which stays the
	// same when a file is replaced by one of the same size with its time
	// kept (cp -p, touch -r, an rsync restore; nginx's "hex-hex", RFC
	// 9110 §8.8.1), for no tag at all (root://), and for a server the
	// kind cannot vouch for. Bytes of two reads of a weak version are
	// joined only after something else proved them one file: a checksum,
	// or bytes read again and compared.
	Strong bool
	// Checksums maps a lower-case algorithm name ("adler32", "md5",
	// "crc32c") to its value in the field's usual form: 8 lower-case hex
	// digits for adler32 and crc32c, 32 for md5. Nil when none are known.
	Checksums map[string]string

	// Mode holds the permission bits (fs.ModePerm), where the kind
	// knows them (posix); 0 when unknown.
	Mode fs.FileMode
	// Owner and Group name the owner and group, where the kind knows
	// them; "" when unknown.
	Owner, Group string
	// CTime (last status change) and ATime (last access), where the
	// kind knows them; zero when unknown.
	CTime, ATime time.Time
}

// Op says what a client wants to do with a URL it is redirected to.
type Op int

const (
	// OpRead is GET or HEAD.
	OpRead Op = iota
	// OpWrite is PUT.
	OpWrite
	// OpDelete is DELETE.
	OpDelete
)

func (o Op) String() string {
	switch o {
	case OpRead:
		return "read"
	case OpWrite:
		return "write"
	case OpDelete:
		return "delete"
	}
	return "unknown"
}

// Redirecter is implemented by endpoints a client can be sent to directly
// (HTTP servers, S3 with pre-signed URLs, XRootD with an HTTP door).
type Redirecter interface {
	// RedirectURL returns the URL a client should use for op on path. The
	// URL may carry credentials of limited life (a pre-signed S3 URL).
	RedirectURL(ctx context.Context, path string, op Op) (*url.URL, error)
}

// RedirectGate is implemented by Redirecters whose config decides whether
// they have URLs an HTTP client can follow: a root:// endpoint has them
// only with an HTTP door (http_url).
type RedirectGate interface {
	// CanRedirect reports whether RedirectURL gives such URLs.
	CanRedirect() bool
}

// CanRedirect reports whether clients can be sent to ep: it is a
// Redirecter, and says so when it is a RedirectGate. Endpoints that cannot
// are proxied whatever the mode.
func CanRedirect(ep Endpoint) bool {
	if _, ok := ep.(Redirecter); !ok {
		return false
	}
	if g, ok := ep.(RedirectGate); ok {
		return g.CanRedirect()
	}
	return true
}

// Presigner is implemented by endpoints whose redirect URLs carry a
// signature that expires (S3). The federator refuses one whose URLs expire
// sooner than its metadata cache keeps them, renews cached URLs before
// they do, and takes writes to it through itself (a pre-signed PUT would
// store the bytes without their adler32).
type Presigner interface {
	Redirecter
	// PresignExpiry is how long a redirect URL stays valid once made.
	PresignExpiry() time.Duration
}

// StatLister is implemented by kinds that can describe a directory's
// files in one request exactly as Stat describes each of them: the
// federator then answers the look-ups of many new paths in one directory
// with one listing rather than a Stat per path and endpoint. A kind
// declares it only where that is proven for the answer at hand (the http
// kind against a lakefed storage role that says each member of its
// listing is what a HEAD of it would answer, with the strong ETag its
// HEAD sends; not nginx, whose PROPFIND has no ETag; the root:// kind
// against an XRootD data server, whose kXR_dstat listing formats each
// stat line as its kXR_stat answer; not a load balancer, a redirector or
// a lakefed door, whose listing is gathered from the servers behind
// it), never because a List usually agrees.
type StatLister interface {
	// StatList lists dir, of at most limit entries. Each Info in files
	// is what Stat of dir/Name would return at that moment (size,
	// ModTime, ETag, Strong and checksums alike); unsure names entries
	// that exist but that Stat may describe otherwise (directories,
	// files the listing describes less fully), to be asked with Stat.
	// The listing is complete: a name in neither is not in dir. An error
	// wrapping ErrUnsupported says this answer cannot promise that, one
	// wrapping ErrTooLarge that dir has more than limit entries (the
	// caller uses Stat); a dir that does not exist wraps ErrNotFound.
	StatList(ctx context.Context, dir string, limit int) (files []Info, unsure []string, err error)
}

// Checksummer is implemented by endpoints that can compute or look up a
// checksum without the caller reading the whole file.
type Checksummer interface {
	// Checksum returns path's checksum for algo ("adler32", "md5",
	// "crc32c") in the form Info.Checksums documents. An algorithm the
	// endpoint does not offer wraps ErrUnsupported.
	Checksum(ctx context.Context, path, algo string) (string, error)
}

// Cond is the condition of a conditional Put (RFC 9110 §13.1.1,
// §13.1.2): what the caller saw at the path, which must still be there
// when the new file would take its place.
type Cond struct {
	// IfMatch, when not "", is the ETag (without quotes, as Info.ETag
	// gives it) the file at the path must still have: nothing replaced or
	// removed it since the caller looked.
	IfMatch string
	// IfNoneMatch says that nothing may be at the path (If-None-Match:
	// *): the caller saw nothing there, and nothing was made since.
	IfNoneMatch bool
}

// ConditionalPutter is implemented by endpoints that can commit a Put
// only if nothing newer happened on the path since the caller looked: a
// writer that saw version A replaces A, never a B that another writer
// (or a DELETE) put in between. A check and a separate Put cannot do
// that; the check must be made where the file is renamed into place,
// under the same lock.
type ConditionalPutter interface {
	// PutIf is Put, committed only if cond holds at the moment the new
	// file takes the place of what is at path, atomically with that
	// step: when it does not, nothing changes and the error wraps
	// ErrPrecondition. When the kind's server cannot evaluate conditions
	// so (it ignores them), PutIf reads nothing of r and returns an error
	// wrapping ErrUnsupported.
	PutIf(ctx context.Context, path string, r io.Reader, size int64, cond Cond) error
}

// PutIf stores r as path if cond holds: through ep's ConditionalPutter,
// atomically, when ep is one and its server can; else by a Stat that
// checks cond, then Put. The fallback is not atomic: a change between
// its Stat and the end of its Put is not seen. An IfMatch of a file that
// has no ETag never holds.
func PutIf(ctx context.Context, ep Endpoint, path string, r io.Reader, size int64, cond Cond) error {
	if cond.IfMatch != "" && cond.IfNoneMatch {
		return fmt.Errorf("endpoint: put %q on %s: If-Match and If-None-Match together: %w", path, ep.Name(), ErrPrecondition)
	}
	if cp, ok := ep.(ConditionalPutter); ok {
		err := cp.PutIf(ctx, path, r, size, cond)
		if !errors.Is(err, ErrUnsupported) {
			return err
		}
	}
	if cond.IfMatch != "" || cond.IfNoneMatch {
		in, err := ep.Stat(ctx, path)
		switch {
		case errors.Is(err, ErrNotFound):
			if cond.IfMatch != "" {
				return fmt.Errorf("endpoint: put %q on %s: if-match %q: nothing there: %w", path, ep.Name(), cond.IfMatch, ErrPrecondition)
			}
		case err != nil:
			return err
		case cond.IfNoneMatch:
			return fmt.Errorf("endpoint: put %q on %s: if-none-match: something is there: %w", path, ep.Name(), ErrPrecondition)
		case in.IsDir || in.ETag != cond.IfMatch:
			return fmt.Errorf("endpoint: put %q on %s: if-match %q: it is %q now: %w", path, ep.Name(), cond.IfMatch, in.ETag, ErrPrecondition)
		}
	}
	return ep.Put(ctx, path, r, size)
}

// Versioned is implemented by the readers Open returns when the kind
// learns, on opening, which version of the file the bytes come from: the
// size of the whole file (a Content-Range total, an fstat), its ETag and
// its modification time, as the server reported them with the bytes.
//
// A caller that ranked replicas from earlier metadata checks it before
// it sends anything: a replica replaced since it was described must not
// be served under the old description (its size would truncate or pad
// the new file), and a read that moves to another replica mid-stream
// must land on the same bytes. Fields the kind does not learn are zero,
// except Size, which is -1 when unknown (a chunked answer).
type Versioned interface {
	Version() Info
}

// VersionOf returns what rc says of the file it reads, and false when rc
// says nothing (its kind does not implement Versioned).
func VersionOf(rc io.Reader) (Info, bool) {
	if v, ok := rc.(Versioned); ok {
		return v.Version(), true
	}
	return Info{}, false
}

// SameVersion reports whether got, what an opened reader says of its
// file, can be the version want described: the same size, and the same
// ETag and modification time wherever both sides know them (times to the
// second: HTTP dates carry no more).
func SameVersion(want, got Info) bool {
	if got.Size >= 0 && got.Size != want.Size {
		return false
	}
	if got.ETag != "" && want.ETag != "" && got.ETag != want.ETag {
		return false
	}
	if !got.ModTime.IsZero() && !want.ModTime.IsZero() && got.ModTime.Unix() != want.ModTime.Unix() {
		return false
	}
	return true
}

// SameBytes reports whether got, what an opened reader says of its file,
// proves that it reads the bytes want described: both are strong (see
// Info.Strong) and the same version, ETag included.
func SameBytes(want, got Info) bool {
	return want.Strong && got.Strong && want.ETag != "" && got.ETag == want.ETag && SameVersion(want, got)
}

// Validators is what an endpoint's versions are worth (Info.Strong), for
// the status pages: which endpoints can be resumed on and cached from
// without a proof by checksum.
type Validators string

const (
	// ValidatorsUnknown: the endpoint has not described a file yet.
	ValidatorsUnknown Validators = "unknown"
	// ValidatorsStrong: its versions name the bytes.
	ValidatorsStrong Validators = "strong"
	// ValidatorsWeak: a file can change and keep its version; joining
	// two reads needs a checksum.
	ValidatorsWeak Validators = "weak"
)

// ValidatorReporter is implemented by kinds that know what their
// endpoint's versions are worth: by kind (S3, posix, root://) or from
// the answers seen (an HTTP server).
type ValidatorReporter interface {
	Validators() Validators
}

// ValidatorsOf returns what ep's versions are worth; ValidatorsUnknown
// when its kind does not say.
func ValidatorsOf(ep Endpoint) Validators {
	if v, ok := ep.(ValidatorReporter); ok {
		return v.Validators()
	}
	return ValidatorsUnknown
}

// RedirectURL returns ep's redirect URL for path, or ErrUnsupported when the
// kind cannot send clients anywhere (a local directory).
func RedirectURL(ctx context.Context, ep Endpoint, path string, op Op) (*url.URL, error) {
	if r, ok := ep.(Redirecter); ok {
		return r.RedirectURL(ctx, path, op)
	}
	return nil, ErrUnsupported
}

// Checksum returns path's checksum for algo: from the Checksummer when
// the kind is one (it may look the sum up or compute it), else from Stat
// when the endpoint reports it there, else ErrUnsupported.
func Checksum(ctx context.Context, ep Endpoint, path, algo string) (string, error) {
	if c, ok := ep.(Checksummer); ok {
		return c.Checksum(ctx, path, algo)
	}
	info, err := ep.Stat(ctx, path)
	if err != nil {
		return "", err
	}
	if v, ok := info.Checksums[algo]; ok {
		return v, nil
	}
	return "", ErrUnsupported
}
