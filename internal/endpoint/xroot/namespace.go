package xroot

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"strconv"
	"strings"

	"go-hep.org/x/hep/xrootd/xrdfs"
	"go-hep.org/x/hep/xrootd/xrdproto/query"

	"github.com/lakefed/lakefed/internal/endpoint"
)

var (
	_ endpoint.Renamer       = (*Endpoint)(nil)
	_ endpoint.Truncater     = (*Endpoint)(nil)
	_ endpoint.Chmoder       = (*Endpoint)(nil)
	_ endpoint.SpaceReporter = (*Endpoint)(nil)
)

// Rename moves from to to with kXR_mv, which the server does with
// rename(2): a file at to is replaced in one step. A directory at to, or
// anything at to when from is a directory, wraps ErrExist (asked first:
// servers differ there). xrootd makes the missing parents of to itself;
// for a server that does not (kXR_NotFound once from was seen), Rename
// makes them and asks again.
func (e *Endpoint) Rename(ctx context.Context, from, to string) error {
	rf, err := e.remote(from)
	if err != nil {
		return wrapErr("rename", from, err)
	}
	rt, err := e.remote(to)
	if err != nil {
		return wrapErr("rename", to, err)
	}
	switch {
	case rf == e.base || rt == e.base:
		return opErr("rename", from, fmt.Errorf("%w: the endpoint root cannot be renamed or replaced", endpoint.ErrRefused))
	case strings.HasPrefix(rt, rf+"/"):
		return opErr("rename", from, fmt.Errorf("%w: %s is inside it", endpoint.ErrRefused, to))
	}
	src, err := e.Stat(ctx, from)
	if err != nil {
		return err
	}
	if rf == rt {
		return nil
	}
	dst, err := e.Stat(ctx, to)
	switch {
	case err == nil && (dst.IsDir || src.IsDir):
		what := "a file"
		if dst.IsDir {
			what = "a directory"
		}
		return opErr("rename", to, fmt.Errorf("%w: %s is there", endpoint.ErrExist, what))
	case err != nil && !errors.Is(err, endpoint.ErrNotFound):
		return err
	}
	mv := func() error {
		return e.do(ctx, e.timeout, func(s *session) error { return s.cli.FS().Rename(s.sctx, rf, rt) })
	}
	err = mv()
	if serverCode(err) == codeNotFound {
		if _, serr := e.Stat(ctx, to); serr == nil {
			if _, serr := e.Stat(ctx, from); errors.Is(serr, endpoint.ErrNotFound) {
				return nil // a retry on a fresh session found its first try done
			}
		}
		if merr := e.Mkdir(ctx, parent(to)); merr != nil {
			return merr
		}
		err = mv()
	}
	return wrapErr("rename", from, err)
}

// Truncate sets the size of the file p with kXR_truncate.
func (e *Endpoint) Truncate(ctx context.Context, p string, size int64) error {
	if size < 0 {
		return opErr("truncate", p, fmt.Errorf("%w: negative size %d", endpoint.ErrRefused, size))
	}
	rp, err := e.remote(p)
	if err != nil {
		return wrapErr("truncate", p, err)
	}
	st, err := e.Stat(ctx, p)
	if err != nil {
		return err
	}
	if st.IsDir {
		return opErr("truncate", p, fmt.Errorf("%w: is a directory", endpoint.ErrRefused))
	}
	return wrapErr("truncate", p, e.do(ctx, e.timeout, func(s *session) error {
		return s.cli.FS().Truncate(s.sctx, rp, size)
	}))
}

// Chmod sets p's permission bits with kXR_chmod, whose mode bits are the
// POSIX ones (XProtocol's kXR_ur ... kXR_ox).
func (e *Endpoint) Chmod(ctx context.Context, p string, mode fs.FileMode) error {
	rp, err := e.remote(p)
	if err != nil {
		return wrapErr("chmod", p, err)
	}
	return wrapErr("chmod", p, e.do(ctx, e.timeout, func(s *session) error {
		return s.cli.FS().Chmod(s.sctx, rp, xrdfs.OpenMode(mode.Perm()))
	}))
}

// Space asks the server for the space behind p (kXR_query kXR_Qspace).
// xrootd answers "oss.cgroup=public&oss.space=T&oss.free=F&oss.maxf=M&
// oss.used=U&oss.quota=Q", the form xrdfs spaceinfo adds up.
func (e *Endpoint) Space(ctx context.Context, p string) (endpoint.Space, error) {
	rp, err := e.remote(p)
	if err != nil {
		return endpoint.Space{}, wrapErr("space", p, err)
	}
	var resp query.Response
	err = e.do(ctx, e.timeout, func(s *session) error {
		_, err := s.cli.Send(s.sctx, &resp, &query.Request{Query: query.Space, Args: []byte(rp)})
		return err
	})
	if err != nil {
		return endpoint.Space{}, wrapErr("space", p, err)
	}
	sp, err := ParseSpace(string(resp.Data))
	if err != nil {
		return endpoint.Space{}, opErr("space", p, fmt.Errorf("%w: %w", endpoint.ErrUnavailable, err))
	}
	return sp, nil
}

// ParseSpace reads a kXR_Qspace answer ("oss.space=T&oss.free=F&...").
// oss.space, oss.free and oss.used are required, as xrdfs spaceinfo
// requires them; oss.maxf defaults to oss.free.
func ParseSpace(ans string) (endpoint.Space, error) {
	v, err := url.ParseQuery(strings.TrimRight(ans, "\x00\n "))
	if err != nil {
		return endpoint.Space{}, fmt.Errorf("space answer %q: %w", ans, err)
	}
	num := func(k string) (int64, error) {
		n, err := strconv.ParseInt(v.Get(k), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("space answer %q: %s: %w", ans, k, err)
		}
		return n, nil
	}
	var sp endpoint.Space
	var errs [3]error
	sp.Total, errs[0] = num("oss.space")
	sp.Free, errs[1] = num("oss.free")
	sp.Used, errs[2] = num("oss.used")
	if err := errors.Join(errs[:]...); err != nil {
		return endpoint.Space{}, err
	}
	if sp.LargestFree, err = num("oss.maxf"); err != nil {
		sp.LargestFree = sp.Free
	}
	return sp, nil
}
