package storage

import (
	"bytes"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"hash/crc32"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/lakefed/lakefed/internal/httpx"
)

// etagHolder in a fuzzed If-Match or If-None-Match is replaced by the
// file's current ETag, so the fuzzer reaches the matching branches.
const etagHolder = "{etag}"

// FuzzPutHeaders drives PUT through the server's real handler with fuzzed
// Content-Range, If-Match, If-None-Match, If-Unmodified-Since, Digest and
// Content-MD5 values (empty = header absent) and a fuzzed body, over a
// file that holds old content, and checks:
//   - never a 5xx;
//   - a 2xx only when the stored file is the body, byte for byte, no
//     Content-Range was sent, every Digest value of an algorithm the
//     server computes and any Content-MD5 matched the body, and If-Match
//     (when sent) named the current ETag or "*";
//   - a 4xx leaves the old file byte-identical.
//
// Run: go test ./internal/storage -run '^$' -fuzz FuzzPutHeaders -fuzztime 20s
func FuzzPutHeaders(f *testing.F) {
	past := "Mon, 01 Jan 2001 00:00:00 GMT"
	wsum := md5.Sum([]byte("Wikipedia"))
	seeds := []struct{ cr, im, inm, ius, digest, cmd5, body string }{
		{"", "", "", "", "", "", "Wikipedia"},
		{"bytes 4-5/10", "", "", "", "", "", "ab"},
		{"bytes */10", "", "", "", "", "", ""},
		{"", "", "*", "", "", "", "new"},
		{"", "", etagHolder, "", "", "", "new"},
		{"", `"nope"`, "", "", "", "", "new"},
		{"", etagHolder, "", "", "", "", "new"},
		{"", "W/" + etagHolder, "", "", "", "", "new"},
		{"", "*", "", "", "", "", "new"},
		{"", "", "", past, "", "", "new"},
		{"", "", "", "garbage", "", "", "new"},
		{"", "", "", "", "adler32=11e60398", "", "Wikipedia"},
		{"", "", "", "", "adler32=00000001", "", "Wikipedia"},
		{"", "", "", "", "adler32=zz", "", "Wikipedia"},
		{"", "", "", "", "adler32=11e60398,adler32=1", "", "Wikipedia"},
		{"", "", "", "", "ADLER32=11E60398, sha-256=abc", "", "Wikipedia"},
		{"", "", "", "", "md5=" + base64.StdEncoding.EncodeToString(wsum[:]), "", "Wikipedia"},
		{"", "", "", "", "md5=" + hex.EncodeToString(wsum[:]), "", "Wikipedia"},
		{"", "", "", "", "crc32c=0", "", ""},
		{"", "", "", "", "", base64.StdEncoding.EncodeToString(wsum[:]), "Wikipedia"},
		{"", "", "", "", "", "AAAAAAAAAAAAAAAAAAAAAA==", "Wikipedia"},
		{"", "", "", "", "", "not base64", "Wikipedia"},
		{"bytes 0-8/9", etagHolder, "*", past, "adler32=11e60398", base64.StdEncoding.EncodeToString(wsum[:]), "Wikipedia"},
	}
	for _, s := range seeds {
		f.Add(s.cr, s.im, s.inm, s.ius, s.digest, s.cmd5, []byte(s.body))
	}
	root := f.TempDir()
	s, err := New(Config{Root: root, MaxUpload: 1 << 20}, slog.New(slog.DiscardHandler))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	file := filepath.Join(root, "f")
	old := []byte("old content of the file")

	f.Fuzz(func(t *testing.T, cr, im, inm, ius, digest, cmd5 string, body []byte) {
		if err := os.WriteFile(file, old, 0o644); err != nil {
			t.Fatal(err)
		}
		var st unix.Stat_t
		if err := s.statRel("f", &st); err != nil {
			t.Fatal(err)
		}
		tag := etag(&st)
		im = strings.ReplaceAll(im, etagHolder, tag)
		inm = strings.ReplaceAll(inm, etagHolder, tag)

		req := httptest.NewRequest(http.MethodPut, "/f", bytes.NewReader(body))
		for k, v := range map[string]string{
			"Content-Range": cr, "If-Match": im, "If-None-Match": inm,
			"If-Unmodified-Since": ius, "Digest": digest, "Content-MD5": cmd5,
		} {
			if v != "" {
				req.Header.Set(k, v)
			}
		}
		rec := httptest.NewRecorder()
		s.handler.ServeHTTP(rec, req)
		code := rec.Code

		got, err := os.ReadFile(file)
		if err != nil {
			t.Fatalf("after PUT = %d: read file: %v", code, err)
		}
		switch {
		case code >= 500:
			t.Fatalf("PUT = %d (%q), want no 5xx", code, rec.Body.String())
		case code >= 400:
			if !bytes.Equal(got, old) {
				t.Fatalf("PUT = %d changed the file to %q", code, got)
			}
		case code >= 200 && code < 300:
			if !bytes.Equal(got, body) {
				t.Fatalf("PUT = %d but the file holds %q, want the body %q", code, got, body)
			}
			if cr != "" {
				t.Fatalf("PUT with Content-Range %q = %d, want 400", cr, code)
			}
			if reason := digestsMatch(digest, cmd5, body); reason != "" {
				t.Fatalf("PUT = %d although %s", code, reason)
			}
			if im != "" && !strings.Contains(im, "*") && !strings.Contains(im, tag) {
				t.Fatalf("PUT with If-Match %q = %d; current ETag %s", im, code, tag)
			}
		}
	})
}

// digestsMatch checks, independently of the server's parser, that every
// Digest value of an algorithm the server computes, and Content-MD5, is
// the body's; it returns why not, or "".
func digestsMatch(digest, cmd5 string, body []byte) string {
	md := md5.Sum(body)
	for part := range strings.SplitSeq(digest, ",") {
		k, v, _ := strings.Cut(part, "=")
		algo := strings.ToLower(strings.TrimSpace(k))
		v = strings.TrimSpace(v)
		var ok bool
		switch algo {
		case httpx.Adler32, httpx.CRC32C:
			n, err := strconv.ParseUint(v, 16, 32)
			want := adler32Of(body)
			if algo == httpx.CRC32C {
				want = crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli))
			}
			ok = err == nil && len(v) <= 8 && uint32(n) == want
		case httpx.MD5:
			raw, err := hex.DecodeString(v)
			if err != nil || len(v) != 32 {
				raw, err = base64.StdEncoding.DecodeString(v)
			}
			ok = err == nil && bytes.Equal(raw, md[:])
		default:
			continue
		}
		if !ok {
			return "Digest " + part + " does not match the body"
		}
	}
	if cmd5 != "" {
		raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cmd5))
		if err != nil || !bytes.Equal(raw, md[:]) {
			return "Content-MD5 " + cmd5 + " does not match the body"
		}
	}
	return ""
}

// adler32Of is the Adler-32 of b (RFC 1950), written out here so the
// oracle does not share the server's block-wise code.
func adler32Of(b []byte) uint32 {
	const mod = 65521
	a, s := uint32(1), uint32(0)
	for _, c := range b {
		a = (a + uint32(c)) % mod
		s = (s + a) % mod
	}
	return s<<16 | a
}
