package fastpath

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/lakefed/lakefed/internal/httpx"
)

// Request is a plain request, as the Responder sees it. Its byte slices
// point into the connection's buffer: valid only during Respond.
type Request struct {
	// Head is true for HEAD, false for GET.
	Head bool
	// Target is the request target's path: an origin-form path of
	// unreserved characters, "/" and "-._~+,=:@", with no %-escape, so
	// it is the path net/http would give the handler
	// (http.Request.URL.Path), not cleaned.
	Target []byte
	// Query is the request target's query, after the "?", as net/http
	// gives it (http.Request.URL.RawQuery): not empty, of the path's
	// characters and "&", with no %-escape. Nil when there is none, and
	// always nil unless Options.Query is set.
	Query []byte
	// Host is the Host header's value; nil when there is none (HTTP/1.0).
	Host []byte
	// Accept is the Accept header's value; nil when there is none.
	Accept []byte

	http10 bool   // HTTP/1.0: keep-alive only when asked for, and then said
	close  bool   // the client sent Connection: close
	keep   bool   // the client sent Connection: keep-alive
	sentID []byte // the client's X-Request-ID; nil: none
	c      *conn
}

// Method is "GET" or "HEAD".
func (r *Request) Method() string {
	if r.Head {
		return http.MethodHead
	}
	return http.MethodGet
}

// ID is the request's ID, as the answer's X-Request-Id header carries it
// (the client's when sane, else a fresh one: httpx.TagRequest's rule).
func (r *Request) ID() string { return string(r.c.id[:r.c.idLen]) }

// RemoteAddr is the client's address as http.Request.RemoteAddr has it.
func (r *Request) RemoteAddr() string { return r.c.remoteAddr() }

// RemoteAddrPort is RemoteAddr parsed, as netip.ParseAddrPort reads it,
// without making the string.
func (r *Request) RemoteAddrPort() netip.AddrPort { return r.c.remoteAddrPort() }

// Context is a context carrying the request's ID (httpx.RequestID), as
// the handler's r.Context() does, for the calls an answer makes. It is
// made on each call: a Responder that needs none pays nothing.
func (r *Request) Context() context.Context {
	return httpx.WithRequestID(context.Background(), r.ID())
}

// HTTPRequest is the request as net/http would give it to a handler,
// for a Responder that answers with a handler's code (Answer.Writer),
// with ctx as its context: the method, the target as URL.Path,
// URL.RawQuery and RequestURI, the version, Host, RemoteAddr, Close, and those of the
// few headers the fast path lets through that a handler may read
// (Accept, the client's X-Request-Id). It is made on each call.
func (r *Request) HTTPRequest(ctx context.Context) *http.Request {
	target := string(r.Target)
	hr := &http.Request{
		Method:     r.Method(),
		URL:        &url.URL{Path: target},
		RequestURI: target,
		Proto:      "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:     http.Header{},
		Host:       string(r.Host),
		RemoteAddr: r.RemoteAddr(),
		Close:      r.close || r.http10 && !r.keep,
	}
	if r.Query != nil {
		hr.URL.RawQuery = string(r.Query)
		hr.RequestURI = target + "?" + hr.URL.RawQuery
	}
	if r.http10 {
		hr.Proto, hr.ProtoMinor = "HTTP/1.0", 0
	}
	if r.Accept != nil {
		hr.Header["Accept"] = []string{string(r.Accept)}
	}
	if r.sentID != nil {
		hr.Header[httpx.RequestIDHeader] = []string{string(r.sentID)}
	}
	return hr.WithContext(ctx)
}

// Answer is how a Responder answers: Status, then the headers, then one
// of End, Body or File, which add the headers every answer carries (Date,
// Content-Length as net/http would send it, X-Request-Id, Connection) and
// send it. Nothing reaches the connection before that end, so a Responder
// may still decline after Status and headers.
type Answer struct {
	c      *conn
	b      []byte // the head so far, in the write buffer's free space
	status int
	sent   int64
	ended  bool
	keep   bool    // the connection stays open
	broken bool    // a body went out short
	w      *Writer // the Writer answering, if the Responder took it
}

// Status starts the answer with its status line, dropping whatever was
// begun before. The line names the request's version, HTTP/1.0 or
// HTTP/1.1, as net/http's does (RFC 9110 §6.2 would allow 1.1 to a 1.0
// client, but the answer must be the handler's).
func (a *Answer) Status(code int) {
	b := a.c.bw.AvailableBuffer()
	if a.c.req.http10 {
		b = append(b, "HTTP/1.0 "...)
	} else {
		b = append(b, "HTTP/1.1 "...)
	}
	b = strconv.AppendInt(b, int64(code), 10)
	if text := http.StatusText(code); text != "" {
		b = append(b, ' ')
		b = append(b, text...)
	} else {
		b = append(b, " status code "...)
		b = strconv.AppendInt(b, int64(code), 10)
	}
	a.b = append(b, "\r\n"...)
	a.status = code
}

// Header adds a header line. name is written as given (net/http's
// canonical form, "Etag", for answers that must match its own); CR and
// LF in value become spaces and surrounding whitespace goes, as
// net/http's Header.Write does it.
func (a *Answer) Header(name, value string) {
	a.mustStart()
	a.b = appendField(a.b, name, value)
}

// HeaderBytes is Header with a value in bytes.
func (a *Answer) HeaderBytes(name string, value []byte) {
	a.mustStart()
	a.b = appendField(a.b, name, value)
}

// HeaderInt adds a header whose value is the decimal n.
func (a *Answer) HeaderInt(name string, n int64) {
	a.mustStart()
	a.b = append(a.b, name...)
	a.b = append(a.b, ": "...)
	a.b = strconv.AppendInt(a.b, n, 10)
	a.b = append(a.b, "\r\n"...)
}

// HeaderTime adds a header whose value is t as an HTTP date (RFC 9110
// §5.6.7), to the second. The connection keeps the last one it
// formatted.
func (a *Answer) HeaderTime(name string, t time.Time) {
	a.mustStart()
	c := a.c
	if sec := t.Unix(); c.timeFmt == nil || c.timeSec != sec {
		c.timeSec = sec
		c.timeFmt = t.UTC().AppendFormat(c.timeFmt[:0], http.TimeFormat)
	}
	a.b = append(a.b, name...)
	a.b = append(a.b, ": "...)
	a.b = append(a.b, c.timeFmt...)
	a.b = append(a.b, "\r\n"...)
}

// End sends the answer without a body. A GET's answer then says
// Content-Length: 0 where its status allows a body (without it the body
// would run to the connection's end, RFC 9112 §6.3), as net/http says
// it; a HEAD's answer gets no Content-Length but the Responder's own,
// which describes what a GET would get.
func (a *Answer) End() {
	n := int64(-1)
	if !a.c.req.Head && bodyAllowed(a.status) {
		n = 0
	}
	a.end(n, nil, nil)
}

// Body sends body with its Content-Length; a HEAD's answer gets the
// Content-Length alone.
func (a *Answer) Body(body []byte) { a.end(int64(len(body)), body, nil) }

// File sends size bytes of f, from its current offset, with
// Content-Length: size; over TCP by sendfile. A HEAD's answer gets the
// Content-Length alone, and f is not read (it may be nil). A file that
// gives fewer bytes than size leaves the answer short, and the
// connection is closed after it, so the client sees a broken transfer,
// never a short body that looks whole.
func (a *Answer) File(f *os.File, size int64) { a.end(size, nil, f) }

// StatusCode is the status given to Status.
func (a *Answer) StatusCode() int { return a.status }

// Sent is how many body bytes went out, once the answer ended.
func (a *Answer) Sent() int64 { return a.sent }

// end completes the head with length (< 0: no Content-Length) and the
// headers every answer carries, and sends it with the body.
func (a *Answer) end(length int64, body []byte, f *os.File) {
	b := a.finishHead(length, false)
	c := a.c
	if c.req.Head {
		// The answer stays in the buffer until the connection would
		// wait for the client (serve flushes then), so that pipelined
		// answers share one write.
		c.bw.Write(b)
		return
	}
	if body != nil {
		b = append(b, body...)
		a.sent = int64(len(body))
	}
	c.bw.Write(b)
	if f == nil || length == 0 {
		return
	}
	if c.bw.Flush() != nil {
		a.broken = true
		return
	}
	// sendfile for a TCP connection (net.TCPConn.ReadFrom, step by step
	// under the stall timeout); a plain copy otherwise.
	var err error
	a.sent, err = io.Copy(c.sc, &io.LimitedReader{R: f, N: length})
	if err != nil || a.sent != length {
		a.broken = true
	}
}

// finishHead completes the head with length (< 0: no Content-Length)
// and the headers every answer carries, marks the answer ended and
// returns the head; closing: the connection closes after the answer
// whatever the request asked (a body without a length, which only the
// connection's end delimits, RFC 9112 §6.3).
func (a *Answer) finishHead(length int64, closing bool) []byte {
	a.mustStart()
	c := a.c
	req := &c.req
	b := a.b
	b = append(b, "Date: "...)
	b = append(b, c.s.httpDate(time.Now())...)
	b = append(b, "\r\n"...)
	if length >= 0 {
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, length, 10)
		b = append(b, "\r\n"...)
	}
	b = append(b, httpx.RequestIDHeader+": "...)
	b = append(b, c.id[:c.idLen]...)
	b = append(b, "\r\n"...)
	// Persistence (RFC 9112 §9.3): an HTTP/1.1 connection stays open
	// unless the client said close, and is told when it does not; an
	// HTTP/1.0 one closes unless the client asked to keep it, and is
	// then told it is kept (RFC 9112 Appendix C.2.2), as net/http does.
	a.keep = !closing && !req.close && (!req.http10 || req.keep)
	switch {
	case req.http10 && a.keep:
		b = append(b, "Connection: keep-alive\r\n"...)
	case !req.http10 && !a.keep:
		b = append(b, "Connection: close\r\n"...)
	}
	b = append(b, "\r\n"...)
	a.ended = true
	return b
}

// mustStart panics when Status was not called: a head without a status
// line would be garbage on the wire.
func (a *Answer) mustStart() {
	if a.status == 0 {
		panic("fastpath: Answer used before Status")
	}
}

// bodyAllowed reports whether an answer of status may carry a body (RFC
// 9110 §15.2, §15.3.5, §15.4.5).
func bodyAllowed(status int) bool {
	return status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
}

// appendField appends "name: value\r\n" to b, value sanitized as
// net/http's Header.Write does it: CR and LF become spaces, and leading
// and trailing whitespace goes (textproto.TrimString).
func appendField[T string | []byte](b []byte, name string, value T) []byte {
	b = append(b, name...)
	b = append(b, ": "...)
	start, end := 0, len(value)
	for start < end && isSpace(value[start]) {
		start++
	}
	for end > start && isSpace(value[end-1]) {
		end--
	}
	i := len(b)
	b = append(b, value[start:end]...)
	if v := b[i:]; bytes.IndexByte(v, '\r') >= 0 || bytes.IndexByte(v, '\n') >= 0 {
		for j, c := range v {
			if c == '\r' || c == '\n' {
				v[j] = ' '
			}
		}
	}
	return append(b, "\r\n"...)
}

// isSpace is textproto's ASCII whitespace.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
