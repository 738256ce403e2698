//go:build !linux

package cache

import "os"

// mapping is a mapped data file; off Linux warm blocks are copied
// (readBlock), never sent from a mapping.
type mapping struct{}

func mapFile(*os.File, int64) (*mapping, error)   { return nil, errNoZeroCopy }
func (*mapping) pin(int64, int64) ([]byte, error) { return nil, errNoZeroCopy }
func (*mapping) unpin([]byte)                     {}
func (*mapping) close()                           {}
