package durable

import (
	"bytes"
	"errors"
	"hash/adler32"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestReceive(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), (ChunkSize*3+123)/16)
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sum := adler32.New()
	var grown []int64
	n, err := Receive(f, bytes.NewReader(data), sum, Options{Grow: func(total int64) error { grown = append(grown, total); return nil }})
	if err != nil || n != int64(len(data)) {
		t.Fatalf("Receive = %d, %v; want %d", n, err, len(data))
	}
	got, _ := os.ReadFile(f.Name())
	if !bytes.Equal(got, data) || sum.Sum32() != adler32.Checksum(data) {
		t.Fatalf("the file or its digest is not the body's")
	}
	if len(grown) != 4 || grown[3] != int64(len(data)) {
		t.Errorf("Grow called with %v, want four growing totals ending at %d", grown, len(data))
	}
	if err := SyncDir(dir); err != nil {
		t.Errorf("SyncDir: %v", err)
	}

	// A write that fails (a full disk) and a reservation that cannot
	// grow end the upload with their error.
	enospc := func(*os.File, []byte) (int, error) { return 0, syscall.ENOSPC }
	if _, err := Receive(f, bytes.NewReader(data), sum, Options{Write: enospc}); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("Receive onto a full disk = %v, want ENOSPC", err)
	}
	full := errors.New("no room")
	if _, err := Receive(f, bytes.NewReader(data), sum, Options{Grow: func(int64) error { return full }}); !errors.Is(err, full) {
		t.Errorf("Receive past its reservation = %v, want its error", err)
	}
}
