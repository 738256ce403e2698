package fastpath

import (
	"bytes"

	"golang.org/x/net/http/httpguts"
)

// scanHead looks for the end of a request head in buf. Every line must end
// in CRLF: RFC 9112 §2.2 lets a recipient take a bare LF as a line end,
// and net/http does, so a bare LF (or a CR anywhere but before LF) is not
// plain and goes to net/http, which reads it its own way. end is the index
// after the empty line that ends the head (RFC 9112 §2.1).
func scanHead(buf []byte) (end int, complete, plain bool) {
	i := 0
	for {
		j := bytes.IndexByte(buf[i:], '\n')
		if j < 0 {
			// Incomplete: a CR may only be the last byte read so far.
			k := bytes.IndexByte(buf[i:], '\r')
			return 0, false, k < 0 || i+k == len(buf)-1
		}
		line := buf[i : i+j]
		if len(line) == 0 || line[len(line)-1] != '\r' || bytes.IndexByte(line[:len(line)-1], '\r') >= 0 {
			return 0, false, false
		}
		i += j + 1
		if len(line) == 1 {
			return i, true, true
		}
	}
}

// parseHead checks a complete request head (CRLF lines, ending in an
// empty line, as scanHead found it) against the plain case and fills req.
// It reports false when the request is not plain; req is then undefined.
func parseHead(head []byte, req *Request) bool {
	*req = Request{}
	lineEnd := bytes.IndexByte(head, '\r')
	line := head[:lineEnd]
	rest := head[lineEnd+2:]
	// The request line (RFC 9112 §3): method SP request-target SP
	// HTTP-version, single spaces. Only GET and HEAD are plain.
	switch {
	case bytes.HasPrefix(line, []byte("HEAD ")):
		req.Head, line = true, line[5:]
	case bytes.HasPrefix(line, []byte("GET ")):
		line = line[4:]
	default:
		return false
	}
	sp := bytes.IndexByte(line, ' ')
	if sp < 1 {
		return false
	}
	switch string(line[sp+1:]) {
	case "HTTP/1.1":
	case "HTTP/1.0": // ab, and some old clients
		req.http10 = true
	default:
		return false
	}
	req.Target = line[:sp]
	// origin-form only (RFC 9112 §3.2.1): absolute-form and the rest go
	// to net/http. "//x" is origin-form, but net/http reads it as an
	// authority.
	if req.Target[0] != '/' || len(req.Target) > 1 && req.Target[1] == '/' {
		return false
	}
	if q := bytes.IndexByte(req.Target, '?'); q >= 0 {
		// origin-form = absolute-path [ "?" query ]: net/http's
		// URL.RawQuery is the query as sent. An empty one (a bare "?")
		// is not plain: net/http notes it (URL.ForceQuery).
		req.Target, req.Query = req.Target[:q], req.Target[q+1:]
		if len(req.Query) == 0 {
			return false
		}
		for _, b := range req.Query {
			if !plainQueryByte[b] {
				return false
			}
		}
	}
	for _, b := range req.Target {
		if !plainPathByte[b] {
			return false
		}
	}
	hosts := 0
	for len(rest) > 2 {
		e := bytes.IndexByte(rest, '\r')
		hl := rest[:e]
		rest = rest[e+2:]
		// field-line = field-name ":" OWS field-value OWS (RFC 9112
		// §5): no whitespace before the colon (§5.1; a name ending in
		// one is not on the list below), and a line starting with
		// whitespace (obs-fold, §5.2) has no name that is either.
		colon := bytes.IndexByte(hl, ':')
		if colon < 1 {
			return false
		}
		name, value := hl[:colon], bytes.Trim(hl[colon+1:], " \t")
		for _, b := range value {
			if b < 0x20 && b != '\t' || b == 0x7f {
				return false // not field-vchar (RFC 9110 §5.5): net/http refuses it
			}
		}
		// Field names are case-insensitive (RFC 9110 §5.1).
		switch {
		case asciiEqualFold(name, "host"):
			// Exactly one, and valid (RFC 9112 §3.2): net/http answers
			// 400 otherwise.
			hosts++
			if hosts > 1 || !httpguts.ValidHostHeader(string(value)) {
				return false
			}
			req.Host = value
		case asciiEqualFold(name, "connection"):
			switch {
			case asciiEqualFold(value, "close"):
				req.close = true
			case asciiEqualFold(value, "keep-alive"):
				req.keep = true
			default:
				return false // upgrade, several options, ...: net/http decides
			}
		case asciiEqualFold(name, "x-request-id"):
			if req.sentID != nil {
				return false // two: the handler's answer ignores both alike
			}
			req.sentID = value
		case asciiEqualFold(name, "accept"):
			if req.Accept != nil {
				return false // several: the Responder sees one
			}
			req.Accept = value
		case asciiEqualFold(name, "content-length"):
			// A body frames the message (RFC 9112 §6.2); only an empty
			// one is plain. Transfer-Encoding is not on the list.
			if string(value) != "0" {
				return false
			}
		case asciiEqualFold(name, "user-agent"),
			asciiEqualFold(name, "accept-encoding"), asciiEqualFold(name, "accept-language"),
			asciiEqualFold(name, "cache-control"), asciiEqualFold(name, "pragma"):
			// These cannot change an answer: no content coding,
			// negotiation or caching decisions are made by the
			// handlers behind a fast path.
		default:
			return false
		}
	}
	if hosts != 1 && !req.http10 {
		return false // HTTP/1.1 requires exactly one Host (RFC 9112 §3.2)
	}
	return true
}

// plainPathByte marks the bytes a plain request target's path may hold:
// RFC 3986 unreserved characters, "/" and a few sub-delimiters that
// net/http and httpx.CleanPath take literally. No "%" (nothing to
// decode, so the target is the path net/http would give the handler).
// Filled once, never written after.
var plainPathByte = func() (t [256]bool) {
	for b := 'a'; b <= 'z'; b++ {
		t[b] = true
	}
	for b := 'A'; b <= 'Z'; b++ {
		t[b] = true
	}
	for b := '0'; b <= '9'; b++ {
		t[b] = true
	}
	for _, b := range "-._~/+,=:@" {
		t[b] = true
	}
	return t
}()

// plainQueryByte marks the bytes a plain query may hold: those of a
// path, and "&" between parameters. No "%" (nothing to decode), no ";"
// (net/http logs a query holding one, and url.ParseQuery refuses it), no
// "?" or "#". Filled once, never written after.
var plainQueryByte = func() (t [256]bool) {
	t = plainPathByte
	t['&'] = true
	return t
}()

// asciiEqualFold compares b with the lower-case ASCII string s, ignoring
// case, without allocating.
func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}
