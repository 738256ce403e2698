package httpx

import (
	"context"
	"strings"
	"testing"
)

func TestCleanPath(t *testing.T) {
	good := map[string]string{
		"":              "/",
		"/":             "/",
		"//a//b/":       "/a/b",
		"/a/./b":        "/a/b",
		"/atlas/f.root": "/atlas/f.root",
		"/a%20b":        "/a%20b",
		"/é/ü.root":     "/é/ü.root",
	}
	for in, want := range good {
		got, err := CleanPath(in)
		if err != nil || got != want {
			t.Errorf("CleanPath(%q) = %q, %v, want %q", in, got, err, want)
		}
	}
	bad := []string{
		"/../etc/passwd", "/a/../../b", "/a/..", "..", "a/b",
		"/a\x00b", "/a\nb", "/a\x7fb", "/a\\..\\b",
		"/%2e%2e/x", "/%2E%2e/x", "/a%2fb", "/a%00",
		"/a\xffb", "/\xc0\xae\xc0\xae/x", // not UTF-8 (an overlong "..")
		"/" + strings.Repeat("n", 256), strings.Repeat("/abc", 1100),
	}
	for _, in := range bad {
		if got, err := CleanPath(in); err == nil || !IsPathError(err) {
			t.Errorf("CleanPath(%q) = %q, %v, want a PathError", in, got, err)
		}
	}
}

func TestDigest(t *testing.T) {
	sums, n, err := Sums(strings.NewReader("Wikipedia"), Adler32, MD5, CRC32C)
	if err != nil || n != 9 {
		t.Fatalf("Sums: %v, %d", err, n)
	}
	if sums[Adler32] != "11e60398" {
		t.Errorf("adler32(Wikipedia) = %s, want 11e60398", sums[Adler32])
	}
	h := FormatDigest(sums, Adler32, MD5)
	back := ParseDigest(h)
	if back[Adler32] != sums[Adler32] || back[MD5] != sums[MD5] {
		t.Errorf("ParseDigest(FormatDigest) = %v, want %v", back, sums)
	}
	if got := ParseDigest("ADLER32=1e60398"); got[Adler32] != "01e60398" {
		t.Errorf("ParseDigest pads adler32: got %v", got)
	}
	if got := ParseWantDigest("md5;q=0.3, adler32, sha;q=1, crc32c;q=0"); strings.Join(got, ",") != "adler32,md5" {
		t.Errorf("ParseWantDigest = %v, want [adler32 md5]", got)
	}
}

func TestHops(t *testing.T) {
	ctx := WithHops(context.Background(), 2)
	if Hops(ctx) != 2 || Hops(context.Background()) != 0 {
		t.Error("WithHops/Hops do not round-trip")
	}
}
