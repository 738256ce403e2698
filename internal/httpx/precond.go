package httpx

import (
	"net/http"
	"strings"
	"time"
)

// CheckPreconditions evaluates the conditional headers of a request
// (RFC 9110 §13.2.2, in its order: If-Match, else If-Unmodified-Since;
// then If-None-Match, else If-Modified-Since) against the representation
// it targets: etag as sent in an ETag header (quoted, "" when there is
// none), mtime (zero when unknown), and exists, false when there is no
// current representation. It returns 0 when the request should go on,
// else the status to answer: 304 (GET or HEAD) or 412. If-Range is not
// evaluated here: it decides whether a Range applies, not whether the
// request does (§13.1.5).
func CheckPreconditions(h http.Header, method, etag string, mtime time.Time, exists bool) int {
	safe := method == http.MethodGet || method == http.MethodHead
	if im := h["If-Match"]; len(im) > 0 {
		// §13.1.1: false when there is no current representation, or
		// no listed tag matches it by strong comparison.
		if !exists || !ETagMatch(strings.Join(im, ","), etag, false) {
			return http.StatusPreconditionFailed
		}
	} else if ius := h.Get("If-Unmodified-Since"); ius != "" && exists && !mtime.IsZero() {
		if t, err := http.ParseTime(ius); err == nil && mtime.Truncate(time.Second).After(t) {
			return http.StatusPreconditionFailed
		}
	}
	if inm := h["If-None-Match"]; len(inm) > 0 {
		// §13.1.2: "*" matches any current representation; tags match
		// by weak comparison.
		if exists && ETagMatch(strings.Join(inm, ","), etag, true) {
			if safe {
				return http.StatusNotModified
			}
			return http.StatusPreconditionFailed
		}
	} else if ims := h.Get("If-Modified-Since"); ims != "" && safe && exists && !mtime.IsZero() {
		if t, err := http.ParseTime(ims); err == nil && !mtime.Truncate(time.Second).After(t) {
			return http.StatusNotModified
		}
	}
	return 0
}

// ETagMatch reports whether a comma-separated list of entity tags (or
// "*") matches tag (quoted, possibly W/-prefixed), by weak comparison
// when weak is set (If-None-Match) and strong comparison otherwise
// (If-Match, If-Range), RFC 9110 §8.8.3.2. A malformed list matches
// nothing; an empty tag (the resource has none) matches only "*".
func ETagMatch(list, tag string, weak bool) bool {
	tagWeak := strings.HasPrefix(tag, "W/")
	if tagWeak {
		tag = tag[2:]
	}
	for {
		list = strings.TrimLeft(list, " \t,")
		if list == "" {
			return false
		}
		if list[0] == '*' {
			return true
		}
		isWeak := strings.HasPrefix(list, "W/")
		if isWeak {
			list = list[2:]
		}
		if list == "" || list[0] != '"' {
			return false
		}
		end := strings.IndexByte(list[1:], '"')
		if end < 0 {
			return false
		}
		t := list[:end+2]
		list = list[end+2:]
		if tag != "" && t == tag && (weak || (!isWeak && !tagWeak)) {
			return true
		}
	}
}

// TrimETag returns the opaque part of an entity tag: without the weak
// marker and the quotes ("W/\"x\"" and "\"x\"" give "x"), the form
// endpoint.Info holds.
func TrimETag(s string) string {
	s = strings.TrimPrefix(strings.TrimSpace(s), "W/")
	return strings.Trim(s, `"`)
}
