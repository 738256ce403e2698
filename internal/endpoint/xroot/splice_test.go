package xroot

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/testenv"
)

// forward moves what is left of rc's range to dst as a proxy that
// splices does: by SpliceTo what Ready offers, by Read what it does not
// (ErrNoSplice). It returns the bytes spliced and read.
func forward(rc io.Reader, dst *net.TCPConn) (spliced, read int64, err error) {
	sp := rc.(endpoint.Splicer)
	buf := make([]byte, 700)
	for {
		n, err := sp.Ready()
		switch {
		case err == io.EOF:
			return spliced, read, nil
		case errors.Is(err, endpoint.ErrNoSplice):
			m, err := rc.Read(buf)
			if _, werr := dst.Write(buf[:m]); werr != nil {
				return spliced, read, werr
			}
			read += int64(m)
			if err == io.EOF {
				return spliced, read, nil
			}
			if err != nil {
				return spliced, read, err
			}
			continue
		case err != nil:
			return spliced, read, err
		}
		m, err := sp.SpliceTo(dst, n)
		spliced += m
		if err != nil {
			return spliced, read, err
		}
	}
}

// spliceRead opens off, n of p on e and forwards it through a loopback
// connection: the bytes that came out, and forward's counts.
func spliceRead(t *testing.T, e *Endpoint, p string, off, n int64) (got []byte, spliced, read int64, err error) {
	t.Helper()
	rc, err := e.Open(endpoint.WithSplice(context.Background()), p, off, n)
	if err != nil {
		return nil, 0, 0, err
	}
	src, dst := testenv.TCPPair(t)
	out := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(dst); out <- b }()
	err = within(t, hangBound, func() error {
		var err error
		spliced, read, err = forward(rc, src)
		return err
	})
	src.Close()
	rc.Close()
	return <-out, spliced, read, err
}

// TestDirectSplice: the payload of kXR_read answers, frame after frame
// and request after request, is spliced from the reader's socket, the
// frame headers between them read; answers that came out of order are
// read from memory (ErrNoSplice) and the rest spliced again.
func TestDirectSplice(t *testing.T) {
	for _, tc := range []struct {
		mode        string
		off, n      int64
		allSpliced  bool
		wantSpliced bool
	}{
		{"", 0, -1, true, true},
		{"", 1234, 1500, true, true},
		{"ooo", 0, -1, false, true},
	} {
		f := &rawFake{data: randomData(3500, 8), mode: tc.mode}
		e := newEndpoint(t, "root://"+startRawFake(t, f)+"//", 5*time.Second)
		e.readChunk = 1000
		got, spliced, read, err := spliceRead(t, e, "/f", tc.off, tc.n)
		end := int64(len(f.data))
		if tc.n >= 0 {
			end = tc.off + tc.n
		}
		if err != nil || !bytes.Equal(got, f.data[tc.off:end]) {
			t.Errorf("mode %q: forwarded %d bytes, %v; want the %d of the range", tc.mode, len(got), err, end-tc.off)
		}
		if tc.allSpliced && read != 0 || tc.wantSpliced && spliced == 0 {
			t.Errorf("mode %q: %d bytes spliced, %d read", tc.mode, spliced, read)
		}
	}
}

// TestDirectSpliceFailures: a server failing mid-answer is an error of
// Ready or SpliceTo of the class Read gives (never io.EOF), after the
// bytes it did send.
func TestDirectSpliceFailures(t *testing.T) {
	for _, mode := range []string{"die", "shrink", "ioerror"} {
		f := &rawFake{data: randomData(3000, 9), mode: mode}
		e := newEndpoint(t, "root://"+startRawFake(t, f)+"//", failTimeout)
		e.readChunk = 1000
		got, _, _, err := spliceRead(t, e, "/f", 0, -1)
		if !errors.Is(err, endpoint.ErrUnavailable) || errors.Is(err, io.EOF) {
			t.Errorf("mode %s: error %v, want ErrUnavailable", mode, err)
		}
		if len(got) > 500 || !bytes.Equal(got, f.data[:len(got)]) {
			t.Errorf("mode %s: forwarded %d bytes, want a prefix of the 500 sent", mode, len(got))
		}
	}
}

// TestDirectSpliceXRootD: a real xrootd's answers, in the default
// request length and in small ones, splice whole.
func TestDirectSpliceXRootD(t *testing.T) {
	x := startXRootD(t)
	data := randomData(5<<20+33, 10)
	x.seed(t, "f.bin", data)
	for _, chunk := range []int64{directChunk, 300_001} {
		e := x.endpoint(t)
		e.readChunk = chunk
		got, spliced, read, err := spliceRead(t, e, "/f.bin", 0, -1)
		if err != nil || !bytes.Equal(got, data) || spliced != int64(len(data)) || read != 0 {
			t.Errorf("chunk %d: forwarded %d bytes (%d spliced, %d read), %v; want all %d spliced", chunk, len(got), spliced, read, err, len(data))
		}
	}
}
