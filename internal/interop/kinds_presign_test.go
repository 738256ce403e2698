package interop

import (
	"bytes"
	"fmt"
	"hash/adler32"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/config"
	"github.com/lakefed/lakefed/internal/httpx"
	"github.com/lakefed/lakefed/internal/testenv"
)

// TestS3PresignedRedirect: a GET through the federator is redirected to a
// pre-signed S3 URL that curl and davix-get follow with no credentials of
// their own; the URL is refused by the S3 server once expired; HEAD is the
// federator's own answer; a PUT through the federator stores the adler32.
func TestS3PresignedRedirect(t *testing.T) {
	curl := testenv.Require(t, "curl")
	davix := testenv.Require(t, "davix-get")
	const expiry = 2 * time.Second
	s3, srv := startS3Site(t, "s3", "presign_expiry: 2s")
	data := bytes.Repeat([]byte("lakefed pre-signed "), 100000)
	s3.put(t, "/d/f.bin", data)
	fed := startKindFed(t, fastHealth+"\nmetadata_cache: {ttl: 1s}", s3)
	fed.waitState(t, "s3", "up")

	code, loc := fed.peek(t, "/d/f.bin")
	if code != http.StatusFound || !strings.HasPrefix(loc, srv.URL+"/"+srv.Bucket+"/d/f.bin?") || !strings.Contains(loc, "X-Amz-Signature=") {
		t.Fatalf("GET = %d %q, want 302 to a pre-signed URL of the object", code, loc)
	}
	if strings.Contains(loc, srv.SecretKey) {
		t.Fatalf("the redirect URL carries the secret key: %s", loc)
	}
	signedAt := time.Now()

	// The clients hold no credentials: nothing in their environment.
	noCreds := []string{"AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY=", "AWS_SESSION_TOKEN="}
	work := t.TempDir()
	for _, c := range []struct {
		name, out string
		argv      []string
	}{
		{"curl -L", "curl", []string{curl, "-sSfL", "-o", filepath.Join(work, "curl"), fed.url + "/d/f.bin"}},
		{"davix-get", "davix", []string{davix, fed.url + "/d/f.bin", filepath.Join(work, "davix")}},
	} {
		run(t, noCreds, c.argv[0], c.argv[1:]...)
		got, err := os.ReadFile(filepath.Join(work, c.out))
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("%s through the federator: %d bytes (%v), want the %d stored", c.name, len(got), err, len(data))
		}
	}

	// HEAD is answered by the federator from metadata: S3 refuses a
	// pre-signed GET URL used for HEAD, so it must never be sent there.
	req, _ := http.NewRequest(http.MethodHead, fed.url+"/d/f.bin", nil)
	req.Header.Set("Want-Digest", "adler32")
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Location") != "" || resp.ContentLength != int64(len(data)) {
		t.Errorf("HEAD = %d Location %q length %d, want 200 from the federator, length %d", resp.StatusCode, resp.Header.Get("Location"), resp.ContentLength, len(data))
	}
	if got, want := httpx.ParseDigest(resp.Header.Get("Digest"))[httpx.Adler32], adler32Of(data); got != want {
		t.Errorf("HEAD Digest adler32 = %q, want %q", got, want)
	}

	// The pre-signed URL dies with its expiry: the S3 server refuses it.
	// Poll (bounded) until it does; a URL that stays valid fails the test.
	if !testenv.Within(time.Until(signedAt.Add(expiry+15*time.Second)), func() bool {
		resp, err = http.Get(loc)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusForbidden {
			if !strings.Contains(string(body), "expired") {
				t.Errorf("pre-signed URL refused, but not as expired: %s", body)
			}
			return true
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("pre-signed URL: %d %s, want 200 and then 403", resp.StatusCode, body)
		}
		return false
	}) {
		t.Fatalf("pre-signed URL with a %v expiry still works %v after it was made", expiry, time.Since(signedAt))
	}
	// Through the federator the client still gets a live URL.
	out := filepath.Join(work, "again")
	run(t, noCreds, curl, "-sSfL", "-o", out, fed.url+"/d/f.bin")
	if got, _ := os.ReadFile(out); !bytes.Equal(got, data) {
		t.Errorf("curl -L after the first URL expired: %d bytes, want %d", len(got), len(data))
	}

	// A PUT through the federator is written by it (not redirected to a
	// pre-signed PUT, which would store no adler32).
	up := bytes.Repeat([]byte("uploaded through the federator "), 50000)
	req, _ = http.NewRequest(http.MethodPut, fed.url+"/d/up.bin", bytes.NewReader(up))
	resp, err = noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("PUT = %d %s, want 201", resp.StatusCode, body)
	}
	info, err := newEndpoint(t, "check", s3.yaml).Stat(t.Context(), "/d/up.bin")
	if err != nil || info.Size != int64(len(up)) || info.Checksums[httpx.Adler32] != adler32Of(up) {
		t.Errorf("stored object: %+v, %v; want %d bytes with adler32 %s in its metadata", info, err, len(up), adler32Of(up))
	}
}

// adler32Of is data's adler32 as 8 lower-case hex digits.
func adler32Of(data []byte) string {
	return fmt.Sprintf("%08x", adler32.Checksum(data))
}

// TestS3PresignShorterThanTTL: the federator refuses an s3 endpoint whose
// pre-signed URLs would expire before the metadata cache forgets them.
func TestS3PresignShorterThanTTL(t *testing.T) {
	srv := &testenv.S3Server{URL: "http://127.0.0.1:1", Bucket: "lake", AccessKey: "k", SecretKey: "s", Region: "us-east-1"}
	text := fedYAML("metadata_cache: {ttl: 60s}", []*kindSite{{name: "s3", yaml: s3Yaml(srv, "presign_expiry: 30s")}})
	// The config refuses it (so lakefed check-config does too), naming the
	// field and its line.
	_, err := config.Parse([]byte(text))
	if err == nil || !strings.Contains(err.Error(), "s3.presign_expiry") || !strings.Contains(err.Error(), "line ") {
		t.Fatalf("config.Parse with presign_expiry 30s < ttl 60s = %v, want an error naming s3.presign_expiry and its line", err)
	}
}

// TestS3PresignRefreshReachesLocation: against s3proxy, which enforces
// expiry, a redirect served from the cache past half its URL's life
// carries a fresh signature in Location, and that URL still works after
// the first one has expired: every URL handed out is valid for at least
// half of presign_expiry.
func TestS3PresignRefreshReachesLocation(t *testing.T) {
	const expiry = 3 * time.Second
	s3, _ := startS3Site(t, "s3", "presign_expiry: 3s")
	data := []byte("refreshed signature")
	s3.put(t, "/f", data)
	fed := startKindFed(t, fastHealth+"\nmetadata_cache: {ttl: 3s}", s3)
	fed.waitState(t, "s3", "up")
	_, first := fed.peek(t, "/f")
	signed := time.Now()
	time.Sleep(expiry/2 + 300*time.Millisecond) // past half its life, within the cache TTL
	_, second := fed.peek(t, "/f")
	if time.Since(signed) >= expiry {
		t.Skip("too slow to stay within the cache TTL")
	}
	if second == first {
		t.Fatalf("Location is the first signature %v after it was made (expiry %v)", time.Since(signed), expiry)
	}
	// Wait until the first URL is refused, then the second must work.
	get := func(u string) int {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if !testenv.Within(time.Until(signed.Add(expiry+15*time.Second)), func() bool { return get(first) != http.StatusOK }) {
		t.Fatalf("first URL still valid %v after signing", time.Since(signed))
	}
	if code := get(second); code != http.StatusOK {
		t.Errorf("the refreshed URL answers %d %v after the first was signed; want 200 (valid for half of presign_expiry)", code, time.Since(signed))
	}
}
