package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"
	"sync/atomic"
	"time"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/httpx"
	"github.com/lakefed/lakefed/internal/results"
	"github.com/lakefed/lakefed/internal/transfer"
)

// DefaultIOSize is the IO test's file size: 1 GiB, the Dynafed study's.
const DefaultIOSize = 1 << 30

// IOOptions shape the IO test (the Dynafed study's IO benchmark).
type IOOptions struct {
	Common
	// Size is the file's size in bytes (0: 1 GiB).
	Size int64 `json:"size"`
}

// IOSummary is the IO test's result.
type IOSummary struct {
	Size int64 `json:"size"`
	// WriteTime and ReadTime are seconds; the rates bytes/s.
	WriteTime float64 `json:"write_time"`
	WriteRate float64 `json:"write_rate"`
	ReadTime  float64 `json:"read_time"`
	ReadRate  float64 `json:"read_rate"`
	// Adler32 is the checksum of the bytes written; ReadAdler32 of the
	// bytes read back; ServerAdler32 what the server said (RFC 3230
	// Digest), "" when it said nothing.
	Adler32       string `json:"adler32"`
	ReadAdler32   string `json:"read_adler32"`
	ServerAdler32 string `json:"server_adler32,omitempty"`
	// Verified is true when the bytes read back are the bytes written
	// (and the server's checksum, when given, agrees).
	Verified bool   `json:"verified"`
	Error    string `json:"error,omitempty"`
}

// IO writes a file of Size random bytes to t, reads it back, times both
// and checks the adler32 of what came back. Both halves are a
// transfer.Copy: from a source of random bytes to the target, and from the
// target to nowhere. A checksum mismatch is a result (Verified false), not
// an error; an unreachable target is one.
func IO(ctx context.Context, t *Target, o IOOptions) (*Result, error) {
	if o.Size <= 0 {
		o.Size = DefaultIOSize
	}
	rng := o.rng()
	seed := rng.Uint64()
	p := path.Join(Root, "runs", fmt.Sprintf("%s-%x", time.Now().UTC().Format("20060102T150405"),
		rng.Uint64()&0xffffff), "io.dat")
	res := &Result{Kind: "io", Target: t.raw, Site: t.site, Params: o, Started: time.Now()}
	t.served.reset()
	s := &IOSummary{Size: o.Size}
	res.Summary = s

	var moved atomic.Int64
	var phaseVal atomic.Value
	phaseVal.Store("write")
	start := time.Now()
	stop := showProgress(o.Progress, func() string {
		el := time.Since(start).Seconds()
		return fmt.Sprintf("io: %s %s/%s  %s/s", phaseVal.Load(), formatBytes(float64(moved.Load())),
			formatBytes(float64(o.Size)), formatBytes(float64(moved.Load())/max(el, 1e-9)))
	})
	ep := targetEndpoint{t}
	// The server is not asked for its sum after the write: that would time
	// its checksum too (XRootD computes it); the read below compares it.
	copts := transfer.Options{Progress: func(n, _ int64) { moved.Store(n) }, SkipSourceSum: true, SkipDestSum: true}
	t0 := time.Now()
	wr, err := transfer.Copy(ctx, randEndpoint{seed: seed, size: o.Size}, ep, "/io.dat", p, copts)
	wd := time.Since(t0)
	if err != nil {
		stop()
		// A failed PUT leaves no file, but may have made the directory.
		_ = t.removeEmptyDir(context.WithoutCancel(ctx), path.Dir(p))
		return nil, fmt.Errorf("bench: io write: %w", err)
	}
	if !o.Keep {
		defer func() {
			wctx := context.WithoutCancel(ctx)
			if t.remove(wctx, p) == nil {
				_ = t.removeEmptyDir(wctx, path.Dir(p))
			}
		}()
	}
	s.WriteTime, s.WriteRate = wd.Seconds(), float64(o.Size)/wd.Seconds()
	s.Adler32 = wr.Adler32
	res.Samples = append(res.Samples, results.Sample{T: t0.Sub(res.Started).Seconds(), Kind: "write",
		Value: wd.Seconds(), Bytes: o.Size, OK: true})

	moved.Store(0)
	phaseVal.Store("read")
	start = time.Now()
	t1 := time.Now()
	copts.SkipSourceSum = false
	rr, err := transfer.Copy(ctx, ep, discardEndpoint{}, p, "/", copts)
	rd := time.Since(t1)
	stop()
	var ce *transfer.ChecksumError
	var se *transfer.SizeError
	switch {
	case errors.As(err, &ce):
		rr = transfer.Result{Size: o.Size, Adler32: ce.Got, SourceSum: ce.Want}
	case errors.As(err, &se):
		rr = transfer.Result{Size: se.Got}
		s.Error = fmt.Sprintf("read %d bytes back, wrote %d", se.Got, o.Size)
	case err != nil:
		return nil, fmt.Errorf("bench: io read: %w", err)
	}
	n := rr.Size
	s.ReadTime, s.ReadRate = rd.Seconds(), float64(n)/rd.Seconds()
	s.ReadAdler32 = rr.Adler32
	s.ServerAdler32 = rr.SourceSum
	switch {
	case s.Error != "":
	case n != o.Size:
		s.Error = fmt.Sprintf("read %d bytes back, wrote %d", n, o.Size)
	case s.ReadAdler32 != s.Adler32:
		s.Error = fmt.Sprintf("adler32 of the bytes read %s, of the bytes written %s", s.ReadAdler32, s.Adler32)
	case s.ServerAdler32 != "" && s.ServerAdler32 != s.Adler32:
		s.Error = fmt.Sprintf("server says adler32 %s, the bytes written have %s", s.ServerAdler32, s.Adler32)
	default:
		s.Verified = true
	}
	res.Samples = append(res.Samples, results.Sample{T: t1.Sub(res.Started).Seconds(), Kind: "read",
		Value: rd.Seconds(), Bytes: n, OK: s.Verified, Err: s.Error})
	res.Ended = time.Now()
	res.Site = t.servedSite(context.WithoutCancel(ctx))
	return res, nil
}

// targetEndpoint is t as an endpoint, for transfer.Copy: HTTP targets
// through the lean client (a pinned --site rides on every request),
// others through their endpoint. Only what Copy uses is there.
type targetEndpoint struct{ t *Target }

func (e targetEndpoint) Name() string { return e.t.raw }

// Stat is a HEAD asking for the adler32 (RFC 3230 Want-Digest) on HTTP.
func (e targetEndpoint) Stat(ctx context.Context, p string) (endpoint.Info, error) {
	t := e.t
	if t.base == nil {
		return t.ep.Stat(ctx, p)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, t.fileURL(p).String(), nil)
	if err != nil {
		return endpoint.Info{}, fmt.Errorf("bench: stat %s: %w", p, err)
	}
	req.Header.Set("Want-Digest", "adler32")
	t.auth(req)
	resp, err := t.hc.Do(req)
	if err != nil {
		return endpoint.Info{}, netError("stat", p, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return endpoint.Info{}, statusError("stat", p, resp)
	}
	info := endpoint.Info{Name: path.Base(p), Size: resp.ContentLength}
	if sum := httpx.ParseDigest(strings.Join(resp.Header.Values("Digest"), ","))[httpx.Adler32]; sum != "" {
		info.Checksums = map[string]string{httpx.Adler32: sum}
	}
	return info, nil
}

// Checksum offers nothing beyond Stat's: asking a kind to compute one
// would time the server's checksum, not the read.
func (e targetEndpoint) Checksum(context.Context, string, string) (string, error) {
	return "", endpoint.ErrUnsupported
}

func (e targetEndpoint) Open(ctx context.Context, p string, _, _ int64) (io.ReadCloser, error) {
	rc, _, _, err := e.t.get(ctx, p)
	return rc, err
}

// Put sends the body again from a fresh read when a federator redirects
// it (307): transfer.Copy's body is a Reopener.
func (e targetEndpoint) Put(ctx context.Context, p string, r io.Reader, size int64) error {
	var getBody func() io.Reader
	if ro, ok := r.(transfer.Reopener); ok {
		getBody = func() io.Reader {
			nr, err := ro.Reopen()
			if err != nil {
				return errReader{err}
			}
			return nr
		}
	}
	return e.t.put(ctx, p, r, size, getBody)
}

// errReader fails every read with err: a body that could not be reopened.
type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

func (e targetEndpoint) Delete(ctx context.Context, p string) error { return e.t.remove(ctx, p) }
func (e targetEndpoint) List(context.Context, string) ([]endpoint.Info, error) {
	return nil, endpoint.ErrUnsupported
}
func (e targetEndpoint) Mkdir(context.Context, string) error { return endpoint.ErrUnsupported }
func (e targetEndpoint) Probe(context.Context) error         { return nil }

// randEndpoint holds one file of size random bytes from seed, whatever
// its path: the IO test's source.
type randEndpoint struct {
	seed uint64
	size int64
}

func (e randEndpoint) Name() string { return "random" }
func (e randEndpoint) Stat(_ context.Context, p string) (endpoint.Info, error) {
	return endpoint.Info{Name: path.Base(p), Size: e.size}, nil
}
func (e randEndpoint) List(context.Context, string) ([]endpoint.Info, error) {
	return nil, endpoint.ErrUnsupported
}
func (e randEndpoint) Open(context.Context, string, int64, int64) (io.ReadCloser, error) {
	return io.NopCloser(randReader(e.seed, e.size)), nil
}
func (e randEndpoint) Put(context.Context, string, io.Reader, int64) error {
	return endpoint.ErrUnsupported
}
func (e randEndpoint) Delete(context.Context, string) error { return endpoint.ErrUnsupported }
func (e randEndpoint) Mkdir(context.Context, string) error  { return endpoint.ErrUnsupported }
func (e randEndpoint) Probe(context.Context) error          { return nil }

// discardEndpoint reads what is put and keeps nothing: the IO test's
// destination for the read back.
type discardEndpoint struct{ randEndpoint }

func (discardEndpoint) Name() string { return "discard" }
func (discardEndpoint) Put(_ context.Context, _ string, r io.Reader, _ int64) error {
	_, err := drain(r)
	return err
}
