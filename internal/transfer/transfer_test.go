package transfer

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/endpoint/posix"
	"github.com/lakefed/lakefed/internal/httpx"
)

func newPosix(t *testing.T) (endpoint.Endpoint, string) {
	t.Helper()
	dir := t.TempDir()
	ep, err := posix.New(context.Background(), endpoint.Config{Name: "p", URL: "file://" + dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ep, dir
}

func randBytes(n int, seed uint64) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, 1))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// fake wraps an endpoint: it can claim a checksum, corrupt what it serves
// or what it stores, and say it stored other bytes than it did.
type fake struct {
	endpoint.Endpoint
	sum      string // the adler32 Stat and Checksum report, if set
	flipRead bool   // flip the first byte Open serves
	deleted  []string
}

func (f *fake) Stat(ctx context.Context, p string) (endpoint.Info, error) {
	info, err := f.Endpoint.Stat(ctx, p)
	if err == nil && f.sum != "" {
		info.Checksums = map[string]string{httpx.Adler32: f.sum}
	}
	return info, err
}

func (f *fake) Checksum(context.Context, string, string) (string, error) {
	if f.sum == "" {
		return "", endpoint.ErrUnsupported
	}
	return f.sum, nil
}

func (f *fake) Open(ctx context.Context, p string, off, n int64) (io.ReadCloser, error) {
	rc, err := f.Endpoint.Open(ctx, p, off, n)
	if err != nil || !f.flipRead {
		return rc, err
	}
	b, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		return nil, err
	}
	b[0] ^= 0xff
	return io.NopCloser(bytes.NewReader(b)), nil
}

func (f *fake) Delete(ctx context.Context, p string) error {
	f.deleted = append(f.deleted, p)
	return f.Endpoint.Delete(ctx, p)
}

func TestCopyVerified(t *testing.T) {
	ctx := context.Background()
	src, srcDir := newPosix(t)
	dst, dstDir := newPosix(t)
	data := randBytes(3<<20+17, 1)
	if err := os.WriteFile(filepath.Join(srcDir, "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	want := httpx.Adler32Of(data)
	fsrc := &fake{Endpoint: src, sum: want}
	fdst := &fake{Endpoint: dst, sum: want}
	var calls int
	var last, total int64
	res, err := Copy(ctx, fsrc, fdst, "/f", "/a/g", Options{Progress: func(n, tot int64) {
		calls++
		if n < last && n != 0 {
			t.Errorf("progress went back: %d after %d", n, last)
		}
		last, total = n, tot
	}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Size != int64(len(data)) || res.Adler32 != want || res.SourceSum != want || res.DestSum != want {
		t.Errorf("result %+v, want size %d and sums %s", res, len(data), want)
	}
	got, err := os.ReadFile(filepath.Join(dstDir, "a", "g"))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("destination holds %d bytes (err %v), want the %d copied", len(got), err, len(data))
	}
	if calls < 2 || last != int64(len(data)) || total != int64(len(data)) {
		t.Errorf("progress: %d calls, last %d of %d; want several, ending at %d", calls, last, total, len(data))
	}
}

func TestCopySourceMismatch(t *testing.T) {
	ctx := context.Background()
	src, srcDir := newPosix(t)
	dst, dstDir := newPosix(t)
	data := randBytes(1<<20, 2)
	if err := os.WriteFile(filepath.Join(srcDir, "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	// The source serves corrupted bytes while its checksum is the true one.
	fsrc := &fake{Endpoint: src, sum: httpx.Adler32Of(data), flipRead: true}
	_, err := Copy(ctx, fsrc, dst, "/f", "/g", Options{})
	var ce *ChecksumError
	if !errors.As(err, &ce) || ce.Side != Source {
		t.Fatalf("Copy of corrupted bytes: %v, want a source ChecksumError", err)
	}
	if _, err := os.Stat(filepath.Join(dstDir, "g")); !os.IsNotExist(err) {
		t.Errorf("the destination committed a corrupted copy (stat: %v)", err)
	}
}

func TestCopyDestinationMismatch(t *testing.T) {
	ctx := context.Background()
	src, srcDir := newPosix(t)
	dst, dstDir := newPosix(t)
	data := randBytes(100<<10, 3)
	if err := os.WriteFile(filepath.Join(srcDir, "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	// The destination says it holds other bytes than were sent.
	fdst := &fake{Endpoint: dst, sum: "00000001"}
	_, err := Copy(ctx, src, fdst, "/f", "/g", Options{})
	var ce *ChecksumError
	if !errors.As(err, &ce) || ce.Side != Destination || ce.Want != "00000001" || ce.Got != httpx.Adler32Of(data) {
		t.Fatalf("Copy to a lying destination: %v, want a destination ChecksumError", err)
	}
	if len(fdst.deleted) != 1 || fdst.deleted[0] != "/g" {
		t.Errorf("deleted %q, want the bad copy /g removed", fdst.deleted)
	}
	if _, err := os.Stat(filepath.Join(dstDir, "g")); !os.IsNotExist(err) {
		t.Errorf("the bad copy is still there (stat: %v)", err)
	}
	// Told not to ask, Copy trusts what it sent.
	if _, err := Copy(ctx, src, fdst, "/f", "/g", Options{SkipDestSum: true}); err != nil {
		t.Errorf("Copy with SkipDestSum: %v", err)
	}
}

// short serves fewer bytes than its Stat says.
type short struct{ endpoint.Endpoint }

func (s short) Open(ctx context.Context, p string, off, n int64) (io.ReadCloser, error) {
	rc, err := s.Endpoint.Open(ctx, p, off, n)
	if err != nil {
		return nil, err
	}
	return struct {
		io.Reader
		io.Closer
	}{io.LimitReader(rc, 10), rc}, nil
}

func TestCopyShortRead(t *testing.T) {
	ctx := context.Background()
	src, srcDir := newPosix(t)
	dst, dstDir := newPosix(t)
	if err := os.WriteFile(filepath.Join(srcDir, "f"), randBytes(1000, 4), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Copy(ctx, short{src}, dst, "/f", "/g", Options{})
	var se *SizeError
	if !errors.As(err, &se) || se.Got != 10 || se.Want != 1000 || !errors.Is(err, endpoint.ErrUnavailable) {
		t.Fatalf("Copy of a short read: %v, want a SizeError 10 of 1000, class unavailable", err)
	}
	if _, err := os.Stat(filepath.Join(dstDir, "g")); !os.IsNotExist(err) {
		t.Errorf("the destination committed a short copy (stat: %v)", err)
	}
}

// rewinding stores the second body it is given, after reading part of
// the first and asking for it again, as a client following a 307 does.
type rewinding struct {
	endpoint.Endpoint
}

func (r rewinding) Put(ctx context.Context, p string, body io.Reader, size int64) error {
	if _, err := io.CopyN(io.Discard, body, 100); err != nil {
		return err
	}
	ro, ok := body.(Reopener)
	if !ok {
		return errors.New("the body is not a Reopener")
	}
	nb, err := ro.Reopen()
	if err != nil {
		return err
	}
	return r.Endpoint.Put(ctx, p, nb, size)
}

func TestCopyReopen(t *testing.T) {
	ctx := context.Background()
	src, srcDir := newPosix(t)
	dst, dstDir := newPosix(t)
	data := randBytes(64<<10, 5)
	if err := os.WriteFile(filepath.Join(srcDir, "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := Copy(ctx, &fake{Endpoint: src, sum: httpx.Adler32Of(data)}, rewinding{dst}, "/f", "/g", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Size != int64(len(data)) || res.Adler32 != httpx.Adler32Of(data) {
		t.Errorf("result %+v after a reopen, want the second body's count and sum", res)
	}
	if got, _ := os.ReadFile(filepath.Join(dstDir, "g")); !bytes.Equal(got, data) {
		t.Errorf("destination holds %d bytes, want the %d sent again", len(got), len(data))
	}
}

func TestCopyDirectoryRefused(t *testing.T) {
	src, srcDir := newPosix(t)
	dst, _ := newPosix(t)
	if err := os.Mkdir(filepath.Join(srcDir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := Copy(context.Background(), src, dst, "/d", "/g", Options{})
	var te *Error
	if !errors.As(err, &te) || te.Side != Source || !errors.Is(err, endpoint.ErrRefused) {
		t.Errorf("Copy of a directory: %v, want a source error of class refused", err)
	}
}
