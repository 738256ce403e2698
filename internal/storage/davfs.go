package storage

import (
	"context"
	"encoding/xml"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path"
	"strings"
	"syscall"
	"time"

	"github.com/lakefed/lakefed/internal/storage/davlock"
	"golang.org/x/net/webdav"
	"golang.org/x/sys/unix"
)

// davFS is the webdav.FileSystem the x/net/webdav handler works on. Every
// operation goes through os.Root, so symlinks that lead outside Root are
// never followed; such paths, and the server's reserved ".lakefed-" names,
// look absent (fs.ErrNotExist) so the WebDAV layer answers 404 or 409.
type davFS struct{ s *Server }

var _ webdav.FileSystem = davFS{}

// name converts a WebDAV name ("/a/b") into a path relative to Root.
func (d davFS) name(name string) (string, error) {
	p := path.Clean("/" + name)
	if reserved(p) {
		return "", &os.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return rel(p), nil
}

// hide turns an escape attempt into "not there".
func hide(err error) error {
	if err != nil && isEscape(err) {
		return &os.PathError{Op: "open", Path: "", Err: fs.ErrNotExist}
	}
	return err
}

func (d davFS) Mkdir(ctx context.Context, name string, perm os.FileMode) error {
	n, err := d.name(name)
	if err != nil {
		return err
	}
	return hide(d.s.root.Mkdir(n, perm))
}

func (d davFS) OpenFile(ctx context.Context, name string, flag int, perm os.FileMode) (webdav.File, error) {
	n, err := d.name(name)
	if err != nil {
		return nil, err
	}
	f, err := d.s.root.OpenFile(n, flag, perm)
	if errors.Is(err, syscall.EISDIR) && flag&(os.O_CREATE|os.O_TRUNC) == 0 {
		// PROPPATCH opens O_RDWR; a directory can only be opened read-only,
		// which is enough for its extended attributes.
		f, err = d.s.root.OpenFile(n, os.O_RDONLY, 0)
	}
	if err != nil {
		return nil, hide(err)
	}
	return &davFile{File: f, name: path.Clean("/" + name), locks: d.s.locks}, nil
}

func (d davFS) RemoveAll(ctx context.Context, name string) error {
	n, err := d.name(name)
	if err != nil {
		return err
	}
	if n == "." {
		return &os.PathError{Op: "remove", Path: name, Err: fs.ErrPermission}
	}
	return hide(d.s.root.RemoveAll(n))
}

// Rename is part of webdav.FileSystem; x/net/webdav calls it only for
// MOVE, which copy.go answers, so no request reaches it today.
func (d davFS) Rename(ctx context.Context, oldName, newName string) error {
	o, err := d.name(oldName)
	if err != nil {
		return err
	}
	n, err := d.name(newName)
	if err != nil {
		return err
	}
	if o == "." || n == "." {
		return &os.PathError{Op: "rename", Path: oldName, Err: fs.ErrPermission}
	}
	return hide(d.s.root.Rename(o, n))
}

func (d davFS) Stat(ctx context.Context, name string) (os.FileInfo, error) {
	n, err := d.name(name)
	if err != nil {
		return nil, err
	}
	fi, err := d.s.root.Stat(n)
	if err != nil {
		return nil, hide(err)
	}
	return fileInfo{fi}, nil
}

// fileInfo gives PROPFIND the same content type GET sends, without the
// 512-byte sniffing read x/net/webdav would do per file.
type fileInfo struct{ os.FileInfo }

func (fi fileInfo) ContentType(ctx context.Context) (string, error) {
	if fi.IsDir() {
		return "httpd/unix-directory", nil
	}
	return contentType(fi.Name())[0], nil
}

// davFile is an open file or directory for the WebDAV layer. It hides
// reserved names from listings and keeps dead properties (RFC 4918 §4) in
// extended attributes "user.lakefed.dav.<namespace> <local name>" whose
// value is "<xml:lang>\n<inner XML>". The live DAV:lockdiscovery property
// (RFC 4918 §15.8), which x/net/webdav cannot fill in, is added to them
// from the lock table. Not safe for concurrent use.
type davFile struct {
	*os.File
	name  string         // clean WebDAV name, for lockdiscovery
	locks *davlock.Locks // nil: no lockdiscovery
}

// lockDiscoveryName is the DAV:lockdiscovery property.
var lockDiscoveryName = xml.Name{Space: "DAV:", Local: "lockdiscovery"}

var (
	_ webdav.File            = (*davFile)(nil)
	_ webdav.DeadPropsHolder = (*davFile)(nil)
)

const propXattrPrefix = "user.lakefed.dav."

func (f *davFile) Stat() (os.FileInfo, error) {
	fi, err := f.File.Stat()
	if err != nil {
		return nil, err
	}
	return fileInfo{fi}, nil
}

// Readdir lists the directory without the server's reserved names.
func (f *davFile) Readdir(count int) ([]os.FileInfo, error) {
	var out []os.FileInfo
	for {
		fis, err := f.File.Readdir(count)
		for _, fi := range fis {
			if !strings.HasPrefix(fi.Name(), reservedPrefix) {
				out = append(out, fileInfo{fi})
			}
		}
		// With count > 0, a batch that held only hidden names is not the
		// end of the directory: read on.
		if count <= 0 || err != nil || len(out) > 0 {
			return out, err
		}
	}
}

// DeadProps returns the dead properties stored on the file.
func (f *davFile) DeadProps() (map[xml.Name]webdav.Property, error) {
	fd := int(f.Fd())
	names, err := listXattrs(fd)
	if err != nil {
		if errors.Is(err, unix.ENOTSUP) {
			return nil, nil
		}
		return nil, err
	}
	var props map[xml.Name]webdav.Property
	for _, n := range names {
		key, ok := strings.CutPrefix(n, propXattrPrefix)
		if !ok {
			continue
		}
		space, local, ok := strings.Cut(key, " ")
		if !ok {
			continue
		}
		v, err := getXattr(fd, n)
		if err != nil {
			continue // removed meanwhile
		}
		lang, inner, _ := strings.Cut(string(v), "\n")
		if props == nil {
			props = map[xml.Name]webdav.Property{}
		}
		xn := xml.Name{Space: space, Local: local}
		props[xn] = webdav.Property{XMLName: xn, Lang: lang, InnerXML: []byte(inner)}
	}
	if f.locks != nil {
		if props == nil {
			props = map[xml.Name]webdav.Property{}
		}
		var inner string
		if f.locks.Held() {
			inner = f.locks.Discovery(time.Now(), f.name)
		}
		props[lockDiscoveryName] = webdav.Property{XMLName: lockDiscoveryName, InnerXML: []byte(inner)}
	}
	return props, nil
}

// Patch sets and removes dead properties. Each property succeeds or fails
// on its own (no rollback): 507 when the value does not fit in an xattr,
// 403 otherwise.
func (f *davFile) Patch(patches []webdav.Proppatch) ([]webdav.Propstat, error) {
	fd := int(f.Fd())
	byStatus := map[int]*webdav.Propstat{}
	var order []int
	for _, p := range patches {
		for _, prop := range p.Props {
			if prop.XMLName == lockDiscoveryName {
				// Live, never stored: x/net/webdav's COPY hands every
				// property DeadProps returned to the copy (PROPPATCH
				// refuses it as protected before reaching here).
				continue
			}
			n := propXattrPrefix + prop.XMLName.Space + " " + prop.XMLName.Local
			var err error
			if p.Remove {
				err = unix.Fremovexattr(fd, n)
				if errors.Is(err, unix.ENODATA) {
					err = nil
				}
			} else if strings.ContainsAny(prop.XMLName.Space, " \x00") || strings.Contains(prop.Lang, "\n") {
				err = unix.EINVAL
			} else {
				err = unix.Fsetxattr(fd, n, []byte(prop.Lang+"\n"+string(prop.InnerXML)), 0)
			}
			code := http.StatusOK
			switch {
			case err == nil:
			case errors.Is(err, unix.ENOSPC), errors.Is(err, unix.E2BIG), errors.Is(err, unix.ERANGE), errors.Is(err, unix.EDQUOT):
				code = http.StatusInsufficientStorage
			default:
				code = http.StatusForbidden
			}
			ps := byStatus[code]
			if ps == nil {
				ps = &webdav.Propstat{Status: code}
				byStatus[code] = ps
				order = append(order, code)
			}
			ps.Props = append(ps.Props, webdav.Property{XMLName: prop.XMLName})
		}
	}
	out := make([]webdav.Propstat, 0, len(order))
	for _, c := range order {
		out = append(out, *byStatus[c])
	}
	return out, nil
}

// listXattrs returns the extended attribute names of fd.
func listXattrs(fd int) ([]string, error) {
	size, err := unix.Flistxattr(fd, nil)
	if err != nil || size == 0 {
		return nil, err
	}
	buf := make([]byte, size+256)
	size, err = unix.Flistxattr(fd, buf)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, n := range strings.Split(string(buf[:size]), "\x00") {
		if n != "" {
			names = append(names, n)
		}
	}
	return names, nil
}

// getXattr returns the value of one extended attribute of fd.
func getXattr(fd int, name string) ([]byte, error) {
	size, err := unix.Fgetxattr(fd, name, nil)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, size+64)
	size, err = unix.Fgetxattr(fd, name, buf)
	if err != nil {
		return nil, err
	}
	return buf[:size], nil
}
