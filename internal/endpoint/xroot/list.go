package xroot

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"go-hep.org/x/hep/xrootd/xrdfs"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/endpoint/xroot/xrdwire"
)

// Why a data server's kXR_dirlist with kXR_dstat may stand for a
// kXR_stat of each file (endpoint.StatLister): xrootd formats each
// entry's stat line with the function that formats kXR_stat's answer
// (XrdXrootdProtocol::do_DirStat calls StatGen, as do_Stat does), from
// a stat(2) of the entry that follows symlinks as kXR_stat's does
// (XrdOssDir::Readdir's fstatat with no flags, or a stat per entry), and
// the fields Stat keeps (size, flags, mtime) are the first four of
// both. Only a data server is listed: one that calls itself a load
// balancer in the handshake (an XRootD redirector, a lakefed door) gives
// a listing gathered from the servers behind it and a kXR_stat of the
// one it would send the client to, which may be two copies of a file
// (a door's listing is merged across its endpoints, its Stat is its
// first replica's).
//
// What may not stand for a Stat is refused, so the federator asks Stat:
//   - a load balancer, from the handshake on: ErrUnsupported, and the
//     endpoint is not asked for listings again;
//   - an answer that is a redirect (a redirector sends the listing to one
//     data server, which may hold another version of a file than the one
//     the redirector's Stat would be routed to), a server that needs
//     authentication (the direct path cannot log in; Stat goes through
//     go-hep then) or refuses the listing (xrootd's "l" privilege is not
//     its "r"), or one that asks to wait: ErrUnsupported;
//   - a listing without kXR_dstat's ".\n0 0 0 0" lead-in (a server that
//     does not give stat information): ErrUnsupported;
//   - an entry that is a directory, not a regular file (kXR_other), an
//     offline file (kXR_offline, or id 0) or one still being written with
//     persist-on-successful-close (kXR_poscpend): unsure.
//
// The answer comes in kXR_oksofar parts, which end with whole entries in
// xrootd and in the door but need not in general: the parts are joined
// and then parsed. They are read up to (limit+1) entries of
// maxDirEntry bytes; a longer answer is over the limit whatever its
// names (ErrTooLarge), and the connection, left in the middle of it, is
// closed.
//
// Protocol reference: XRootD protocol v5 (XProtocol.hh): kXR_dirlist,
// kXR_dstat; XrdXrootdXeq.cc do_DirStat.

// kXR_dirlist options and kXR_stat flags beyond direct.go's.
const (
	dirlistDStat = 2 // kXR_dstat

	statOther    = 4    // kXR_other: neither a file nor a directory
	statOffline  = 8    // kXR_offline
	statPoscPend = 0x40 // kXR_poscpend: being written, kept only on a successful close
)

// maxDirEntry bounds one entry of a kXR_dstat listing: a name of up to
// 1024 bytes (S3 keys behind a door; POSIX allows 255), its stat line
// (xrootd reserves 512 bytes for it: four numbers, two times, a mode and
// two user names) and two newlines.
const maxDirEntry = 1024 + 512 + 2

// dstatLeadIn is the pseudo-entry a server that gives stat information
// starts the listing with (do_DirStat).
const dstatLeadIn = ".\n0 0 0 0\n"

// errLoadBalancer: the server called itself a load balancer in the
// handshake (an XRootD redirector, a lakefed door). Its listing is
// gathered from the servers behind it, each entry from whichever had
// the name, and its kXR_stat answers for the one it would send the
// client to: the two may describe different copies of a file.
var errLoadBalancer = errors.New("the server is a load balancer, not a data server")

// errNotListedAsStat: the server's answer cannot stand for a Stat of
// each file.
var errNotListedAsStat = fmt.Errorf("%w: the server's listing cannot stand for its kXR_stat", endpoint.ErrUnsupported)

// StatList lists dir with one kXR_dirlist with kXR_dstat on a pooled
// connection and describes its regular files as Stat would
// (endpoint.StatLister); see above for what it refuses and what is
// unsure. A missing dir wraps ErrNotFound, a file ErrRefused, more than
// limit entries ErrTooLarge. An answer that does not parse whole, or is
// cut, is an error (ErrUnavailable), never a shorter listing.
func (e *Endpoint) StatList(ctx context.Context, dir string, limit int) (files []endpoint.Info, unsure []string, err error) {
	if e.noDirect.Load() || e.notListed.Load() {
		return nil, nil, opErr("list", dir, errNotListedAsStat)
	}
	rp, err := e.remote(dir)
	if err != nil {
		return nil, nil, wrapErr("list", dir, err)
	}
	body, err := e.dirlistPooled(ctx, rp, (limit+1)*maxDirEntry+len(dstatLeadIn))
	switch {
	case errors.Is(err, errFallback):
		e.noDirect.Store(true)
		e.log.Debug("xroot direct requests off: server needs authentication or redirects", "addr", e.addr)
		return nil, nil, opErr("list", dir, errNotListedAsStat)
	case errors.Is(err, errTryGoHEP):
		return nil, nil, opErr("list", dir, errNotListedAsStat)
	case errors.Is(err, errLoadBalancer):
		e.notListed.Store(true)
		return nil, nil, opErr("list", dir, fmt.Errorf("%w: %w", errNotListedAsStat, err))
	case serverCode(err) == codeNotAuthorized || serverCode(err) == codeAuthFailed || serverCode(err) == codeTLSRequired:
		// Listing is a privilege of its own in xrootd's authorization
		// ("l"): a server may refuse it and still answer Stat.
		return nil, nil, opErr("list", dir, fmt.Errorf("%w: %w", errNotListedAsStat, err))
	case errors.Is(err, xrdwire.ErrTooLong):
		return nil, nil, opErr("list", dir, fmt.Errorf("%w: more than %d entries", endpoint.ErrTooLarge, limit))
	case serverCode(err) == codeIOError || serverCode(err) == codeFSError:
		// xrootd answers ENOTDIR with an I/O error: tell a file apart
		// from a failing disk by asking, as List does.
		if st, serr := e.stat(ctx, rp); serr == nil && st.Flags&xrdfs.StatIsDir == 0 {
			return nil, nil, opErr("list", dir, fmt.Errorf("%w: not a directory", endpoint.ErrRefused))
		}
		return nil, nil, wrapErr("list", dir, err)
	case err != nil:
		return nil, nil, wrapErr("list", dir, err)
	}
	ents, err := parseDirStat(body)
	if err != nil {
		return nil, nil, opErr("list", dir, err)
	}
	if len(ents) > limit {
		return nil, nil, opErr("list", dir, fmt.Errorf("%w: more than %d entries", endpoint.ErrTooLarge, limit))
	}
	for _, de := range ents {
		if de.st.Flags&(xrdfs.StatIsDir|statOther|statOffline|statPoscPend) != 0 || de.st.ID == 0 {
			unsure = append(unsure, de.name)
			continue
		}
		files = append(files, info("/"+de.name, de.st))
	}
	return files, unsure, nil
}

// dirEntry is one entry of a kXR_dstat listing.
type dirEntry struct {
	name string
	st   xrdfs.EntryStat
}

// parseDirStat reads a kXR_dirlist answer with kXR_dstat: the lead-in,
// then for each entry its name and its stat line, each ending in a
// newline, the last in a NUL (or a newline, when the final part came
// empty). Anything else is an error: a listing that cannot be read
// whole says nothing of the names it lacks.
func parseDirStat(body []byte) ([]dirEntry, error) {
	bad := func(why string) error {
		return fmt.Errorf("%w: bad kXR_dstat listing: %s", endpoint.ErrUnavailable, why)
	}
	n := len(body)
	if n == 0 {
		// No lead-in: a server that gives no stat information, listing
		// an empty directory.
		return nil, errNotListedAsStat
	}
	if body[n-1] != 0 && body[n-1] != '\n' {
		return nil, bad("no NUL or newline at its end")
	}
	body[n-1] = '\n' // every line ends in one from here on
	if !bytes.HasPrefix(body, []byte(dstatLeadIn)) {
		// No stat information: a server that only names its entries.
		return nil, errNotListedAsStat
	}
	rest := string(body[len(dstatLeadIn):])
	if strings.IndexByte(rest, 0) >= 0 {
		return nil, bad("NUL inside")
	}
	var out []dirEntry
	seen := map[string]bool{}
	for rest != "" {
		name, after, ok := strings.Cut(rest, "\n")
		if !ok {
			return nil, bad("an entry without a stat line")
		}
		line, tail, ok := strings.Cut(after, "\n")
		if !ok {
			return nil, bad("an entry without a stat line")
		}
		rest = tail
		if name == "" || name == "." || name == ".." || strings.Contains(name, "/") {
			return nil, bad(fmt.Sprintf("entry name %q", name))
		}
		if seen[name] {
			return nil, bad(fmt.Sprintf("entry %q twice", name))
		}
		seen[name] = true
		st, err := parseStat([]byte(line))
		if err != nil {
			return nil, bad(err.Error())
		}
		out = append(out, dirEntry{name: name, st: st})
	}
	return out, nil
}

// dirlistPooled sends kXR_dirlist with kXR_dstat for the server path rp
// on a pooled connection and returns the joined answer, of at most max
// bytes (xrdwire.ErrTooLong). errFallback and errTryGoHEP say the
// answer cannot be had on the direct path.
func (e *Endpoint) dirlistPooled(ctx context.Context, rp string, max int) ([]byte, error) {
	return onPooled(ctx, e, func(pc *poolConn) ([]byte, error) {
		if !pc.dataServer {
			return nil, errLoadBalancer
		}
		return pc.dirlist(ctx, rp, e.timeout, max)
	})
}

// dirlist sends kXR_dirlist with kXR_dstat for rp on pc and reads the
// whole answer, at most max bytes, within d and ctx. As stat, a server
// error leaves pc usable, any other error unusable.
func (pc *poolConn) dirlist(ctx context.Context, rp string, d time.Duration, max int) ([]byte, error) {
	sid := pc.next()
	// kXR_dirlist: reserved[15], options, dlen, path.
	req := make([]byte, 24+len(rp))
	copy(req[0:2], sid[:])
	binary.BigEndian.PutUint16(req[2:], xrdwire.ReqDirlist)
	req[19] = dirlistDStat
	binary.BigEndian.PutUint32(req[20:], uint32(len(rp)))
	copy(req[24:], rp)
	return pc.exchange(ctx, req, sid, d, max)
}
