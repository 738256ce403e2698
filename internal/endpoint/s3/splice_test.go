package s3_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"testing"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/endpoint/endpointtest"
	"github.com/lakefed/lakefed/internal/endpoint/s3"
	"github.com/lakefed/lakefed/internal/testenv"
)

// spliceEP opens every read as a caller that splices does
// (endpoint.WithSplice): large ranges go on connections of their own.
type spliceEP struct{ *s3.Endpoint }

func (e spliceEP) Open(ctx context.Context, p string, off, n int64) (io.ReadCloser, error) {
	return e.Endpoint.Open(endpoint.WithSplice(ctx), p, off, n)
}

// testSpliceConformance: the reads of a caller that splices pass the
// suite every kind passes.
func testSpliceConformance(t *testing.T, srv *testenv.S3Server) {
	endpointtest.Run(t, func(t *testing.T) endpointtest.Target {
		return endpointtest.Target{
			Endpoint: spliceEP{newEP(t, config(srv, "conformance-splice", nil))},
			Caps:     endpointtest.Caps{Checksums: []string{"adler32", "md5"}},
		}
	})
}

// testSplice: a large read whose caller splices (a plain-HTTP server)
// is an endpoint.Splicer that moves exactly the range, with the object's
// version; a small one, or one whose caller does not splice, is read.
func testSplice(t *testing.T, srv *testenv.S3Server) {
	ep := newEP(t, config(srv, "splice", nil))
	ctx := ctxFor(t)
	d := data(3<<20+5, 11)
	if err := ep.Put(ctx, "/f", bytes.NewReader(d), int64(len(d))); err != nil {
		t.Fatal(err)
	}
	in, err := ep.Stat(ctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		ctx    context.Context
		off, n int64
		splice bool
	}{
		{"whole", endpoint.WithSplice(ctx), 0, -1, true},
		{"range", endpoint.WithSplice(ctx), 7, 2 << 20, true},
		{"small range", endpoint.WithSplice(ctx), 7, 1000, false},
		{"not asked", ctx, 0, -1, false},
	} {
		rc, err := ep.Open(tc.ctx, "/f", tc.off, tc.n)
		if err != nil {
			t.Fatalf("%s: Open = %v", tc.name, err)
		}
		if v, ok := endpoint.VersionOf(rc); !ok || v.Size != in.Size || v.ETag != in.ETag {
			t.Errorf("%s: version %+v, want the object's %+v", tc.name, v, in)
		}
		want := d[tc.off:]
		if tc.n >= 0 {
			want = want[:tc.n]
		}
		src, dst := testenv.TCPPair(t)
		out := make(chan []byte, 1)
		go func() { b, _ := io.ReadAll(dst); out <- b }()
		spliced, err := forward(rc, src)
		src.Close()
		rc.Close()
		if got := <-out; err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: forwarded %d bytes, %v; want the %d of the range", tc.name, len(got), err, len(want))
		}
		if tc.splice != (spliced == int64(len(want))) || !tc.splice && spliced != 0 {
			t.Errorf("%s: %d of %d bytes spliced, want splice=%v", tc.name, spliced, len(want), tc.splice)
		}
	}
}

// forward moves rc's bytes to dst as a proxy that splices does: by
// SpliceTo what Ready offers, else by Read. It returns the bytes spliced.
func forward(rc io.Reader, dst *net.TCPConn) (int64, error) {
	sp, ok := rc.(endpoint.Splicer)
	var spliced int64
	for ok {
		n, err := sp.Ready()
		if err == io.EOF {
			return spliced, nil
		}
		if errors.Is(err, endpoint.ErrNoSplice) {
			break
		}
		if err != nil {
			return spliced, err
		}
		m, err := sp.SpliceTo(dst, n)
		spliced += m
		if err != nil {
			return spliced, err
		}
	}
	_, err := io.Copy(dst, rc)
	return spliced, err
}
