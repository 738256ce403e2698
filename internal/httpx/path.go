// Package httpx holds the HTTP pieces every lakefed role shares: path
// checks, RFC 3230 digests, and (as they are needed) ranges and metalink.
//
//	p, err := httpx.CleanPath(r.URL.Path) // "/atlas/f.root" or a reason for a 400
//	algos := httpx.ParseWantDigest(r.Header.Get("Want-Digest"))
//	w.Header().Set("Digest", httpx.FormatDigest(map[string]string{"adler32": sum}))
package httpx

import (
	"errors"
	"strings"
	"unicode/utf8"
)

// Limits on paths. Linux allows 255-byte names and 4096-byte paths; a
// client that needs more is broken or hostile.
const (
	MaxPathLen = 4096
	MaxNameLen = 255
)

// PathError says why a path was refused; its text is safe to show a client.
type PathError struct{ Reason string }

func (e *PathError) Error() string { return "bad path: " + e.Reason }

// CleanPath checks a request path that has already been percent-decoded
// once (as net/http's URL.Path is) and returns it in canonical form:
// absolute, slash-separated, no empty, "." or trailing segments.
//
// It refuses rather than repairs: a ".." segment, NUL or control
// characters, a backslash, an over-long path or name, any percent-encoded
// dot, slash, backslash or NUL left after the one decoding (the
// double-encoded forms of ".." and "/", which a later layer might decode
// again), and bytes that are not UTF-8 ("%FF"): WebDAV answers carry
// names in XML, which cannot hold them, and S3 keys are UTF-8. Decoding
// happens exactly once, in net/http. It is the one rule for every role:
// the storage role refuses what it refuses, and a write buffer refuses
// the same names up front instead of acknowledging a file its targets
// would refuse forever.
func CleanPath(p string) (string, error) {
	if p == "" {
		return "/", nil
	}
	if len(p) > MaxPathLen {
		return "", &PathError{"path longer than 4096 bytes"}
	}
	if p[0] != '/' {
		return "", &PathError{"path is not absolute"}
	}
	if !utf8.ValidString(p) {
		return "", &PathError{"not valid UTF-8"}
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c < 0x20 || c == 0x7f:
			return "", &PathError{"control character in path"}
		case c == '\\':
			return "", &PathError{"backslash in path"}
		case c == '%' && i+2 < len(p):
			switch strings.ToLower(p[i+1 : i+3]) {
			case "2e", "2f", "5c", "00":
				return "", &PathError{"encoded dot, slash or NUL in path"}
			}
		}
	}
	var b strings.Builder
	b.Grow(len(p))
	for seg := range strings.SplitSeq(p, "/") {
		switch seg {
		case "", ".":
			continue
		case "..":
			return "", &PathError{"'..' in path"}
		}
		if len(seg) > MaxNameLen {
			return "", &PathError{"name longer than 255 bytes"}
		}
		b.WriteByte('/')
		b.WriteString(seg)
	}
	if b.Len() == 0 {
		return "/", nil
	}
	return b.String(), nil
}

// IsPathError reports whether err is a refused path.
func IsPathError(err error) bool {
	var pe *PathError
	return errors.As(err, &pe)
}

// Join joins a clean base path and a clean path below it.
func Join(base, p string) string {
	switch {
	case base == "" || base == "/":
		return p
	case p == "/":
		return base
	}
	return strings.TrimSuffix(base, "/") + p
}

// ReservedPrefix begins the names lakefed's servers keep for themselves
// (upload temp files, kept checksums): a client cannot write one, and a
// write buffer refuses them up front rather than acknowledge a file its
// target will refuse forever.
const ReservedPrefix = ".lakefed-"

// Reserved reports whether a clean path has a segment with ReservedPrefix.
func Reserved(p string) bool { return strings.Contains(p, "/"+ReservedPrefix) }
