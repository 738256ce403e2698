package bench

import (
	"context"
	"fmt"
	"hash"
	"io"
	"path"
	"sync/atomic"
	"time"

	"github.com/lakefed/lakefed/internal/httpx"
	"github.com/lakefed/lakefed/internal/results"
)

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

// countingReader counts what passes and feeds a hash.
type countingReader struct {
	r io.Reader
	h hash.Hash32
	n *atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 {
		c.h.Write(p[:n])
		c.n.Add(int64(n))
	}
	return n, err
}

// IO writes a file of Size random bytes to t, reads it back, times both
// and checks the adler32 of what came back. A checksum mismatch is a
// result (Verified false), not an error; an unreachable target is one.
func IO(ctx context.Context, t *Target, o IOOptions) (*Result, error) {
	if o.Size <= 0 {
		o.Size = 1 << 30
	}
	rng := o.rng()
	seed := rng.Uint64()
	p := path.Join(Root, "runs", fmt.Sprintf("%s-%x", time.Now().UTC().Format("20060102T150405"),
		rng.Uint64()&0xffffff), "io.dat")
	res := &Result{Kind: "io", Target: t.raw, Site: t.site, Params: o, Started: time.Now()}
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
	// A redirected PUT (307 from a federator) sends the body again:
	// from a fresh reader of the same bytes, with a fresh sum and count.
	var cur atomic.Pointer[countingReader]
	body := func() io.Reader {
		moved.Store(0)
		c := &countingReader{r: randReader(seed, o.Size), h: httpx.NewAdler32(), n: &moved}
		cur.Store(c)
		return c
	}
	t0 := time.Now()
	err := t.put(ctx, p, body(), o.Size, body)
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
	s.Adler32 = fmt.Sprintf("%08x", cur.Load().h.Sum32())
	res.Samples = append(res.Samples, results.Sample{T: t0.Sub(res.Started).Seconds(), Kind: "write",
		Value: wd.Seconds(), Bytes: o.Size, OK: true})

	moved.Store(0)
	phaseVal.Store("read")
	start = time.Now()
	t1 := time.Now()
	rc, size, serverSum, err := t.get(ctx, p)
	if err != nil {
		stop()
		return nil, fmt.Errorf("bench: io read: %w", err)
	}
	rr := &countingReader{r: rc, h: httpx.NewAdler32(), n: &moved}
	n, err := drain(rr)
	rc.Close()
	rd := time.Since(t1)
	stop()
	if err != nil {
		return nil, fmt.Errorf("bench: io read: %w", err)
	}
	s.ReadTime, s.ReadRate = rd.Seconds(), float64(n)/rd.Seconds()
	s.ReadAdler32 = fmt.Sprintf("%08x", rr.h.Sum32())
	s.ServerAdler32 = serverSum
	switch {
	case n != o.Size || (size >= 0 && size != o.Size):
		s.Error = fmt.Sprintf("read %d bytes back, wrote %d", n, o.Size)
	case s.ReadAdler32 != s.Adler32:
		s.Error = fmt.Sprintf("adler32 of the bytes read %s, of the bytes written %s", s.ReadAdler32, s.Adler32)
	case serverSum != "" && serverSum != s.Adler32:
		s.Error = fmt.Sprintf("server says adler32 %s, the bytes written have %s", serverSum, s.Adler32)
	default:
		s.Verified = true
	}
	res.Samples = append(res.Samples, results.Sample{T: t1.Sub(res.Started).Seconds(), Kind: "read",
		Value: rd.Seconds(), Bytes: n, OK: s.Verified, Err: s.Error})
	res.Ended = time.Now()
	return res, nil
}
