package buffer

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

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
//   - DELETE of a path the buffer holds is serveDelete: journaled, and
//     carried to the targets by the mover; meanwhile GET, HEAD and
//     PROPFIND say 404;
//   - MOVE from or to a buffered prefix (or a directory above one) is
//     refused (Holds);
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
				b.servePut(w, r, p, pre, next)
				return
			}
		case http.MethodGet, http.MethodHead:
			if e := b.acquire(p); e != nil {
				defer b.release(e)
				b.serveGet(w, r, e)
				return
			}
			if b.deleted(p) {
				httpx.WriteError(w, http.StatusNotFound, "not found")
				return
			}
		case "PROPFIND":
			if b.servePropfind(w, r, p, next) {
				return
			}
		case http.MethodDelete:
			if pre := b.prefixOf(p); pre != nil && b.serveDelete(w, r, p, pre, next) {
				return
			}
		case "MOVE":
			if b.refuseMove(w, r, p) {
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// serveGet answers GET or HEAD from e's spool file, with the ranges and
// conditionals of every role (httpx.ServeContent). A whole GET is
// checked against the journal's adler32 as it streams, and cut short
// before its last bytes if the file rotted (spool.go); a file known
// damaged is refused with 500.
func (b *Buffer) serveGet(w http.ResponseWriter, r *http.Request, e *entry) {
	b.mu.Lock()
	damaged := e.damaged
	b.mu.Unlock()
	if damaged != "" {
		httpx.WriteError(w, http.StatusInternalServerError, "buffer: the buffered copy of this file is damaged on disk")
		return
	}
	f, err := b.open(e)
	if err != nil {
		b.log.ErrorContext(r.Context(), "open spool file", "path", e.path, "err", err)
		httpx.WriteError(w, http.StatusInternalServerError, "cannot read the buffered file")
		return
	}
	defer f.Close()
	w.Header().Set("X-Lakefed-Buffered", "true")
	if err := httpx.ServeContent(w, r, e.size, &spoolContent{b: b, e: e, f: f}); err != nil {
		httpx.WriteError(w, http.StatusInternalServerError, "cannot read the buffered file")
	}
}

// spoolContent is a buffered version as httpx.ServeContent reads it.
type spoolContent struct {
	b *Buffer
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

// WriteRange copies rg of the spool file to w; a range that is the whole
// file is checked against the journal's adler32 on its way (spool.go).
func (s *spoolContent) WriteRange(w io.Writer, rg httpx.Range) error {
	var r io.Reader = io.NewSectionReader(s.f, rg.Start, rg.Length)
	if rg.Start == 0 && rg.Length == s.e.size {
		r = &checkedRead{c: s.b.newSumCheck(s.e, nil), r: r}
	}
	n, err := io.Copy(w, r)
	if err == nil && n != rg.Length {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// serveDelete answers a DELETE of p under pre when the buffer holds p,
// and reports whether it did; false sends it to next (the buffer holds
// nothing there, and next's answer is the whole truth).
//
// A DELETE of a held file goes to next first (every replica the
// federation knows, on the targets and elsewhere); then:
//
//   - next deleted them, or found none (the file was only here): the
//     delete is journaled as a pending delete and answered 204;
//   - next could not reach a target (5xx, 408, 429): the delete is
//     journaled all the same and answered 202 Accepted, with next's
//     reason: the buffer exists to absorb target outages, and its
//     journal makes the delete as durable as an acknowledged PUT;
//   - next refused (403, 409, 412, 423...): its answer is relayed and the
//     buffer changes nothing.
//
// Either way the answer is what happened: after a 2xx every read through
// the buffer says 404, a kill -9 keeps the pending delete, and the mover
// carries it to every target once the copy in flight for the path (if
// any) has its answer, so a copy committed after next's DELETE is
// removed too. Refusing with 503 instead would have been honest as well,
// but would leave the client to retry what the buffer can hold. A second
// DELETE while one is pending is 404.
//
// Preconditions (If-Match...; RFC 9110 §13.1) are the buffered version's
// to meet, not the older one a target still holds: evaluated here (412),
// and not sent on.
func (b *Buffer) serveDelete(w http.ResponseWriter, r *http.Request, p string, pre *Prefix, next http.Handler) bool {
	unlock := b.paths.lock(p)
	defer unlock()
	b.mu.Lock()
	e := b.cur[p]
	b.mu.Unlock()
	switch {
	case e == nil:
		return false
	case e.deleting():
		httpx.WriteError(w, http.StatusNotFound, "not found")
		return true
	}
	if code := httpx.CheckPreconditions(r.Header, http.MethodDelete, `"`+e.etag()+`"`, e.mtime, true); code != 0 {
		httpx.WriteError(w, code, http.StatusText(code))
		return true
	}
	if r.Header.Get("If-Match") != "" || r.Header.Get("If-None-Match") != "" || r.Header.Get("If-Unmodified-Since") != "" {
		r = r.Clone(r.Context())
		for _, k := range []string{"If-Match", "If-None-Match", "If-Unmodified-Since"} {
			r.Header.Del(k)
		}
	}
	rec := httpx.NewRecorder(maxPropfindAnswer, false)
	next.ServeHTTP(rec, r)
	code := rec.Code
	if code == 0 {
		code = http.StatusOK
	}
	gone := code/100 == 2 || code == http.StatusNotFound
	if !gone && endpoint.ClassOfStatus(code) != endpoint.ErrUnavailable {
		rec.Flush(w)
		return true
	}
	if err := b.markDeleted(r.Context(), p, pre); err != nil {
		w.Header().Set("Retry-After", retryAfter)
		httpx.WriteError(w, http.StatusServiceUnavailable, err.Error())
		return true
	}
	if gone {
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(http.StatusNoContent)
		return true
	}
	reason := strings.TrimSpace(rec.Body.String())
	if i := strings.IndexByte(reason, '\n'); i >= 0 {
		reason = reason[:i]
	}
	httpx.WriteError(w, http.StatusAccepted, short("buffer: deleted here; its deletion on the targets is journaled and will be retried ("+
		strconv.Itoa(code)+" "+reason+")"))
	return true
}

// markDeleted journals a pending delete of p, which takes the place of
// the version the buffer holds (its migration stops unless a target may
// already commit it; see migration), wakes the mover, and shows it to
// the lake and the roles of the process (publish): an error wrapping
// endpoint.ErrUnavailable says they could not be told. p's lock is held.
func (b *Buffer) markDeleted(ctx context.Context, p string, pre *Prefix) error {
	t := &entry{
		path:    p,
		spool:   "delete-" + newSpoolName(), // no file: the column is unique
		mtime:   time.Now(),
		state:   stateDeleting,
		done:    map[string]bool{},
		targets: make([]string, 0, len(pre.Targets)),
	}
	for _, ep := range pre.Targets {
		t.targets = append(t.targets, ep.Name())
	}
	if _, err := b.j.insert(context.WithoutCancel(ctx), t); err != nil {
		// Not kept (a full disk, an I/O error): the delete is not
		// durable, and a copy the buffer holds could still reach the
		// targets. The client is told to try again, over HTTP and at
		// the door alike.
		b.log.ErrorContext(ctx, "journal a delete", "path", p, "err", err)
		return &endpoint.OpError{Kind: "buffer", Op: "delete", Path: p, Err: fmt.Errorf("%w: cannot journal the delete", endpoint.ErrUnavailable)}
	}
	b.install(t)
	if err := b.publish(ctx, t, true); err != nil { // a cache must not serve what it kept of the file
		b.log.WarnContext(ctx, "a buffered delete could not be shown to the other processes of the lake", "path", p, "err", err)
		return notTold(p, err)
	}
	return nil
}

// maxPropfindAnswer bounds next's PROPFIND answer the buffer merges into.
const maxPropfindAnswer = 64 << 20

// servePropfind answers a PROPFIND that involves buffered files and
// reports whether it did; false sends the request to next untouched.
func (b *Buffer) servePropfind(w http.ResponseWriter, r *http.Request, p string, next http.Handler) bool {
	depth := r.Header.Get("Depth")
	if b.deleted(p) {
		if depth != "0" && depth != "1" {
			return false
		}
		httpx.WriteError(w, http.StatusNotFound, "not found")
		return true
	}
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
	kids, gone := b.children(p), b.deletedIn(p)
	if len(kids) == 0 && len(gone) == 0 {
		return false
	}
	// Ask next, and merge.
	rec := httpx.NewRecorder(maxPropfindAnswer, false)
	next.ServeHTTP(rec, r)
	var items []davEntry
	switch {
	case rec.Code == http.StatusMultiStatus:
		ms, err := davxml.Decode(bytes.NewReader(rec.Body.Bytes()), maxPropfindAnswer)
		if err != nil {
			rec.Flush(w)
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
	case rec.Code == http.StatusNotFound && len(kids) > 0:
		items = append(items, davEntry{p, endpoint.Info{Name: path.Base(p), IsDir: true}})
	default:
		rec.Flush(w)
		return true
	}
	if len(gone) > 0 {
		// Files deleted here whose targets still hold them.
		items = slices.DeleteFunc(items, func(it davEntry) bool {
			return it.path != p && gone[path.Base(it.path)] && parentOf(it.path) == p
		})
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
	if e := b.cur[p]; e != nil && !e.deleting() && !e.released {
		return e.info(), true
	}
	return endpoint.Info{}, false
}

// deleted reports whether p has a pending delete: it is gone, whatever
// the targets still hold.
func (b *Buffer) deleted(p string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.cur[p]
	return e != nil && e.deleting()
}

// deletedIn returns the names directly inside the directory p that have
// a pending delete.
func (b *Buffer) deletedIn(p string) map[string]bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out map[string]bool
	for q, e := range b.cur {
		if e.deleting() && q != p && under(q, p) && !strings.Contains(strings.TrimPrefix(q[len(p):], "/"), "/") {
			if out == nil {
				out = map[string]bool{}
			}
			out[path.Base(q)] = true
		}
	}
	return out
}

// children returns what the buffer holds directly inside the directory
// p: its files, and directories for deeper files, sorted by name.
func (b *Buffer) children(p string) []endpoint.Info {
	b.mu.Lock()
	defer b.mu.Unlock()
	byName := map[string]endpoint.Info{}
	for q, e := range b.cur {
		if q == p || !under(q, p) || e.deleting() || e.released {
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

// refuseMove answers 403 to a MOVE whose source or destination the
// buffer holds (Holds), and reports whether it did. A Destination it
// cannot read is next's to refuse.
func (b *Buffer) refuseMove(w http.ResponseWriter, r *http.Request, p string) bool {
	paths := []string{p}
	if u, err := url.Parse(r.Header.Get("Destination")); err == nil {
		if to, err := httpx.CleanPath(u.Path); err == nil {
			paths = append(paths, to)
		}
	}
	for _, q := range paths {
		if pre := b.Holds(q, true); pre != "" {
			httpx.WriteError(w, http.StatusForbidden, fmt.Sprintf(
				"buffer: MOVE %s: the write buffer holds %s, where a file may not have reached its endpoint yet; a move there is not supported", q, pre))
			return true
		}
	}
	return false
}
