package cache

import "golang.org/x/sys/unix"

// oDirect opens a data file for writes that go from the fill's buffer to
// the disk without a copy into the page cache (see directWrites).
const oDirect = unix.O_DIRECT
