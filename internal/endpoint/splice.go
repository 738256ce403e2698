package endpoint

import (
	"context"
	"errors"
	"net"
)

// Splicer is implemented by readers Open returns whose bytes arrive on a
// TCP connection nothing else reads. A caller that forwards them to
// another TCP connection (the root:// door) moves them there with
// splice(2), inside the kernel: a proxy that copies every byte into its
// memory and out again spends most of its CPU on those two copies.
//
// A reader may splice only some of the time (it moved to a replica of a
// kind that cannot): Ready then says ErrNoSplice, and the caller takes the
// next bytes with Read.
type Splicer interface {
	// Ready waits until bytes can be taken without waiting for the
	// network, and returns how many (at least 1, at most those left in
	// the range); 0 and io.EOF at the end of the range.
	Ready() (int64, error)
	// SpliceTo moves the next n bytes, at most what Ready returned, to
	// dst. Fewer than n with an error leaves the reader at the offset
	// reached: the next Ready or Read goes on from there.
	SpliceTo(dst *net.TCPConn, n int64) (int64, error)
}

// ErrNoSplice is Splicer.Ready's answer when the next bytes must be read
// with Read.
var ErrNoSplice = errors.New("endpoint: this reader cannot splice its next bytes")

// RangeSeeker is implemented by readers that go on with another range of
// the file they read, of the same version, without opening it again (no
// new look-up, the same replica and failover state): the root:// door
// keeps one per open file handle for all its reads.
type RangeSeeker interface {
	// SeekRange drops what is left of the current range and reads n
	// bytes from off (n < 0: to the end of the file) next.
	SeekRange(off, n int64) error
}

// spliceKey marks a context whose reads are forwarded to a socket.
type spliceKey struct{}

// WithSplice returns ctx marked for a caller that forwards what it reads
// to a TCP connection: kinds that can then read large ranges on a
// connection of their own, so that their readers are Splicers. Only the
// caller that splices should ask: such a connection is not reused.
func WithSplice(ctx context.Context) context.Context {
	return context.WithValue(ctx, spliceKey{}, true)
}

// SpliceWanted reports whether ctx was marked by WithSplice.
func SpliceWanted(ctx context.Context) bool {
	v, _ := ctx.Value(spliceKey{}).(bool)
	return v
}
