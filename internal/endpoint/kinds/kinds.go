// Package kinds is the one explicit table from a URL scheme to the endpoint
// kind that serves it. It lives apart from package endpoint so that the
// kinds can import endpoint without a cycle, and it is a plain switch rather
// than init-time self-registration: with a handful of kinds, explicit beats
// magic (see STYLE.md).
//
//	ep, err := kinds.New(ctx, endpoint.Config{Name: "site-a", URL: "davs://se.example.org/atlas/"}, log)
//	if err != nil { return err }     // bad URL, unsupported scheme, bad CA file
//	info, err := ep.Stat(ctx, "/f.root")
package kinds

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"

	"github.com/lakefed/lakefed/internal/endpoint"
	httpep "github.com/lakefed/lakefed/internal/endpoint/http"
	"github.com/lakefed/lakefed/internal/endpoint/posix"
	"github.com/lakefed/lakefed/internal/endpoint/s3"
	"github.com/lakefed/lakefed/internal/endpoint/upstream"
	"github.com/lakefed/lakefed/internal/endpoint/xroot"
)

// Schemes lists the URL schemes New accepts, for help texts and errors.
var Schemes = []string{"file", "http", "https", "dav", "davs", "s3", "root", "xroot", "lakefed", "lakefeds"}

// New builds the endpoint cfg.URL names, choosing the kind by the URL's
// scheme: file → posix; http, https, dav, davs → http; s3 → s3; root,
// xroot → xroot; lakefed, lakefeds → upstream (another lakefed federator).
// Any other scheme is an "unsupported scheme" error. log nil means slog.Default().
func New(ctx context.Context, cfg endpoint.Config, log *slog.Logger) (endpoint.Endpoint, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("endpoint %s: url: %w", cfg.Name, err)
	}
	switch strings.ToLower(u.Scheme) {
	case "file":
		return posix.New(ctx, cfg, log)
	case "http", "https", "dav", "davs":
		return httpep.New(ctx, cfg, log)
	case "s3":
		return s3.New(ctx, cfg, log)
	case "root", "xroot":
		return xroot.New(ctx, cfg, log)
	case "lakefed", "lakefeds":
		return upstream.New(ctx, cfg, log)
	case "":
		return nil, fmt.Errorf("endpoint %s: url %q has no scheme (want one of %s)", cfg.Name, cfg.URL, strings.Join(Schemes, ", "))
	}
	return nil, fmt.Errorf("endpoint %s: unsupported scheme %q in url %q (want one of %s)", cfg.Name, u.Scheme, cfg.URL, strings.Join(Schemes, ", "))
}
