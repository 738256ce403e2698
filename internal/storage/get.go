package storage

import (
	"context"
	"html"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/net/webdav"
	"golang.org/x/sys/unix"

	"github.com/lakefed/lakefed/internal/httpx"
)

// rel turns a clean absolute request path into a path relative to Root.
func rel(p string) string {
	if p == "/" {
		return "."
	}
	return p[1:]
}

// openRel opens a path below Root without following symlinks out of it:
// one openat2(RESOLVE_BENEATH) call when the kernel has it, os.Root
// otherwise.
func (s *Server) openRel(name string, flags int) (*os.File, error) {
	if s.rootDir == nil {
		return s.root.OpenFile(name, flags, 0)
	}
	how := unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS}
	for {
		fd, err := unix.Openat2(s.rootFD, name, &how)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "openat2", Path: name, Err: err}
		}
		return os.NewFile(uintptr(fd), name), nil
	}
}

// statRel fills st for a path below Root with the same symlink rules as
// openRel, without building an os.FileInfo (the HEAD hot path).
func (s *Server) statRel(name string, st *unix.Stat_t) error {
	if s.rootDir == nil {
		fi, err := s.root.Stat(name)
		if err != nil {
			return err
		}
		sys, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return &os.PathError{Op: "stat", Path: name, Err: syscall.ENOTSUP}
		}
		statFromSys(sys, st)
		return nil
	}
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS}
	for {
		fd, err := unix.Openat2(s.rootFD, name, &how)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return &os.PathError{Op: "openat2", Path: name, Err: err}
		}
		err = unix.Fstat(fd, st)
		unix.Close(fd)
		if err != nil {
			return &os.PathError{Op: "fstat", Path: name, Err: err}
		}
		return nil
	}
}

// etag is the entity tag of a file (RFC 9110 §8.8.3), see appendETag.
func etag(st *unix.Stat_t) string {
	var b [80]byte
	return string(appendETag(b[:0], st))
}

// appendETag appends the entity tag of a file to b: hex mtime (ns) and
// size, as x/net/webdav and Apache write them, then "-", hex inode and
// ctime (ns). A user can set the mtime back (touch -d) after rewriting a
// file in place with the same size; nobody can set the ctime, and a file
// replaced by another has another inode (or, reused, a newer ctime), so
// the tag changes with the content. It also changes on a metadata-only
// change (chmod, PROPPATCH): a spurious change costs a client a re-read,
// a missed one serves it stale data. Checksums are kept outside the file
// (checksum.go) so that storing one does not change the tag. GET, HEAD,
// PUT, PROPFIND (fileInfo.ETag) and the fast path all use this.
func appendETag(b []byte, st *unix.Stat_t) []byte {
	b = append(b, '"')
	b = strconv.AppendInt(b, st.Mtim.Nano(), 16)
	b = strconv.AppendInt(b, st.Size, 16)
	b = append(b, '-')
	b = strconv.AppendUint(b, st.Ino, 16)
	b = append(b, '-')
	b = strconv.AppendInt(b, st.Ctim.Nano(), 16)
	return append(b, '"')
}

// statFromSys copies what etag, the checksum fingerprint and the handlers
// read from a syscall.Stat_t.
func statFromSys(sys *syscall.Stat_t, st *unix.Stat_t) {
	st.Mode, st.Size, st.Nlink = sys.Mode, sys.Size, sys.Nlink
	st.Mtim, st.Ctim = unix.Timespec(sys.Mtim), unix.Timespec(sys.Ctim)
	st.Ino, st.Dev = sys.Ino, sys.Dev
}

// ETag gives PROPFIND's DAV:getetag the tag GET and HEAD send
// (webdav.ETager); without it x/net/webdav would use mtime and size only.
func (fi fileInfo) ETag(ctx context.Context) (string, error) {
	sys, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "", webdav.ErrNotImplemented
	}
	var st unix.Stat_t
	statFromSys(sys, &st)
	return etag(&st), nil
}

func isDir(st *unix.Stat_t) bool { return st.Mode&unix.S_IFMT == unix.S_IFDIR }
func isReg(st *unix.Stat_t) bool { return st.Mode&unix.S_IFMT == unix.S_IFREG }

// contentType is the type a file is served with: by extension, else
// application/octet-stream (no sniffing: it would cost a read per request,
// and most scientific files are binary).
func contentType(name string) []string {
	if i := strings.LastIndexByte(name, '.'); i >= 0 && strings.IndexByte(name[i:], '/') < 0 {
		if t := mime.TypeByExtension(name[i:]); t != "" {
			return []string{t}
		}
	}
	return hdrOctetStream
}

// serveGetHead serves a file (or a directory listing) for GET and HEAD.
func (s *Server) serveGetHead(w *respWriter, r *http.Request, p string) {
	name := rel(p)
	head := r.Method == http.MethodHead
	var wantDigest []string
	if wd := r.Header["Want-Digest"]; len(wd) > 0 {
		wantDigest = httpx.ParseWantDigest(strings.Join(wd, ","))
	}
	var st unix.Stat_t
	var f *os.File
	if head && len(wantDigest) == 0 {
		if err := s.statRel(name, &st); err != nil {
			code, reason := s.fsStatus(r, err)
			httpError(w, code, reason)
			return
		}
	} else {
		var err error
		f, err = s.openRel(name, unix.O_RDONLY)
		if err != nil {
			code, reason := s.fsStatus(r, err)
			httpError(w, code, reason)
			return
		}
		defer f.Close()
		if err := unix.Fstat(int(f.Fd()), &st); err != nil {
			code, reason := s.fsStatus(r, err)
			httpError(w, code, reason)
			return
		}
	}
	if isDir(&st) {
		s.serveListing(w, r, p, f)
		return
	}
	if !isReg(&st) {
		httpError(w, http.StatusForbidden, "not a regular file")
		return
	}

	err := httpx.ServeContent(w, r, st.Size, &fileSource{s: s, r: r, f: f, st: &st, name: name})
	if err != nil {
		code, reason := s.fsStatus(r, err)
		httpError(w, code, reason)
	}
}

// fileSource is a regular file below Root as httpx.ServeContent reads
// it: validators from the fstat of the open file (f is nil for a HEAD
// without Want-Digest, answered from a stat), bytes with sendfile.
type fileSource struct {
	s    *Server
	r    *http.Request
	f    *os.File
	st   *unix.Stat_t
	name string
}

// Describe gives the file's ETag (appendETag: strong, it changes with
// the content) and modification time.
func (fo *fileSource) Describe([]httpx.Range) (httpx.Content, error) {
	return httpx.Content{
		ETag:    etag(fo.st),
		ModTime: time.Unix(fo.st.Mtim.Sec, fo.st.Mtim.Nsec),
		Type:    contentType(fo.name)[0],
	}, nil
}

// Digests are the file's checksums, kept or computed (checksum.go).
func (fo *fileSource) Digests(algos []string) (map[string]string, error) {
	return fo.s.checksums(fo.r.Context(), fo.f, fo.name, fo.st, algos)
}

// Prepare has nothing to do: the file is open.
func (fo *fileSource) Prepare([]httpx.Range, bool) error { return nil }

// WriteRange copies rg of the file to w with sendfile (SendFileRange).
// When the file shrank meanwhile the copy falls short, and ServeContent
// aborts the response.
func (fo *fileSource) WriteRange(w io.Writer, rg httpx.Range) error {
	return httpx.SendFileRange(w, fo.f, rg)
}

// serveListing writes a small HTML index of a directory (hidden server
// files left out) for GET, and only the headers for HEAD.
func (s *Server) serveListing(w *respWriter, r *http.Request, p string, f *os.File) {
	w.Header()["Content-Type"] = hdrHTML
	if r.Method == http.MethodHead {
		w.WriteHeader(http.StatusOK)
		return
	}
	release, ok := s.acquireListing(w) // limits.go: bounded like PROPFIND Depth 1
	if !ok {
		return
	}
	defer release()
	entries, err := f.ReadDir(-1)
	if err != nil {
		code, reason := s.fsStatus(r, err)
		httpError(w, code, reason)
		return
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	var b strings.Builder
	title := html.EscapeString(p)
	b.WriteString("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Index of ")
	b.WriteString(title)
	b.WriteString("</title></head><body><h1>Index of ")
	b.WriteString(title)
	b.WriteString("</h1>\n<ul>\n")
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, reservedPrefix) {
			continue
		}
		if e.IsDir() {
			n += "/"
		}
		href := (&url.URL{Path: path.Join(p, e.Name())}).EscapedPath()
		if e.IsDir() {
			href += "/"
		}
		b.WriteString(`<li><a href="`)
		b.WriteString(html.EscapeString(href))
		b.WriteString(`">`)
		b.WriteString(html.EscapeString(n))
		b.WriteString("</a>")
		if info, err := e.Info(); err == nil && !e.IsDir() {
			b.WriteString(" ")
			b.WriteString(strconv.FormatInt(info.Size(), 10))
		}
		b.WriteString("</li>\n")
	}
	b.WriteString("</ul></body></html>\n")
	w.Header()["Content-Length"] = []string{strconv.Itoa(b.Len())}
	w.WriteHeader(http.StatusOK)
	w.Write([]byte(b.String()))
}
