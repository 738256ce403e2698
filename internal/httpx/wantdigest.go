package httpx

import (
	"errors"
	"fmt"
	"hash"
	"net/http"
	"strings"
)

// WantedDigests returns the checksums a PUT's body must match, from its
// Digest lines (RFC 3230 §4.3.2) and Content-MD5 (RFC 1864), as
// lower-case hex by algorithm. It is the one rule of every role that
// takes a PUT (the storage role, the federator, the write buffer):
//
//   - a malformed value of an algorithm lakefed computes ("adler32=zz")
//     is refused: a digest that cannot be checked must not let the
//     upload through as if it had been;
//   - two different values of one algorithm, on one line or on two
//     (Digest may be repeated, RFC 9110 §5.3), or a Digest md5 that
//     differs from Content-MD5, are refused: one of them is wrong;
//   - algorithms lakefed does not compute are ignored (RFC 3230 §4.3.2
//     lets a server do that).
//
// The error is an *Error with status 400 and the reason.
func WantedDigests(h http.Header) (map[string]string, error) {
	want := map[string]string{}
	for _, line := range h["Digest"] {
		for part := range strings.SplitSeq(line, ",") {
			k, _, _ := strings.Cut(part, "=")
			algo := strings.ToLower(strings.TrimSpace(k))
			if !KnownAlgorithm(algo) {
				continue
			}
			v, ok := ParseDigest(part)[algo]
			if !ok {
				return nil, NewError(http.StatusBadRequest, "bad Digest header: malformed "+algo+" value", nil)
			}
			if old, dup := want[algo]; dup && old != v {
				return nil, NewError(http.StatusBadRequest, "digest mismatch: two "+algo+" values", nil)
			}
			want[algo] = v
		}
	}
	if cms := h["Content-Md5"]; len(cms) > 0 {
		v := ParseContentMD5(strings.Join(cms, ","))
		if v == "" {
			return nil, NewError(http.StatusBadRequest, "bad Content-MD5 header", nil)
		}
		if old, ok := want[MD5]; ok && old != v {
			return nil, NewError(http.StatusBadRequest, "digest mismatch: Digest md5 and Content-MD5 differ", nil)
		}
		want[MD5] = v
	}
	return want, nil
}

// ErrDigestMismatch: a body does not have a digest its client sent.
var ErrDigestMismatch = errors.New("digest mismatch")

// BodyDigests hashes a PUT body on its way through, with every algorithm
// its client sent a value for (WantedDigests) and those the role keeps
// besides (adler32 on every lakefed server), and checks the client's
// values at the end: the one check of every PUT path.
type BodyDigests struct {
	want map[string]string
	hs   map[string]hash.Hash
	list []hash.Hash // hs's values, for Write without a map range
}

// NewBodyDigests returns the hashes for want plus the algorithms in also.
func NewBodyDigests(want map[string]string, also ...string) *BodyDigests {
	d := &BodyDigests{want: want, hs: make(map[string]hash.Hash, len(want)+len(also))}
	add := func(a string) {
		if d.hs[a] == nil {
			h := NewHash(a)
			d.hs[a] = h
			d.list = append(d.list, h)
		}
	}
	for _, a := range also {
		add(a)
	}
	for a := range want {
		add(a)
	}
	return d
}

// Write feeds p to every hash; it never fails.
func (d *BodyDigests) Write(p []byte) (int, error) {
	for _, h := range d.list {
		h.Write(p)
	}
	return len(p), nil
}

// Sums returns every digest computed, as lower-case hex by algorithm.
func (d *BodyDigests) Sums() map[string]string {
	out := make(map[string]string, len(d.hs))
	for a, h := range d.hs {
		out[a] = SumString(h)
	}
	return out
}

// Check returns nil when the body had every digest its client sent,
// else an error wrapping ErrDigestMismatch that names the algorithm and
// both values.
func (d *BodyDigests) Check() error {
	for a, v := range d.want {
		if got := SumString(d.hs[a]); got != v {
			return fmt.Errorf("%w: %s of the body is %s, the client sent %s", ErrDigestMismatch, a, got, v)
		}
	}
	return nil
}
