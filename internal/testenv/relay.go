package testenv

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Relay serves a TCP relay to target on 127.0.0.1 until the test ends,
// and returns its address: each connection accepted is joined to a new
// one to target, up copying the client's bytes to the server and down
// the server's to the client (each closes its destination when done), so
// that a test can watch, count or hold what goes through. nil copies as
// io.Copy does.
func Relay(t testing.TB, target string, up, down func(dst io.Writer, src io.Reader)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	plain := func(dst io.Writer, src io.Reader) { _, _ = io.Copy(dst, src) }
	if up == nil {
		up = plain
	}
	if down == nil {
		down = plain
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex // guards conns
		conns []net.Conn
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, s)
			mu.Unlock()
			wg.Go(func() { defer s.Close(); up(s, c) })
			wg.Go(func() { defer c.Close(); down(c, s) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}
