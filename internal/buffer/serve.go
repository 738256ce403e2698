package buffer

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/httpx"
	"github.com/lakefed/lakefed/internal/httpx/davxml"
)

// Wrap puts the buffer in front of next (the federator, or any handler
// that reaches the targets):
//
//   - PUT under a buffered prefix is taken by the buffer (servePut);
//   - GET and HEAD of a path the buffer holds are answered from its copy,
//     with Range and conditional requests (RFC 9110 §13, §14);
//   - PROPFIND Depth 0 of a file the buffer holds is answered by it;
//     Depth 0 or 1 of a directory is next's answer with the buffered
//     entries merged in (the buffer's version of a file wins), or the
//     buffer's alone when next has no such directory yet;
//   - DELETE of a path the buffer holds drops the buffered versions
//     (their migration stops), then goes to next; next's 404 becomes 204
//     when the buffer held the file, which was then the only copy;
//   - everything else goes to next.
//
// A path that does not pass httpx.CleanPath goes to next, which refuses
// it.
func (b *Buffer) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := httpx.CleanPath(r.URL.Path)
		if err != nil {
			next.ServeHTTP(w, r)
			return
		}
		switch r.Method {
		case http.MethodPut:
			if pre := b.prefixOf(p); pre != nil {
				b.servePut(w, r, p, pre)
				return
			}
		case http.MethodGet, http.MethodHead:
			if e := b.acquire(p); e != nil {
				defer b.release(e)
				b.serveGet(w, r, e)
				return
			}
		case "PROPFIND":
			if b.servePropfind(w, r, p, next) {
				return
			}
		case http.MethodDelete:
			if b.drop(r.Context(), p) {
				next.ServeHTTP(&notFoundIsGone{ResponseWriter: w}, r)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// serveGet answers GET or HEAD from e's spool file, with the ranges and
// conditionals of every role (httpx.ServeContent).
func (b *Buffer) serveGet(w http.ResponseWriter, r *http.Request, e *entry) {
	f, err := b.open(e)
	if err != nil {
		b.log.ErrorContext(r.Context(), "open spool file", "path", e.path, "err", err)
		httpx.WriteError(w, http.StatusInternalServerError, "cannot read the buffered file")
		return
	}
	defer f.Close()
	w.Header().Set("X-Lakefed-Buffered", "true")
	if err := httpx.ServeContent(w, r, e.size, &spoolContent{e: e, f: f}); err != nil {
		httpx.WriteError(w, http.StatusInternalServerError, "cannot read the buffered file")
	}
}

// spoolContent is a buffered version as httpx.ServeContent reads it.
type spoolContent struct {
	e *entry
	f *os.File
}

// Describe gives the version's entity tag (strong: it names the version
// and its adler32) and modification time.
func (s *spoolContent) Describe([]httpx.Range) (httpx.Content, error) {
	return httpx.Content{ETag: `"` + s.e.etag() + `"`, ModTime: s.e.mtime}, nil
}

// Digests are the sums taken as the version was written.
func (s *spoolContent) Digests([]string) (map[string]string, error) { return s.e.info().Checksums, nil }

// Prepare has nothing to do: the spool file is open.
func (s *spoolContent) Prepare([]httpx.Range, bool) error { return nil }

// WriteRange copies rg of the spool file to w.
func (s *spoolContent) WriteRange(w io.Writer, rg httpx.Range) error {
	n, err := io.Copy(w, io.NewSectionReader(s.f, rg.Start, rg.Length))
	if err == nil && n != rg.Length {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// drop removes every buffered version of p (a client's DELETE) and
// reports whether there was one.
func (b *Buffer) drop(ctx context.Context, p string) bool {
	b.mu.Lock()
	e := b.cur[p]
	b.mu.Unlock()
	if e == nil {
		return false
	}
	if err := b.j.remove(context.WithoutCancel(ctx), e.seq); err != nil {
		b.log.ErrorContext(ctx, "drop buffered file", "path", p, "err", err)
		return false
	}
	b.mu.Lock()
	rm := b.dropLocked(e)
	b.mu.Unlock()
	if rm {
		b.removeSpool(e)
	}
	return true
}

// notFoundIsGone turns next's 404 for a DELETE into 204: the buffer held
// the only copy, and it is gone.
type notFoundIsGone struct {
	http.ResponseWriter
	swallow bool
}

func (n *notFoundIsGone) WriteHeader(code int) {
	if code == http.StatusNotFound {
		n.swallow = true
		n.ResponseWriter.Header().Del("Content-Type")
		n.ResponseWriter.Header().Del("Content-Length")
		n.ResponseWriter.WriteHeader(http.StatusNoContent)
		return
	}
	n.ResponseWriter.WriteHeader(code)
}

func (n *notFoundIsGone) Write(p []byte) (int, error) {
	if n.swallow {
		return len(p), nil
	}
	return n.ResponseWriter.Write(p)
}

func (n *notFoundIsGone) Unwrap() http.ResponseWriter { return n.ResponseWriter }

// maxPropfindAnswer bounds next's PROPFIND answer the buffer merges into.
const maxPropfindAnswer = 64 << 20

// servePropfind answers a PROPFIND that involves buffered files and
// reports whether it did; false sends the request to next untouched.
func (b *Buffer) servePropfind(w http.ResponseWriter, r *http.Request, p string, next http.Handler) bool {
	depth := r.Header.Get("Depth")
	self, isFile := b.stat(p)
	if isFile {
		if depth != "0" && depth != "1" {
			return false // next refuses infinity as it does for any path
		}
		// A file's Depth 1 is its Depth 0 (RFC 4918 §9.1).
		writeMultistatus(w, []davEntry{{p, self}})
		return true
	}
	if depth != "0" && depth != "1" {
		return false
	}
	kids := b.children(p)
	if len(kids) == 0 {
		return false
	}
	// Ask next, and merge.
	rec := &recorder{h: http.Header{}}
	next.ServeHTTP(rec, r)
	var items []davEntry
	switch {
	case rec.code == http.StatusMultiStatus:
		ms, err := davxml.Decode(bytes.NewReader(rec.body.Bytes()), maxPropfindAnswer)
		if err != nil {
			rec.flush(w)
			return true
		}
		for i := range ms.Responses {
			resp := &ms.Responses[i]
			rp := davxml.HrefPath(resp.Href, false)
			if cp, err := httpx.CleanPath(rp); err == nil {
				rp = cp
			}
			in := resp.Info()
			in.Name = path.Base(rp)
			items = append(items, davEntry{rp, in})
		}
	case rec.code == http.StatusNotFound:
		items = append(items, davEntry{p, endpoint.Info{Name: path.Base(p), IsDir: true}})
	default:
		rec.flush(w)
		return true
	}
	if depth == "1" {
		seen := map[string]int{}
		for i, it := range items {
			seen[it.path] = i
		}
		for _, k := range kids {
			kp := davxml.JoinName(p, k.Name)
			if i, ok := seen[kp]; ok {
				if !k.IsDir {
					items[i].info = k // the buffer's version is the newest
				}
				continue
			}
			items = append(items, davEntry{kp, k})
		}
	}
	writeMultistatus(w, items)
	return true
}

// stat returns the Info of a file the buffer holds.
func (b *Buffer) stat(p string) (endpoint.Info, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e := b.cur[p]; e != nil {
		return e.info(), true
	}
	return endpoint.Info{}, false
}

// children returns what the buffer holds directly inside the directory
// p: its files, and directories for deeper files, sorted by name.
func (b *Buffer) children(p string) []endpoint.Info {
	b.mu.Lock()
	defer b.mu.Unlock()
	byName := map[string]endpoint.Info{}
	for q, e := range b.cur {
		if q == p || !under(q, p) {
			continue
		}
		rest := strings.TrimPrefix(q[len(p):], "/")
		name, deeper, _ := strings.Cut(rest, "/")
		if deeper != "" {
			if _, ok := byName[name]; !ok {
				byName[name] = endpoint.Info{Name: name, IsDir: true}
			}
			continue
		}
		byName[name] = e.info()
	}
	out := make([]endpoint.Info, 0, len(byName))
	for _, in := range byName {
		out = append(out, in)
	}
	slices.SortFunc(out, func(a, b endpoint.Info) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// recorder keeps next's answer to a PROPFIND so it can be merged.
type recorder struct {
	h    http.Header
	code int
	body bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.h }
func (r *recorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
}
func (r *recorder) Write(p []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	if r.body.Len()+len(p) > maxPropfindAnswer {
		return 0, errTooBig
	}
	return r.body.Write(p)
}

// flush sends the recorded answer as it was.
func (r *recorder) flush(w http.ResponseWriter) {
	for k, v := range r.h {
		w.Header()[k] = v
	}
	if r.code == 0 {
		r.code = http.StatusOK
	}
	w.WriteHeader(r.code)
	_, _ = w.Write(r.body.Bytes())
}

var errTooBig = httpx.NewError(http.StatusInsufficientStorage, "answer too large to merge", nil)

// davEntry is one response of a multistatus: a logical path and what it
// is.
type davEntry struct {
	path string
	info endpoint.Info
}

// writeMultistatus writes a 207 with one response per item, in the
// federator's form (davxml: the live properties clients use).
func writeMultistatus(w http.ResponseWriter, items []davEntry) {
	var sb strings.Builder
	sb.WriteString(davxml.MultistatusOpen)
	for _, it := range items {
		davxml.AppendResponse(&sb, it.path, it.info)
	}
	davxml.WriteMultistatus(w, &sb)
}
