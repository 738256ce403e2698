package bench

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/lakefed/lakefed/internal/endpoint"
)

// errDirNotEmpty: a run's directory still holds something (a file that
// could not be removed, or one put there by someone else), so it stays.
var errDirNotEmpty = errors.New("bench: run directory not empty")

// removeEmptyDir removes the directory dir (a run's Root/runs/<tag>) if
// it is empty, once the run's files are gone; a missing dir is fine.
// Through the endpoint layer Delete removes only an empty directory. A
// plain HTTP target (a federator pinned to a site) is asked with PROPFIND
// Depth 1 first, since DELETE of a WebDAV collection removes its members
// too (RFC 4918 section 9.6.1).
func (t *Target) removeEmptyDir(ctx context.Context, dir string) error {
	if t.ep != nil {
		err := t.ep.Delete(ctx, dir)
		if errors.Is(err, endpoint.ErrNotFound) {
			return nil
		}
		return err
	}
	u := t.fileURL(strings.TrimSuffix(dir, "/") + "/")
	n, err := t.members(ctx, u.String())
	switch {
	case errors.Is(err, endpoint.ErrNotFound):
		return nil
	case err != nil:
		return err
	case n > 0:
		return fmt.Errorf("%w: %s", errDirNotEmpty, dir)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, u.String(), nil)
	if err != nil {
		return fmt.Errorf("bench: delete %s: %w", dir, err)
	}
	t.auth(req)
	resp, err := t.hc.Do(req)
	if err != nil {
		return netError("delete", dir, err)
	}
	defer resp.Body.Close()
	drain(resp.Body)
	if resp.StatusCode/100 != 2 && resp.StatusCode != http.StatusNotFound {
		return statusError("delete", dir, resp)
	}
	return nil
}

// members counts the members of the collection at rawURL with PROPFIND
// Depth 1: the answer lists the collection itself and each member
// (RFC 4918 section 9.1).
func (t *Target) members(ctx context.Context, rawURL string) (int, error) {
	const body = `<?xml version="1.0" encoding="utf-8"?><propfind xmlns="DAV:"><prop><resourcetype/></prop></propfind>`
	req, err := http.NewRequestWithContext(ctx, "PROPFIND", rawURL, strings.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("bench: propfind %s: %w", rawURL, err)
	}
	req.Header.Set("Depth", "1")
	req.Header.Set("Content-Type", "application/xml; charset=utf-8")
	t.auth(req)
	resp, err := t.hc.Do(req)
	if err != nil {
		return 0, netError("propfind", rawURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusMultiStatus {
		return 0, statusError("propfind", rawURL, resp)
	}
	var ms struct {
		Responses []struct{} `xml:"DAV: response"`
	}
	if err := xml.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&ms); err != nil {
		return 0, fmt.Errorf("bench: propfind %s: %w", rawURL, err)
	}
	return max(len(ms.Responses)-1, 0), nil
}
