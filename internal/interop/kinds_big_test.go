package interop

import (
	"fmt"
	"hash"
	"hash/adler32"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/httpx"
)

// prngReader is size bytes from a seeded PRNG, generated as they are read
// (never stored), with their adler32 computed on the way.
type prngReader struct {
	rng  *rand.ChaCha8
	left int64
	sum  hash.Hash32
}

func newPRNGReader(seed byte, size int64) *prngReader {
	return &prngReader{rng: rand.NewChaCha8([32]byte{seed, 'l', 'a', 'k', 'e'}), left: size, sum: adler32.New()}
}

func (r *prngReader) Read(p []byte) (int, error) {
	if r.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, _ := r.rng.Read(p)
	r.sum.Write(p[:n])
	r.left -= int64(n)
	return n, nil
}

// TestS3Upload6GiB (LAKEFED_BIG=1): a 6 GiB PUT through the federator to
// S3, generated as a stream of unknown length (chunked) so it exists
// nowhere but in S3 at the end; the federator's answer is followed (a
// redirect would be re-sent to its Location); then the adler32 S3 keeps
// for the object is compared with the one computed while streaming. s3proxy
// needs about 20 GiB free in the test's temporary directory.
func TestS3Upload6GiB(t *testing.T) {
	if os.Getenv("LAKEFED_BIG") != "1" {
		t.Skip("6 GiB upload: set LAKEFED_BIG=1 to run it")
	}
	const size = 6 << 30
	s3, _ := startS3Site(t, "s3", "part_size: 64MiB", "multipart_threshold: 64MiB")
	fed := startKindFed(t, fastHealth, s3)
	fed.waitState(t, "s3", "up")

	client := &http.Client{
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport:     &http.Transport{ExpectContinueTimeout: 5 * time.Second},
	}
	target := fed.url + "/big/6GiB.bin"
	start := time.Now()
	var sum string
	for hop := 0; ; hop++ {
		if hop == 3 {
			t.Fatalf("PUT redirected 3 times")
		}
		src := newPRNGReader(6, size)
		req, err := http.NewRequest(http.MethodPut, target, io.NopCloser(src))
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = -1 // a stream: chunked, size unknown
		// A redirect comes before the body is sent.
		req.Header.Set("Expect", "100-continue")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("PUT %s: %v", target, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusTemporaryRedirect {
			target = resp.Header.Get("Location")
			continue
		}
		if resp.StatusCode/100 != 2 {
			t.Fatalf("PUT = %d %s", resp.StatusCode, body)
		}
		if src.left != 0 {
			t.Fatalf("PUT answered %d with %d bytes unsent", resp.StatusCode, src.left)
		}
		sum = fmt.Sprintf("%08x", src.sum.Sum32())
		break
	}
	took := time.Since(start)
	t.Logf("6 GiB PUT through the federator to S3: %v (%.0f MiB/s), adler32 %s", took.Round(time.Second), float64(size)/(1<<20)/took.Seconds(), sum)

	info, err := newEndpoint(t, "check", s3.yaml).Stat(t.Context(), "/big/6GiB.bin")
	if err != nil {
		t.Fatal(err)
	}
	if info.Size != size || info.Checksums[httpx.Adler32] != sum {
		t.Errorf("S3 object: %d bytes, adler32 %q; want %d bytes, adler32 %s (streamed)", info.Size, info.Checksums[httpx.Adler32], int64(size), sum)
	}
	req, _ := http.NewRequest(http.MethodHead, fed.url+"/big/6GiB.bin", nil)
	req.Header.Set("Want-Digest", "adler32")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := httpx.ParseDigest(resp.Header.Get("Digest"))[httpx.Adler32]; got != sum || resp.ContentLength != size {
		t.Errorf("HEAD through the federator: length %d, Digest adler32 %q; want %d, %s", resp.ContentLength, got, int64(size), sum)
	}
}
