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
// whole multiples of dioAlign. A block written so costs the disk's time
// and almost no CPU; written through the page cache, the copy into it
// was most of a cold miss's CPU (on 2 shared cores, the cold miss ran
// at a fifth of the origin's rate). The readers a block was fetched for
// are handed the fill's buffer, so they do not read it back (from the
// device, since direct writes leave nothing in the page cache): the
// fill is paced to their claims (maxClaims); warm reads fill the page
// cache as they go.
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
