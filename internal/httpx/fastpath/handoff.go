package fastpath

import (
	"bufio"
	"io"
	"net"
	"sync"
)

// handoffListener is the net.Listener the http.Server serves: it yields
// the connections the fast path gives up.
type handoffListener struct {
	addr net.Addr
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newHandoffListener(addr net.Addr) *handoffListener {
	return &handoffListener{addr: addr, ch: make(chan net.Conn), done: make(chan struct{})}
}

// give passes c to net/http; false when the listener is closed.
func (l *handoffListener) give(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.done:
		return false
	}
}

// Accept returns the next handed-off connection.
func (l *handoffListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops Accept; http.Server.Shutdown calls it.
func (l *handoffListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

// Addr is the address of the real listener.
func (l *handoffListener) Addr() net.Addr { return l.addr }

// handoffConn is a connection handed to net/http: reads drain what the
// fast path had buffered first.
type handoffConn struct {
	net.Conn
	br *bufio.Reader
}

func (c *handoffConn) Read(p []byte) (int, error) { return c.br.Read(p) }

// ReadFrom keeps sendfile for net/http's file answers: it looks for
// io.ReaderFrom on the connection.
func (c *handoffConn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}

// CloseWrite lets net/http half-close before closing (it looks for the
// method on the connection), as it does for its own TCP connections.
func (c *handoffConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
