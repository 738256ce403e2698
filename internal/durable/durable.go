// Package durable holds the steps of a write that must survive a crash
// once it is acknowledged, the one home of that rule for every role that
// takes uploads onto its own disk (the storage role, the write buffer):
// the body is streamed into a temporary file in large writes while its
// digests are computed, the file is fsynced, renamed into place, and its
// directory fsynced; only then may the upload be acknowledged.
//
//	n, err := durable.Receive(f, body, digests, durable.Options{})
//	err = f.Sync()                 // the bytes
//	err = os.Rename(tmp, final)    // the name
//	err = durable.SyncDir(dir)     // the rename
package durable

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// ChunkSize is the size of one write of Receive: a body is gathered into
// writes this large, fewer and larger than the network's reads.
const ChunkSize = 1 << 20

// writebackChunk is how much written data Receive lets pile up in the
// page cache before it asks the kernel to start writing it out.
const writebackChunk = 8 << 20

// Options adjust Receive. The zero value writes with (*os.File).Write
// into a fresh buffer.
type Options struct {
	// Buf is the buffer to gather writes in (len ChunkSize is best).
	// Nil: one of ChunkSize is made.
	Buf []byte
	// Write writes one chunk; tests replace it to inject ENOSPC. Nil:
	// (*os.File).Write.
	Write func(f *os.File, p []byte) (int, error)
	// Grow, when set, is called before a chunk is written with the total
	// the file will have after it; an error ends the upload (a space
	// reservation that cannot grow).
	Grow func(total int64) error
}

// Receive copies body into f through large writes, feeding sum, and
// returns the bytes taken. A body that ends early returns the body's
// error (io.ErrUnexpectedEOF from net/http).
//
// Every 8 MiB it starts the write-back of what was just written
// (sync_file_range SYNC_FILE_RANGE_WRITE: asynchronous, a hint, errors
// ignored; the fsync after the body reports real ones). The disk then
// works while the network delivers the rest, and the fsync that
// durability needs before the answer finds little left to write.
func Receive(f *os.File, body io.Reader, sum io.Writer, o Options) (int64, error) {
	buf := o.Buf
	if buf == nil {
		buf = make([]byte, ChunkSize)
	}
	write := o.Write
	if write == nil {
		write = (*os.File).Write
	}
	var total, synced int64
	fd := int(f.Fd())
	for {
		// Fill the buffer before writing: fewer, larger writes.
		n := 0
		var rerr error
		for n < len(buf) && rerr == nil {
			var m int
			m, rerr = body.Read(buf[n:])
			n += m
		}
		if n > 0 {
			if o.Grow != nil {
				if err := o.Grow(total + int64(n)); err != nil {
					return total, err
				}
			}
			sum.Write(buf[:n])
			if _, err := write(f, buf[:n]); err != nil {
				return total, err
			}
			total += int64(n)
			if total-synced >= writebackChunk {
				_ = unix.SyncFileRange(fd, synced, total-synced, unix.SYNC_FILE_RANGE_WRITE)
				synced = total
			}
		}
		if rerr == io.EOF {
			return total, nil
		}
		if rerr != nil {
			return total, rerr
		}
	}
}

// SyncDir fsyncs the directory dir, so that a rename or a create in it
// survives a crash.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	d.Close()
	if err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}
