package http

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path"
	"strings"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/httpx/davxml"
)

var (
	_ endpoint.Renamer       = (*Endpoint)(nil)
	_ endpoint.SpaceReporter = (*Endpoint)(nil)
)

// Rename moves from to to with WebDAV MOVE (RFC 4918 §9.9), Overwrite: T
// so that a file at to is replaced, as rename(2) replaces it. nginx and
// the storage role rename in one step. What is at to is asked first: an
// Overwrite: T MOVE would delete a directory there (§9.9.3), and the
// contract refuses that (ErrExist), as it refuses a directory onto a
// file. A 409 (the parent of to is missing, §9.9.4; x/net/webdav says
// 403) makes the parent with MKCOL and asks once more.
func (e *Endpoint) Rename(ctx context.Context, from, to string) error {
	switch {
	case from == "/" || to == "/":
		return fail("rename", from, fmt.Errorf("%w: the root cannot be renamed or replaced", endpoint.ErrRefused))
	case strings.HasPrefix(to, from+"/"):
		return fail("rename", from, fmt.Errorf("%w: %s is inside it", endpoint.ErrRefused, to))
	}
	src, err := e.Stat(ctx, from)
	if err != nil {
		return fail("rename", from, err)
	}
	if from == to {
		return nil
	}
	dst, err := e.Stat(ctx, to)
	switch {
	case err == nil && (dst.IsDir || src.IsDir):
		what := "a file"
		if dst.IsDir {
			what = "a directory"
		}
		return fail("rename", to, fmt.Errorf("%w: %s is there", endpoint.ErrExist, what))
	case err != nil && !errors.Is(err, endpoint.ErrNotFound):
		return fail("rename", to, err)
	}
	// Both URLs end in "/" for a collection: nginx refuses a MOVE that
	// mixes the two forms.
	hdr := http.Header{"Destination": {e.url(to, src.IsDir).String()}, "Overwrite": {"T"}}
	for attempt := 0; ; attempt++ {
		resp, cancel, err := e.meta(ctx, "MOVE", e.url(from, src.IsDir), hdr, nil)
		if err != nil {
			return fail("rename", from, err)
		}
		code := resp.StatusCode
		if code/100 == 2 {
			drain(resp)
			cancel()
			return nil
		}
		se := statusError(resp, nil)
		cancel()
		if (code != http.StatusConflict && code != http.StatusForbidden) || attempt > 0 || path.Dir(to) == "/" {
			return fail("rename", from, se)
		}
		if code == http.StatusForbidden {
			// x/net/webdav answers a missing parent with 403.
			if _, err := e.Stat(ctx, path.Dir(to)); !errors.Is(err, endpoint.ErrNotFound) {
				return fail("rename", from, se)
			}
		}
		if err := e.Mkdir(ctx, path.Dir(to)); err != nil {
			return fail("rename", from, fmt.Errorf("%w; making the parent of %s: %w", se, to, err))
		}
	}
}

// Space asks for the RFC 4331 quota properties of the collection p (the
// root when p is not a collection): Free is quota-available-bytes, Used
// quota-used-bytes, Total their sum. A server that does not report them
// (nginx, the storage role, XrdHttp) wraps ErrUnsupported.
func (e *Endpoint) Space(ctx context.Context, p string) (endpoint.Space, error) {
	if e.noPropfind.Load() {
		return endpoint.Space{}, fail("space", p, fmt.Errorf("%w: server has no PROPFIND", endpoint.ErrUnsupported))
	}
	if in, err := e.Stat(ctx, p); err != nil || !in.IsDir {
		p = "/"
	}
	a, err := e.propfindFor(ctx, e.url(p, true), "0", davxml.QuotaBody)
	if err != nil {
		return endpoint.Space{}, fail("space", p, err)
	}
	for i := range a.ms.Responses {
		if avail, used, ok := a.ms.Responses[i].Quota(); ok {
			return endpoint.Space{Total: avail + used, Free: avail, Used: used, LargestFree: avail}, nil
		}
	}
	return endpoint.Space{}, fail("space", p, fmt.Errorf("%w: the server reports no RFC 4331 quota properties", endpoint.ErrUnsupported))
}
