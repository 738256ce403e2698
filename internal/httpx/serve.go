package httpx

import (
	"cmp"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Content describes the representation ServeContent serves.
type Content struct {
	// ETag is the entity tag as the ETag header carries it ("\"x\"" or
	// "W/\"x\""); "" when there is none.
	ETag string
	// ModTime is the Last-Modified time; zero when unknown.
	ModTime time.Time
	// Weak says the validators may stay the same when the bytes change:
	// an entity tag made of the modification time and the size only
	// (nginx's), or no entity tag at all. If-Range then never matches
	// (RFC 9110 §13.1.5 asks for a strong validator), so a client that
	// resumes a download gets the whole of this version rather than the
	// rest of it joined to bytes of another.
	Weak bool
	// Type is the Content-Type of the bytes; "" is
	// application/octet-stream.
	Type string
	// Forward says the source reads forward only: the parts of a
	// multipart/byteranges answer are then sent in ascending order
	// (RFC 9110 §15.3.7.2: a client cannot rely on receiving the parts
	// in the order it asked for them), so that they can come from one
	// read of the representation.
	Forward bool
}

// Source gives ServeContent a representation and its bytes. ServeContent
// calls Describe, then (unless the answer is a 304, 412 or 416) Prepare,
// then WriteRange for each range it sends, in order, from one goroutine.
type Source interface {
	// Describe returns the representation's validators. want is what
	// the answer will send if its conditions pass: the whole
	// representation as one range, the ranges asked for, or nil when
	// the Range cannot be served. A source that learns its validators
	// by opening the bytes (a proxy choosing a replica) opens there.
	// Nothing has been written when it is called; its error is what
	// ServeContent returns.
	Describe(want []Range) (Content, error)
	// Prepare readies the first of send, the ranges the answer will
	// carry (the whole representation for a 200), before any status is
	// written: a source whose bytes may turn out to be of another
	// version, or missing, says so here, and ServeContent returns the
	// error having written nothing. head is true for HEAD, which sends
	// no bytes.
	Prepare(send []Range, head bool) error
	// WriteRange copies rg to w. The status has been written: an error
	// makes ServeContent abort the response.
	WriteRange(w io.Writer, rg Range) error
}

// Digester is a Source that can name its representation's digests for
// Want-Digest (RFC 3230 instance digests: of the whole representation,
// whatever range is sent).
type Digester interface {
	// Digests returns the digests of algos it knows (lower-case names,
	// values as FormatDigest takes them). An error is returned by
	// ServeContent with nothing written.
	Digests(algos []string) (map[string]string, error)
}

// Header values ServeContent sends; a header map's values are replaced,
// never written in place.
var (
	hdrBytes       = []string{"bytes"}
	hdrOctetStream = []string{"application/octet-stream"}
)

// ServeContent answers a GET or HEAD of a representation of size bytes
// from src: the one ranged, conditional read of every lakefed role. In
// order (RFC 9110 §13.2.2):
//
//   - Range is parsed by ParseRange (GET only: HEAD ignores it, §14.2);
//   - src.Describe gives the validators;
//   - If-Match / If-Unmodified-Since, then If-None-Match /
//     If-Modified-Since, are evaluated (CheckPreconditions): 412 or 304;
//   - If-Range (§13.1.5) that does not match a strong validator makes the
//     answer the whole representation;
//   - a Range that cannot be served is 416 with "Content-Range: bytes
//     */size": unsatisfiable (§14.1.2), and also malformed, overlapping,
//     adding up to more than the representation or over MaxRanges.
//     §14.2 lets a server ignore or reject such a Range, and §15.5.17
//     names invalid and overlapping ranges among the reasons for 416;
//     lakefed rejects them, in every role alike, so that a client sees
//     the same answer whether it was redirected to a storage role or
//     proxied, and a hostile Range costs nothing;
//   - src.Prepare readies the first bytes; then the status: 200, 206 with
//     Content-Range, or 206 multipart/byteranges (§14.6), each with a
//     Content-Length.
//
// It returns nil once it answered, and otherwise the error of src, having
// written nothing, for the caller to answer. A failure after the status
// aborts the response (panic(http.ErrAbortHandler)): the client sees a
// broken transfer, never a short body that looks whole.
func ServeContent(w http.ResponseWriter, r *http.Request, size int64, src Source) error {
	head := r.Method == http.MethodHead
	var rh string
	if !head {
		rh = r.Header.Get("Range")
	}
	ranges, rerr := ParseRange(rh, size)
	whole := []Range{{Start: 0, Length: size}}
	want := whole
	switch {
	case rerr != nil:
		want = nil
	case len(ranges) > 0:
		want = ranges
	}
	c, err := src.Describe(want)
	if err != nil {
		return err
	}
	h := w.Header()
	switch CheckPreconditions(r.Header, r.Method, c.ETag, c.ModTime, true) {
	case http.StatusNotModified:
		// RFC 9110 §15.4.5: a 304 carries the validators a 200 would.
		setValidators(h, &c)
		w.WriteHeader(http.StatusNotModified)
		return nil
	case http.StatusPreconditionFailed:
		WriteError(w, http.StatusPreconditionFailed, "precondition failed")
		return nil
	}
	if rh != "" {
		if ir := r.Header.Get("If-Range"); ir != "" && !ifRange(ir, &c) {
			// The client's copy is not this version: it gets the whole
			// of this one, whatever its Range said.
			ranges, rerr = nil, nil
		}
	}
	if rerr != nil {
		h["Accept-Ranges"] = hdrBytes
		h["Content-Range"] = []string{"bytes */" + strconv.FormatInt(size, 10)}
		WriteError(w, http.StatusRequestedRangeNotSatisfiable, "range not satisfiable")
		return nil
	}
	send := whole
	if len(ranges) > 0 {
		send = ranges
		if c.Forward && len(ranges) > 1 {
			send = slices.Clone(ranges)
			slices.SortFunc(send, func(a, b Range) int { return cmp.Compare(a.Start, b.Start) })
		}
	}
	var digest string
	if d, ok := src.(Digester); ok {
		if wd := r.Header["Want-Digest"]; len(wd) > 0 {
			if algos := ParseWantDigest(strings.Join(wd, ",")); len(algos) > 0 {
				sums, err := d.Digests(algos)
				if err != nil {
					return err
				}
				digest = FormatDigest(sums, algos...)
			}
		}
	}
	if err := src.Prepare(send, head); err != nil {
		return err
	}
	setValidators(h, &c)
	if digest != "" {
		h["Digest"] = []string{digest}
	}
	ctype := hdrOctetStream
	if c.Type != "" {
		ctype = []string{c.Type}
	}
	if head || len(ranges) == 0 {
		h["Content-Type"] = ctype
		h["Content-Length"] = []string{strconv.FormatInt(size, 10)}
		w.WriteHeader(http.StatusOK)
		if !head && size > 0 && src.WriteRange(w, whole[0]) != nil {
			panic(http.ErrAbortHandler)
		}
		return nil
	}
	if len(send) == 1 {
		h["Content-Type"] = ctype
		h["Content-Range"] = []string{send[0].ContentRange(size)}
		h["Content-Length"] = []string{strconv.FormatInt(send[0].Length, 10)}
		w.WriteHeader(http.StatusPartialContent)
		if src.WriteRange(w, send[0]) != nil {
			panic(http.ErrAbortHandler)
		}
		return nil
	}
	// multipart/byteranges (RFC 9110 §14.6), its length computed first
	// by writing the parts' headers to a counter.
	var cw countWriter
	mw := multipart.NewWriter(&cw)
	for _, rg := range send {
		_, _ = mw.CreatePart(partHeader(ctype[0], rg, size))
		cw += countWriter(rg.Length)
	}
	_ = mw.Close()
	h["Content-Type"] = []string{"multipart/byteranges; boundary=" + mw.Boundary()}
	h["Content-Length"] = []string{strconv.FormatInt(int64(cw), 10)}
	w.WriteHeader(http.StatusPartialContent)
	pw := multipart.NewWriter(w)
	_ = pw.SetBoundary(mw.Boundary())
	for _, rg := range send {
		part, err := pw.CreatePart(partHeader(ctype[0], rg, size))
		if err != nil || src.WriteRange(part, rg) != nil {
			panic(http.ErrAbortHandler)
		}
	}
	if pw.Close() != nil {
		panic(http.ErrAbortHandler)
	}
	return nil
}

// setValidators sets the headers that describe c on an answer.
func setValidators(h http.Header, c *Content) {
	h["Accept-Ranges"] = hdrBytes
	if c.ETag != "" {
		h["Etag"] = []string{c.ETag}
	}
	if !c.ModTime.IsZero() {
		var b [len(http.TimeFormat) + 4]byte
		h["Last-Modified"] = []string{string(c.ModTime.UTC().AppendFormat(b[:0], http.TimeFormat))}
	}
}

// ifRange reports whether an If-Range value v lets the Range apply to c
// (RFC 9110 §13.1.5): an entity tag matching c's by strong comparison, or
// a date equal to c's Last-Modified; never when c's validators are weak.
func ifRange(v string, c *Content) bool {
	if c.Weak {
		return false
	}
	v = strings.TrimSpace(v)
	if strings.HasPrefix(v, `"`) || strings.HasPrefix(v, "W/") {
		return c.ETag != "" && ETagMatch(v, c.ETag, false)
	}
	t, err := http.ParseTime(v)
	return err == nil && !c.ModTime.IsZero() && t.Equal(c.ModTime.Truncate(time.Second))
}

// partHeader is the header of one multipart/byteranges part.
func partHeader(ctype string, rg Range, size int64) textproto.MIMEHeader {
	return textproto.MIMEHeader{"Content-Type": {ctype}, "Content-Range": {rg.ContentRange(size)}}
}

// countWriter counts the bytes written to it.
type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) {
	*c += countWriter(len(p))
	return len(p), nil
}
