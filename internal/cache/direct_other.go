//go:build !linux

package cache

// oDirect is zero where direct I/O is not offered this way: fills write
// through the page cache.
const oDirect = 0
