package federation

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/testenv"
)

// spliced moves what is left of sp's range to a socket, as the root://
// door does, and returns the bytes that came out at the other end.
func spliced(t *testing.T, sp endpoint.Splicer) ([]byte, error) {
	src, dst := testenv.TCPPair(t)
	got := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(dst); got <- b }()
	var err error
	for {
		var n int64
		if n, err = sp.Ready(); err != nil {
			break
		}
		if _, err = sp.SpliceTo(src, n); err != nil {
			break
		}
	}
	src.Close()
	if err == io.EOF {
		err = nil
	}
	return <-got, err
}

// The Namespace's reader moves from range to range of the version it
// opened (endpoint.RangeSeeker) and splices the bytes of plain-HTTP
// sites to a socket; when its site dies mid-range, Ready fails over to
// the replica its checksum proves identical, at the offset reached.
func TestNamespaceReaderSeeksAndSplices(t *testing.T) {
	a, b := startSite(t, "site-a"), startSite(t, "site-b")
	data := randomBytes(t, 48<<20+5) // more than the sockets hold: the kill cuts the stream
	a.write(t, "/d/f", data)
	b.write(t, "/d/f", data)
	a.sum(t, "/d/f")
	b.sum(t, "/d/f")
	tf := realFed(t, "mode: proxy", a, b)
	ctx := endpoint.WithSplice(t.Context())
	rc, err := tf.Namespace().Open(ctx, "/d/f", 0, 2<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got, err := spliced(t, rc.(endpoint.Splicer))
	if err != nil || !bytes.Equal(got, data[:2<<20]) {
		t.Fatalf("first range: %d bytes spliced, %v; want the first 2 MiB", len(got), err)
	}
	seek := rc.(endpoint.RangeSeeker)
	// A small range goes through the shared connections: Read.
	if err := seek.SeekRange(100, 1000); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.(endpoint.Splicer).Ready(); !errors.Is(err, endpoint.ErrNoSplice) {
		t.Errorf("Ready of a 1000-byte range = %v, want ErrNoSplice", err)
	}
	small, err := io.ReadAll(rc)
	if err != nil || !bytes.Equal(small, data[100:1100]) {
		t.Fatalf("range 100+1000: %d bytes, %v", len(small), err)
	}
	// Past the end is cut at the end; beyond it is refused.
	if err := seek.SeekRange(int64(len(data))+1, 1); !errors.Is(err, endpoint.ErrRefused) {
		t.Errorf("SeekRange past the end = %v, want ErrRefused", err)
	}
	if err := seek.SeekRange(3<<20, -1); err != nil {
		t.Fatal(err)
	}
	// Half of the rest from site-a, then site-a dies.
	src, dst := testenv.TCPPair(t)
	out := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(dst); out <- b }()
	sp := rc.(endpoint.Splicer)
	var moved int64
	for moved < 2<<20 {
		n, err := sp.Ready()
		if err != nil {
			t.Fatalf("Ready at %d: %v", moved, err)
		}
		m, err := sp.SpliceTo(src, min(n, 2<<20-moved))
		moved += m
		if err != nil {
			t.Fatalf("SpliceTo at %d: %v", moved, err)
		}
	}
	a.kill()
	for {
		n, err := sp.Ready()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("Ready after site-a died, at %d: %v", moved, err)
		}
		m, err := sp.SpliceTo(src, n)
		moved += m
		if err != nil {
			t.Fatalf("SpliceTo after site-a died, at %d: %v", moved, err)
		}
	}
	src.Close()
	if rest := <-out; !bytes.Equal(rest, data[3<<20:]) {
		t.Fatalf("range from 3 MiB across site-a's death: %d bytes, want %d (or bytes differ)", len(rest), len(data)-3<<20)
	}
	_, metrics := tf.do(t, "GET", "/metrics", nil, nil)
	if !strings.Contains(metrics, "lakefed_federation_proxy_failovers_total 1") {
		t.Errorf("no failover counted; was the whole range read before the kill? metrics:\n%s", grepLines(metrics, "failover"))
	}
}
