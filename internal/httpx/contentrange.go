package httpx

import (
	"strconv"
	"strings"
)

// ParseContentRange parses "bytes first-last/total" (RFC 9110 §14.4) and
// "bytes */total". total is -1 for "*". last may be negative: XrdHttp
// writes "bytes 2--1/6".
func ParseContentRange(s string) (first, last, total int64, ok bool) {
	first, last, total = -1, -1, -1
	rest, found := strings.CutPrefix(strings.TrimSpace(s), "bytes ")
	if !found {
		return first, last, total, false
	}
	rng, tot, found := strings.Cut(rest, "/")
	if !found {
		return first, last, total, false
	}
	if tot != "*" {
		t, err := strconv.ParseInt(tot, 10, 64)
		if err != nil || t < 0 {
			return first, last, -1, false
		}
		total = t
	}
	if rng == "*" {
		return first, last, total, true
	}
	a, b, found := strings.Cut(rng, "-")
	if !found {
		return first, last, total, false
	}
	f, err1 := strconv.ParseInt(a, 10, 64)
	l, err2 := strconv.ParseInt(b, 10, 64)
	if err1 != nil || err2 != nil || f < 0 {
		return -1, -1, total, false
	}
	return f, l, total, true
}
