package fastpath

import (
	"errors"
	"net"
	"net/http"
	"slices"
	"strconv"
)

// Writer is an http.ResponseWriter over the connection, for a Responder
// that answers with a handler's own code rather than with Answer's
// calls: the federator's proxied reads go through httpx.ServeContent,
// the one home of their headers, on net/http and here alike. Like
// net/http's, it sends the head with the first body bytes (or at the
// end), sniffs a Content-Type the handler did not set, and frames the
// body by the Content-Length the handler set, or, when it set none, by
// the length of a body that fits the buffer; the same head and body come
// out but for Date, with the fields every fast answer carries (Date,
// X-Request-Id, Connection).
//
// A body with no Content-Length that outgrows the buffer (or is flushed)
// goes out in chunks (RFC 9112 §7.1), as net/http sends it, so that the
// connection stays open and a body cut short is told from a whole one;
// to an HTTP/1.0 client, which cannot read chunks, it goes out delimited
// by the connection's end (RFC 9112 §6.3), as net/http does too.
//
// What it does not do as net/http does: informational (1xx) answers are
// dropped; the chunks are the handler's writes, not net/http's buffer's;
// the handler's Date, Connection, Transfer-Encoding and X-Request-Id
// fields are replaced by the fast path's own.
//
// Its framing is exact: a body shorter than its Content-Length, because
// the handler returned or panicked early or a write failed, closes the
// connection after it (RFC 9112 §6.3: the client then sees an
// incomplete message), never a short answer that looks whole followed by
// the next one on a kept connection; Write refuses bytes beyond the
// Content-Length (http.ErrContentLength). A chunked body gets its last
// chunk only from End after a handler that did not Abort, so a handler
// that stopped early leaves it incomplete too.
type Writer struct {
	a       *Answer
	h       http.Header
	length  int64  // the body's Content-Length; -1 while unknown
	held    []byte // body bytes held while the length is unknown
	sent    bool   // the head is in the write buffer
	chunked bool   // the body goes in chunks
	ended   bool   // End was called
	err     error  // the first write error; the answer is broken
}

// holdMax is how much body a handler may write without a Content-Length
// before the head must go: net/http's bufferBeforeChunkingSize, so that
// a short answer gets the Content-Length net/http gives it.
const holdMax = 2048

// Writer returns the answer's http.ResponseWriter. A Respond call that
// took it returns true, and the fast path ends the answer when it does,
// as net/http ends a handler's answer when the handler returns (200 with
// an empty body when nothing was written); or it returns false, having
// called nothing but Header, and the request is handed off. An answer
// goes either through its Writer or through Status and End, Body or
// File, not both.
func (a *Answer) Writer() *Writer {
	w := &a.c.w
	h := w.h
	if h == nil {
		h = http.Header{}
	} else {
		clear(h)
	}
	*w = Writer{a: a, h: h, length: -1, held: w.held[:0]}
	a.w = w
	return w
}

// Header is the answer's header map, as http.ResponseWriter's.
func (w *Writer) Header() http.Header { return w.h }

// WriteHeader starts the answer with code; a Content-Length in the
// header map then frames the body. The head waits for the body or the
// end, as net/http's does. Later calls are ignored, as net/http ignores
// them (with a log line).
func (w *Writer) WriteHeader(code int) {
	a := w.a
	if a.status != 0 || code < 200 {
		return
	}
	a.Status(code)
	if v := w.h["Content-Length"]; len(v) > 0 {
		if n, err := strconv.ParseInt(v[0], 10, 64); err == nil && n >= 0 {
			w.length = n
		}
	}
}

// Write sends body bytes, as http.ResponseWriter's Write.
func (w *Writer) Write(p []byte) (int, error) {
	a := w.a
	if a.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	switch {
	case w.err != nil:
		return 0, w.err
	case !bodyAllowed(a.status):
		return 0, http.ErrBodyNotAllowed
	case !w.sent && w.length >= 0:
		w.sendHead(false, p)
	case !w.sent:
		if len(w.held)+len(p) <= holdMax {
			w.held = append(w.held, p...)
			return len(p), nil
		}
		// Too much to hold: the body goes in chunks (or, to HTTP/1.0,
		// runs to the connection's end).
		w.sendHead(true, p)
	}
	if w.err != nil {
		return 0, w.err
	}
	if a.c.req.Head {
		// As net/http: a HEAD's body is dropped, once it gave the
		// Content-Type and the length.
		return len(p), nil
	}
	if w.chunked {
		return w.writeChunk(p)
	}
	var over bool
	if w.length >= 0 && int64(len(p)) > w.length-a.sent {
		p, over = p[:w.length-a.sent], true
	}
	n, err := a.c.bw.Write(p)
	a.sent += int64(n)
	if err != nil {
		w.fail(err)
		return n, err
	}
	if over {
		return n, http.ErrContentLength
	}
	return n, nil
}

// writeChunk sends p as one chunk (none when p is empty: a chunk of size
// 0 is the last).
func (w *Writer) writeChunk(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	a := w.a
	var size [20]byte
	b := strconv.AppendInt(size[:0], int64(len(p)), 16)
	b = append(b, "\r\n"...)
	if _, err := a.c.bw.Write(b); err != nil {
		w.fail(err)
		return 0, err
	}
	n, err := a.c.bw.Write(p)
	a.sent += int64(n)
	if err == nil {
		_, err = a.c.bw.WriteString("\r\n")
	}
	if err != nil {
		w.fail(err)
		return n, err
	}
	return n, nil
}

// Abort marks the answer cut short, as a handler's panic with
// http.ErrAbortHandler does on net/http: End then sends no last chunk,
// and the connection closes after what was sent. A Responder that
// recovers such a panic calls it before End.
func (w *Writer) Abort() { w.a.broken = true }

// Spliceable reports whether Splice can move this answer's body: the
// connection is TCP and the request a GET. A handler asks before it
// chooses how to read what it will send.
func (w *Writer) Spliceable() bool {
	_, ok := w.a.c.c.(*net.TCPConn)
	return ok && !w.a.c.req.Head
}

// errNoSplice: Splice was called where it cannot move the body.
var errNoSplice = errors.New("fastpath: the body cannot be spliced: not TCP, a HEAD, or no Content-Length")

// Splice moves body bytes to the connection past the write buffer (by
// splice(2), say): it sends the head and what is buffered, and calls
// move with the TCP connection and how many bytes the Content-Length
// still allows; move writes at most that many to it and returns how
// many it wrote, which count as body bytes for the framing. It works
// on a Spliceable answer once WriteHeader was called with a
// Content-Length set; a failure of move breaks the answer.
func (w *Writer) Splice(move func(dst *net.TCPConn, limit int64) (int64, error)) (int64, error) {
	a := w.a
	tc, ok := a.c.c.(*net.TCPConn)
	if !ok || a.status == 0 || w.length < 0 || a.c.req.Head || !bodyAllowed(a.status) {
		return 0, errNoSplice
	}
	if !w.sent {
		w.sendHead(false, nil)
	}
	if w.err != nil {
		return 0, w.err
	}
	if err := a.c.bw.Flush(); err != nil {
		w.fail(err)
		return 0, err
	}
	// One move is one step under the stall timeout: a spliced read moves
	// what the replica's socket holds, a few MiB at most.
	a.c.sc.Arm()
	n, err := move(tc, w.length-a.sent)
	a.sent += n
	if err = a.c.sc.Check(err); err != nil {
		w.fail(err)
	}
	return n, err
}

// Flush sends what is buffered, as http.Flusher's.
func (w *Writer) Flush() {
	if w.a.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if !w.sent {
		// Without a length the body now goes in chunks.
		w.sendHead(w.length < 0, nil)
	}
	if w.err != nil {
		return
	}
	if err := w.a.c.bw.Flush(); err != nil {
		w.fail(err)
	}
}

// fail marks the answer broken by err: the connection closes after it.
func (w *Writer) fail(err error) {
	if w.err == nil {
		w.err = err
	}
	w.a.broken = true
}

// sendHead writes the head to the write buffer, with the body held so
// far; open: the body's length is not known, it goes in chunks (to
// HTTP/1.0, it runs to the connection's end). first is the body's first bytes when none are held,
// for the Content-Type net/http sniffs when the handler set none.
func (w *Writer) sendHead(open bool, first []byte) {
	a := w.a
	w.sent = true
	body := !a.c.req.Head && bodyAllowed(a.status)
	if _, ok := w.h["Content-Type"]; !ok && bodyAllowed(a.status) {
		if len(w.held) > 0 {
			first = w.held
		}
		if len(first) > 0 {
			w.h["Content-Type"] = []string{http.DetectContentType(first)}
		}
	}
	keys := make([]string, 0, len(w.h))
	for k := range w.h {
		switch k {
		case "Content-Length", "Date", "Connection", "Transfer-Encoding", "X-Request-Id":
			continue // the fast path's own (finishHead)
		}
		keys = append(keys, k)
	}
	slices.Sort(keys) // as net/http writes them
	for _, k := range keys {
		for _, v := range w.h[k] {
			a.b = appendField(a.b, k, v)
		}
	}
	length := w.length
	if open || !bodyAllowed(a.status) {
		// A HEAD's Content-Length is the handler's, describing what a
		// GET would get (none when it set none).
		length = -1
	}
	w.chunked = open && body && !a.c.req.http10
	if w.chunked {
		a.b = append(a.b, "Transfer-Encoding: chunked\r\n"...)
	}
	b := a.finishHead(length, open && body && !w.chunked)
	if _, err := a.c.bw.Write(b); err != nil {
		w.fail(err)
		return
	}
	if !body {
		return
	}
	if w.chunked {
		w.writeChunk(w.held)
		return
	}
	a.sent = int64(len(w.held))
	if _, err := a.c.bw.Write(w.held); err != nil {
		w.fail(err)
	}
}

// End completes the answer, as net/http does when the handler returns:
// the status and the head if none was sent (200; the held body with its
// length), and a body short of its Content-Length breaks the
// connection. The fast path calls it when the Responder returns; a
// Responder calls it first when it needs the answer's final StatusCode
// and Sent (an access log). Later calls do nothing.
func (w *Writer) End() {
	a := w.a
	if w.ended {
		return
	}
	w.ended = true
	if a.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if !w.sent {
		if w.length < 0 && (!a.c.req.Head || len(w.held) > 0) {
			w.length = int64(len(w.held))
		}
		w.sendHead(false, nil)
	}
	if w.length >= 0 && !a.c.req.Head && bodyAllowed(a.status) && a.sent != w.length {
		a.broken = true
	}
	if w.chunked && !a.broken {
		if _, err := a.c.bw.WriteString("0\r\n\r\n"); err != nil {
			w.fail(err)
		}
	}
}
