// Package kinds builds the endpoint a config names, choosing the kind by
// the table of schemes (endpoint.Schemes). It lives apart from package
// endpoint so that the kinds can import endpoint without a cycle, and it
// is a plain switch rather than init-time self-registration: with a
// handful of kinds, explicit beats magic (see STYLE.md).
//
//	ep, err := kinds.New(ctx, endpoint.Config{Name: "site-a", URL: "davs://se.example.org/atlas/"}, log)
//	if err != nil { return err }     // bad URL, unsupported scheme, bad CA file
//	info, err := ep.Stat(ctx, "/f.root")
package kinds

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/lakefed/lakefed/internal/endpoint"
	httpep "github.com/lakefed/lakefed/internal/endpoint/http"
	"github.com/lakefed/lakefed/internal/endpoint/posix"
	"github.com/lakefed/lakefed/internal/endpoint/s3"
	"github.com/lakefed/lakefed/internal/endpoint/upstream"
	"github.com/lakefed/lakefed/internal/endpoint/xroot"
)

// New builds the endpoint cfg names: the kind cfg.Kind names, else the
// kind of cfg.URL's scheme in endpoint.Schemes (file → posix; http, https,
// dav, davs → http; s3 → s3; root, xroot → xroot; lakefed, lakefeds →
// upstream, as is an http(s) URL with Kind "upstream"). A scheme not in
// the table is an error. log nil means slog.Default().
func New(ctx context.Context, cfg endpoint.Config, log *slog.Logger) (endpoint.Endpoint, error) {
	_, kind, err := endpoint.Resolve(cfg)
	if err != nil {
		return nil, fmt.Errorf("endpoint %s: %w", cfg.Name, err)
	}
	switch kind {
	case endpoint.KindPosix:
		return posix.New(ctx, cfg, log)
	case endpoint.KindHTTP:
		return httpep.New(ctx, cfg, log)
	case endpoint.KindS3:
		return s3.New(ctx, cfg, log)
	case endpoint.KindXRoot:
		return xroot.New(ctx, cfg, log)
	case endpoint.KindUpstream:
		return upstream.New(ctx, cfg, log)
	}
	// A row of the table whose kind has no case here: a bug, caught by
	// TestEveryScheme.
	return nil, fmt.Errorf("endpoint %s: kind %q of url %q is not built in", cfg.Name, kind, cfg.URL)
}
