package cache

import (
	"os"

	"golang.org/x/sys/unix"
)

// mapping is a read-only shared mapping (mmap(2), MAP_SHARED) of one
// data file, private to one reader: mlock(2) does not nest, so a mapping
// shared by two readers would let one's munlock unpin the block the
// other is sending. Its pages are the page cache's own.
type mapping struct{ b []byte }

// mapFile maps the size bytes of the data file d.
func mapFile(d *os.File, size int64) (*mapping, error) {
	if size <= 0 || int64(int(size)) != size {
		return nil, errNoZeroCopy
	}
	b, err := unix.Mmap(int(d.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	return &mapping{b: b}, nil
}

// pin locks the pages of [off, off+n) of the file in memory (mlock(2)
// faults them in first, from the disk where they are not cached) and
// returns them. Until unpin, the page cache keeps those very pages: they
// are neither evicted nor read again from the disk. A page that cannot be
// read (an I/O error, a file cut short) makes mlock fail with ENOMEM
// rather than raise SIGBUS, as does RLIMIT_MEMLOCK.
func (m *mapping) pin(off, n int64) ([]byte, error) {
	b := m.b[off : off+n : off+n]
	if err := unix.Mlock(b); err != nil {
		return nil, err
	}
	return b, nil
}

// unpin ends a pin.
func (m *mapping) unpin(b []byte) { _ = unix.Munlock(b) }

// close unmaps the file; what pin returned is gone with it.
func (m *mapping) close() { _ = unix.Munmap(m.b) }
