package cache

import (
	"os"
	"path/filepath"
	"unsafe"
)

// dioAlign is the alignment direct I/O asks of buffers, offsets and
// lengths: the page size, which covers the logical block size of any
// disk.
const dioAlign = 4096

// alignedBuf returns n bytes starting at a multiple of dioAlign, so that
// a block in it can be written with direct I/O.
func alignedBuf(n int64) []byte {
	b := make([]byte, n+dioAlign)
	skip := (dioAlign - int(uintptr(unsafe.Pointer(&b[0]))%dioAlign)) % dioAlign
	return b[skip : skip+int(n) : skip+int(n)]
}

// directWrites reports whether fills in dir can write their blocks with
// direct I/O: the file system takes it (tmpfs refuses it) and blocks are
// whole multiples of dioAlign. A fill then costs the disk's time, not a
// copy into the page cache and its later writeback: on a disk that
// writes faster than the page cache takes dirty pages from a busy CPU,
// the copy was what bounded a cold miss. Readers of the block just
// written are handed the fill's buffer instead of reading it back.
func directWrites(dir string, block int64) bool {
	if oDirect == 0 || block%dioAlign != 0 {
		return false
	}
	p := filepath.Join(dir, "direct-probe.tmp") // a crash leaves it to scan
	defer os.Remove(p)
	d, err := os.OpenFile(p, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|oDirect, 0o644)
	if err != nil {
		return false
	}
	defer d.Close()
	_, err = d.WriteAt(alignedBuf(dioAlign), 0)
	return err == nil
}
