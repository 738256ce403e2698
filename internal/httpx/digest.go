package httpx

import (
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"hash"
	"hash/crc32"
	"io"
	"sort"
	"strconv"
	"strings"
)

// Algorithms lakefed computes, by their lower-case RFC 3230 names.
const (
	Adler32 = "adler32"
	MD5     = "md5"
	CRC32C  = "crc32c"
)

// KnownAlgorithm reports whether algo (lower case) is one lakefed computes.
func KnownAlgorithm(algo string) bool {
	return algo == Adler32 || algo == MD5 || algo == CRC32C
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// NewHash returns a fresh hash for a known algorithm, or nil.
func NewHash(algo string) hash.Hash {
	switch algo {
	case Adler32:
		return NewAdler32()
	case MD5:
		return md5.New()
	case CRC32C:
		return crc32.New(castagnoli)
	}
	return nil
}

// SumString formats a finished hash the way the field writes it: 8 hex
// digits for adler32 and crc32c (zero-padded), 32 hex digits for md5.
func SumString(h hash.Hash) string { return hex.EncodeToString(h.Sum(nil)) }

// Sums hashes r once with every algorithm in algos and returns their values.
func Sums(r io.Reader, algos ...string) (map[string]string, int64, error) {
	hs := make([]hash.Hash, 0, len(algos))
	ws := make([]io.Writer, 0, len(algos))
	for _, a := range algos {
		h := NewHash(a)
		if h == nil {
			continue
		}
		hs = append(hs, h)
		ws = append(ws, h)
	}
	n, err := io.Copy(io.MultiWriter(ws...), r)
	if err != nil {
		return nil, n, err
	}
	out := make(map[string]string, len(hs))
	i := 0
	for _, a := range algos {
		if NewHash(a) == nil {
			continue
		}
		out[a] = SumString(hs[i])
		i++
	}
	return out, n, nil
}

// ParseWantDigest parses an RFC 3230 Want-Digest header ("adler32, md5;q=0.5")
// and returns the known algorithms the client accepts, most wanted first.
// Algorithms with q=0 and unknown ones are dropped.
func ParseWantDigest(h string) []string {
	type want struct {
		algo string
		q    float64
		i    int
	}
	var ws []want
	for i, part := range strings.Split(h, ",") {
		name, params, _ := strings.Cut(part, ";")
		algo := strings.ToLower(strings.TrimSpace(name))
		if algo == "" {
			continue
		}
		q := 1.0
		if k, v, ok := strings.Cut(strings.TrimSpace(params), "="); ok && strings.TrimSpace(k) == "q" {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				continue
			}
			q = f
		}
		if q <= 0 || !KnownAlgorithm(algo) {
			continue
		}
		ws = append(ws, want{algo, q, i})
	}
	sort.SliceStable(ws, func(a, b int) bool { return ws[a].q > ws[b].q })
	out := make([]string, 0, len(ws))
	for _, w := range ws {
		out = append(out, w.algo)
	}
	return out
}

// FormatDigest builds an RFC 3230 Digest header value from checksums in the
// Info.Checksums form, in the order of algos. adler32 and crc32c go out as
// hex (the WLCG convention, which dCache, XRootD and davix follow); md5 as
// base64 of the raw bytes, as RFC 3230 says.
func FormatDigest(sums map[string]string, algos ...string) string {
	var parts []string
	for _, a := range algos {
		v, ok := sums[a]
		if !ok {
			continue
		}
		if a == MD5 {
			raw, err := hex.DecodeString(v)
			if err != nil {
				continue
			}
			v = base64.StdEncoding.EncodeToString(raw)
		}
		parts = append(parts, a+"="+v)
	}
	return strings.Join(parts, ",")
}

// ParseDigest parses an RFC 3230 Digest header into the Info.Checksums form
// (lower-case hex values), keeping only known algorithms. md5 is accepted
// as base64 (RFC 3230) or as 32 hex digits (what some clients send).
func ParseDigest(h string) map[string]string {
	out := map[string]string{}
	for _, part := range strings.Split(h, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		algo := strings.ToLower(strings.TrimSpace(k))
		v = strings.TrimSpace(v)
		switch algo {
		case Adler32, CRC32C:
			v = strings.ToLower(v)
			if len(v) > 8 || !isHex(v) {
				continue
			}
			out[algo] = strings.Repeat("0", 8-len(v)) + v
		case MD5:
			if len(v) == 32 && isHex(v) {
				out[algo] = strings.ToLower(v)
			} else if raw, err := base64.StdEncoding.DecodeString(v); err == nil && len(raw) == md5.Size {
				out[algo] = hex.EncodeToString(raw)
			}
		}
	}
	return out
}

// ParseContentMD5 decodes a Content-MD5 header (RFC 1864: base64 of the raw
// digest) into lower-case hex, or "" when it is malformed.
func ParseContentMD5(h string) string {
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(h))
	if err != nil || len(raw) != md5.Size {
		return ""
	}
	return hex.EncodeToString(raw)
}

func isHex(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}
