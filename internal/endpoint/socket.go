package endpoint

import (
	"bufio"
	"io"
	"net"

	"golang.org/x/sys/unix"
)

// Socket is where a Splicer's bytes come from: a TCP connection nothing
// else reads, read through Buf (which may hold the next bytes already).
// It is the one implementation of the socket side of Splicer for every
// kind that streams on a connection of its own (an HTTP answer's body,
// kXR_read answers); the kind keeps the framing (how many of the next
// bytes are payload) and asks Socket for those.
type Socket struct {
	Conn *net.TCPConn
	Buf  *bufio.Reader // over Conn
}

// Ready waits until bytes can be taken without waiting for the network,
// and returns how many (at least 1; what is buffered, else what the
// kernel has queued), or io.EOF when the peer closed the connection. It
// waits in the runtime's network poller, as a Read does, so Conn's read
// deadline (and a close of Conn) ends the wait.
func (s Socket) Ready() (int64, error) {
	if n := s.Buf.Buffered(); n > 0 {
		return int64(n), nil
	}
	sc, err := s.Conn.SyscallConn()
	if err != nil {
		return 0, err
	}
	var avail int
	var eof bool
	var serr error
	err = sc.Read(func(fd uintptr) bool {
		// The bytes queued first: nearly always some (the server
		// sends ahead of the reads), and one system call says so.
		if avail, serr = unix.IoctlGetInt(int(fd), unix.SIOCINQ); serr != nil || avail > 0 {
			return true
		}
		// None: the peer closed (a peek reads 0) or has not sent yet.
		var b [1]byte
		for {
			n, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
			switch {
			case err == unix.EINTR:
				continue
			case err == unix.EAGAIN:
				return false // wait until readable
			case err != nil:
				serr = err
			case n == 0:
				eof = true
			}
			// n > 0: bytes arrived since the ioctl; avail stays 0,
			// reported as 1.
			return true
		}
	})
	switch {
	case err != nil:
		return 0, err
	case serr != nil:
		return 0, serr
	case eof:
		return 0, io.EOF
	}
	return int64(max(avail, 1)), nil
}

// SpliceTo moves the next n bytes of the stream to dst: those Buf holds
// by a write (a few KiB at most), the rest by splice(2) (the
// net.TCPConn's ReadFrom of a TCP connection). A stream that ends before
// n is io.ErrUnexpectedEOF.
func (s Socket) SpliceTo(dst *net.TCPConn, n int64) (int64, error) {
	var done int64
	if k := s.Buf.Buffered(); k > 0 {
		b, _ := s.Buf.Peek(int(min(int64(k), n)))
		m, err := dst.Write(b)
		_, _ = s.Buf.Discard(m)
		done += int64(m)
		if err != nil {
			return done, err
		}
	}
	if done == n {
		return done, nil
	}
	lr := &io.LimitedReader{R: s.Conn, N: n - done}
	m, err := dst.ReadFrom(lr)
	done += m
	if err == nil && lr.N > 0 {
		err = io.ErrUnexpectedEOF
	}
	return done, err
}
