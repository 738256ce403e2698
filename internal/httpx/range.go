package httpx

import (
	"cmp"
	"errors"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// Range is one byte range of a representation: Length bytes from Start.
type Range struct {
	Start, Length int64
}

// ContentRange formats r as a Content-Range value for a representation of
// size bytes: "bytes 0-99/1000" (RFC 9110 §14.4).
func (r Range) ContentRange(size int64) string {
	return "bytes " + strconv.FormatInt(r.Start, 10) + "-" + strconv.FormatInt(r.Start+r.Length-1, 10) + "/" + strconv.FormatInt(size, 10)
}

// ErrUnsatisfiable means no range of a Range header overlaps the
// representation: answer 416 with "Content-Range: bytes */size".
var ErrUnsatisfiable = errors.New("httpx: range not satisfiable")

// ErrBadRange means the Range header is malformed, or asks for more than
// the representation. RFC 9110 §14.2 lets a server ignore or reject such
// a header; ServeContent rejects it (416).
var ErrBadRange = errors.New("httpx: malformed range")

// MaxRanges bounds how many ranges one request may ask for; more is
// refused. It is high because ROOT readers ask for many:
// uproot sends one range per basket of a branch in one request (446 for
// lakefed's 14 MB sample file; thousands for real ones), and a cap of 100
// turned its vector read into a whole-file answer it dropped, then one
// request per basket. The bytes are bounded anyway: overlapping ranges,
// or ranges adding up to more than the file, are refused (amplifies),
// and the request header limit (64 KiB) bounds the count.
const MaxRanges = 10000

// ParseRange parses a Range header ("bytes=0-99,200-,-50") against a
// representation of size bytes (RFC 9110 §14.1.2). It returns nil for an
// empty header and for one of a range unit other than bytes (§14.2: a
// server MUST ignore a unit it does not understand; units compare
// case-insensitively, §14.1), ErrBadRange for a malformed one (no unit,
// no "=", a bad range-spec) and for one that would amplify the answer
// (amplifies, MaxRanges), and ErrUnsatisfiable when no range overlaps.
// Ranges past the end are clipped; ranges that do not overlap are
// dropped, as net/http does.
func ParseRange(h string, size int64) ([]Range, error) {
	h = strings.TrimSpace(h)
	if h == "" {
		return nil, nil
	}
	unit, spec, ok := strings.Cut(h, "=")
	if !ok || !httpguts.ValidHeaderFieldName(unit) {
		return nil, ErrBadRange // no unit, or not a token: malformed, not another unit
	}
	if !strings.EqualFold(unit, "bytes") {
		return nil, nil
	}
	var out []Range
	n := 0
	for part := range strings.SplitSeq(spec, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if n++; n > MaxRanges {
			return nil, ErrBadRange
		}
		first, last, ok := strings.Cut(part, "-")
		if !ok {
			return nil, ErrBadRange
		}
		first, last = strings.TrimSpace(first), strings.TrimSpace(last)
		var r Range
		if first == "" {
			// Suffix range: the last N bytes.
			k, err := strconv.ParseInt(last, 10, 64)
			if err != nil || k < 0 {
				return nil, ErrBadRange
			}
			if k == 0 || size == 0 {
				continue
			}
			k = min(k, size)
			r = Range{size - k, k}
		} else {
			s, err := strconv.ParseInt(first, 10, 64)
			if err != nil || s < 0 {
				return nil, ErrBadRange
			}
			e := size - 1
			if last != "" {
				e, err = strconv.ParseInt(last, 10, 64)
				if err != nil || e < s {
					return nil, ErrBadRange
				}
			}
			if s >= size {
				continue
			}
			e = min(e, size-1)
			r = Range{s, e - s + 1}
		}
		out = append(out, r)
	}
	if n == 0 {
		return nil, ErrBadRange
	}
	if len(out) == 0 {
		return nil, ErrUnsatisfiable
	}
	if amplifies(out, size) {
		return nil, ErrBadRange
	}
	return out, nil
}

// amplifies reports whether ranges ask for more than the representation:
// more bytes in all than it has, or overlapping ranges (RFC 9110 §14.2:
// a server should ignore, coalesce or refuse them; "bytes=0-,0-,..." would
// otherwise make a 1 MB file a 100 MB answer and a hundred reads). Such a
// Range is refused (ServeContent: 416).
func amplifies(ranges []Range, size int64) bool {
	if len(ranges) < 2 {
		return false
	}
	var sum int64
	for _, r := range ranges {
		sum += r.Length
	}
	if sum > size {
		return true
	}
	sorted := slices.Clone(ranges)
	slices.SortFunc(sorted, func(a, b Range) int { return cmp.Compare(a.Start, b.Start) })
	for i := 1; i < len(sorted); i++ {
		if sorted[i].Start < sorted[i-1].Start+sorted[i-1].Length {
			return true
		}
	}
	return false
}
