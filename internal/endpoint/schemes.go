package endpoint

import (
	"fmt"
	"net/url"
	"strings"
)

// The kinds of endpoint, by the name their package, logs, metrics and
// OpError.Kind use.
const (
	KindPosix    = "posix"    // a local directory
	KindHTTP     = "http"     // an HTTP/WebDAV server
	KindS3       = "s3"       // an S3 bucket
	KindXRoot    = "xroot"    // an XRootD server
	KindUpstream = "upstream" // another lakefed federator
)

// Caps is what a kind can do beyond the Endpoint interface. In the table it
// is a promise of the kind, for configs, help texts and the dashboard; at
// run time the federator asks the endpoint itself (CanRedirect, Presigner,
// Checksummer), since some powers depend on the endpoint's config.
type Caps uint8

const (
	// CapRedirect: clients can be sent to the endpoint (Redirecter). For
	// root:// only with an HTTP door (http_url): HTTP clients cannot
	// follow a redirect to root://.
	CapRedirect Caps = 1 << iota
	// CapPresign: its redirect URLs are signed and expire (Presigner).
	CapPresign
	// CapChecksum: it computes or looks up checksums without the caller
	// reading the file (Checksummer).
	CapChecksum
)

// Scheme is one row of the table of URL schemes.
type Scheme struct {
	// Name is the scheme, lower case ("davs").
	Name string
	// Kind is the kind that serves the scheme (KindHTTP).
	Kind string
	// Alt is the other kind a config may name with "kind:" for this
	// scheme ("upstream" for an http(s) URL of another federator), or "".
	Alt string
	// Protocol is how people call what the scheme speaks, for the
	// dashboard ("WebDAV", "XRootD").
	Protocol string
	// Wire is the scheme the kind speaks on the wire when it is not Name:
	// "http" or "https" for dav(s) and lakefed(s); "" when it is Name.
	Wire string
	// DefaultPort is the port used when the URL has none; 0 when the URL
	// names no server (file, s3: the server is in the s3 options).
	DefaultPort int
	// NoHost: the URL names no host (file:///dir). Every other scheme
	// needs one (for s3 it is the bucket).
	NoHost bool
	// Can is what the kind can do.
	Can Caps
}

// Schemes returns the table of every URL scheme an endpoint may have, in
// the order help texts list them. A new scheme is a row here; a new kind is
// a row, its package, and its case in kinds.New.
func Schemes() []Scheme {
	return []Scheme{
		{Name: "file", Kind: KindPosix, Protocol: "POSIX", NoHost: true, Can: CapChecksum},
		{Name: "http", Kind: KindHTTP, Alt: KindUpstream, Protocol: "HTTP/WebDAV", DefaultPort: 80, Can: CapRedirect | CapChecksum},
		{Name: "https", Kind: KindHTTP, Alt: KindUpstream, Protocol: "HTTPS/WebDAV", DefaultPort: 443, Can: CapRedirect | CapChecksum},
		{Name: "dav", Kind: KindHTTP, Protocol: "WebDAV", Wire: "http", DefaultPort: 80, Can: CapRedirect | CapChecksum},
		{Name: "davs", Kind: KindHTTP, Protocol: "WebDAV", Wire: "https", DefaultPort: 443, Can: CapRedirect | CapChecksum},
		{Name: "s3", Kind: KindS3, Protocol: "S3", Can: CapRedirect | CapPresign | CapChecksum},
		{Name: "root", Kind: KindXRoot, Protocol: "XRootD", DefaultPort: 1094, Can: CapRedirect | CapChecksum},
		{Name: "xroot", Kind: KindXRoot, Protocol: "XRootD", DefaultPort: 1094, Can: CapRedirect | CapChecksum},
		{Name: "lakefed", Kind: KindUpstream, Protocol: "lakefed", Wire: "http", DefaultPort: 80, Can: CapRedirect | CapChecksum},
		{Name: "lakefeds", Kind: KindUpstream, Protocol: "lakefed", Wire: "https", DefaultPort: 443, Can: CapRedirect | CapChecksum},
	}
}

// LookupScheme returns the row of scheme (any case), and false when no
// kind serves it.
func LookupScheme(scheme string) (Scheme, bool) {
	for _, s := range Schemes() {
		if strings.EqualFold(s.Name, scheme) {
			return s, true
		}
	}
	return Scheme{}, false
}

// SchemeNames lists the schemes of the table, for help texts and errors:
// "file, http, https, ...".
func SchemeNames() string {
	var b strings.Builder
	for i, s := range Schemes() {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(s.Name)
	}
	return b.String()
}

// Serves reports whether kind may serve URLs of s: its own kind, or the
// Alt a config names.
func (s Scheme) Serves(kind string) bool {
	return kind == s.Kind || (kind != "" && kind == s.Alt)
}

// WireScheme is the scheme s speaks on the wire: Wire, or Name.
func (s Scheme) WireScheme() string {
	if s.Wire != "" {
		return s.Wire
	}
	return s.Name
}

// schemesOf lists, as "a://, b://", the schemes kind serves.
func schemesOf(kind string) string {
	var names []string
	for _, s := range Schemes() {
		if s.Serves(kind) {
			names = append(names, s.Name+"://")
		}
	}
	return strings.Join(names, ", ")
}

// FieldError is a field of an endpoint's config that Resolve refuses.
type FieldError struct {
	// Field is the config key: "url" or "kind".
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// Resolve checks cfg's URL and Kind against the table and returns the row
// of its scheme and the kind that serves it: cfg.Kind when set, else the
// row's. Config validation and kinds.New both ask it, so that what one
// accepts the other builds. Its errors are *FieldError.
func Resolve(cfg Config) (Scheme, string, error) {
	bad := func(field, format string, args ...any) (Scheme, string, error) {
		return Scheme{}, "", &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	u, err := url.Parse(cfg.URL)
	switch {
	case err != nil:
		return bad("url", "%v", err)
	case u.Scheme == "":
		return bad("url", "%q has no scheme (want one of %s)", cfg.URL, SchemeNames())
	}
	s, ok := LookupScheme(u.Scheme)
	switch {
	case !ok:
		return bad("url", "scheme %q is not one of %s", u.Scheme, SchemeNames())
	case !s.NoHost && u.Host == "":
		return bad("url", "%q has no host", cfg.URL)
	case cfg.Kind == "":
		return s, s.Kind, nil
	case schemesOf(cfg.Kind) == "":
		return bad("kind", "%q is not a kind (leave it out to choose by the URL)", cfg.Kind)
	case !s.Serves(cfg.Kind):
		return bad("url", "kind %q needs a URL of scheme %s, not %s://", cfg.Kind, schemesOf(cfg.Kind), s.Name)
	}
	return s, cfg.Kind, nil
}
