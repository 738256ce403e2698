package xrootd

// The namespace requests: kXR_mkdir, kXR_rm, kXR_rmdir, kXR_mv,
// kXR_truncate and kXR_chmod, kXR_query space and stats. Each is decided
// by Options.Authorize first (the actions HTTP's auth middleware asks
// for the same change: mkdir is create, rm and rmdir delete, mv modify
// and delete on the source and create or modify on the destination,
// truncate and chmod modify), then done by the namespace's own function,
// found by type assertion (endpoint.Renamer, Truncater, Chmoder,
// DirRemover, SpaceReporter, and Delete and Mkdir of an Endpoint): the federation's keep its rules (one
// endpoint per rename, nothing half done, every cache told before the
// answer). A namespace without the power gets kXR_Unsupported, and so
// does an endpoint kind without it, by the namespace's own refusal.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go-hep.org/x/hep/xrootd/xrdproto"
	"go-hep.org/x/hep/xrootd/xrdproto/mkdir"
	"go-hep.org/x/hep/xrootd/xrdproto/open"
	"go-hep.org/x/hep/xrootd/xrdproto/read"
	xrdsync "go-hep.org/x/hep/xrootd/xrdproto/sync"
	"go-hep.org/x/hep/xrootd/xrdproto/write"

	"github.com/lakefed/lakefed/internal/endpoint"
)

// ActDelete is kXR_rm, kXR_rmdir and the source of a kXR_mv, as the
// action of package auth that DELETE and the source of a MOVE ask for.
const ActDelete = "delete"

// Query types (XProtocol.hh kXR_Qstats, kXR_Qspace).
const (
	queryStats = 1
	querySpace = 5
)

// Error codes beyond wire.go's.
const codeFSError xrdproto.ServerErrorCode = 3005 // kXR_FSError

// namer is how a namespace says its name in a refusal.
type namer interface{ Name() string }

// unsupported answers a request the namespace has no function for.
func (c *conn) unsupported(h *header, what string) error {
	name := "this door's namespace"
	if n, ok := c.s.ns.(namer); ok {
		name = "the " + n.Name() + " namespace of this door"
	}
	c.s.countError(classRefused)
	return c.sendError(h.sid(), codeUnsupported, fmt.Sprintf("%s is not supported here: %s cannot do it", what, name))
}

// pathRequest is the start every one-path namespace request shares: the
// path, its token, and Authorize for one of acts. ok false means the
// answer (a bad path, a refusal) was sent.
func (c *conn) pathRequest(h *header, data []byte, acts ...string) (p, tok string, ok bool, err error) {
	p, cgi, perr := splitPath(data)
	if perr != nil {
		return "", "", false, c.sendFailure(h.sid(), "", codeArgInvalid, perr)
	}
	tok = c.tokenOf(cgi)
	if aerr := c.authorize(tok, p, acts...); aerr != nil {
		return "", "", false, c.refuse(h.sid(), aerr)
	}
	return p, tok, true, nil
}

// done answers a namespace request that returned err: kXR_ok, or the
// failure by its class (refusedCode for a plain refusal).
func (c *conn) done(h *header, key string, refusedCode xrdproto.ServerErrorCode, err error) error {
	if err != nil {
		return c.sendFailure(h.sid(), key, refusedCode, err)
	}
	c.answered(key)
	return c.send(h.sid(), uint16(xrdproto.Ok))
}

// mkdir answers kXR_mkdir. With kXR_mkdirpath (xrdfs mkdir -p) missing
// parents are made and an existing directory is fine; without it, as
// mkdir(2), an existing path is kXR_ItExists and a missing parent
// kXR_NotFound. The mode is the endpoints' default.
func (c *conn) mkdir(h *header, data []byte) error {
	p, tok, ok, err := c.pathRequest(h, data, ActCreate)
	if !ok {
		return err
	}
	mk, can := c.s.ns.(interface {
		Mkdir(ctx context.Context, p string) error
	})
	if !can {
		return c.unsupported(h, "kXR_mkdir")
	}
	ctx, cancel := c.reqCtx(tok)
	defer cancel()
	key := "mkdir " + p
	if h.params()[0]&byte(mkdir.OptionsMakePath) == 0 {
		in, err := c.s.ns.Stat(ctx, p)
		switch {
		case err == nil:
			c.s.countError(classRefused)
			what := "a file"
			if in.IsDir {
				what = "a directory"
			}
			return c.sendError(h.sid(), codeItExists, fmt.Sprintf("unable to mkdir %s: %s exists", p, what))
		case !errors.Is(err, endpoint.ErrNotFound):
			return c.sendFailure(h.sid(), key, codeNotAuthorized, err)
		}
		in, err = c.s.ns.Stat(ctx, path.Dir(p))
		switch {
		case errors.Is(err, endpoint.ErrNotFound):
			return c.sendFailure(h.sid(), key, codeNotAuthorized,
				fmt.Errorf("unable to mkdir %s: its parent does not exist (xrdfs mkdir -p makes it): %w", p, err))
		case err != nil:
			return c.sendFailure(h.sid(), key, codeNotAuthorized, err)
		case !in.IsDir:
			c.s.countError(classRefused)
			return c.sendError(h.sid(), codeFSError, fmt.Sprintf("unable to mkdir %s: %s is not a directory", p, path.Dir(p)))
		}
	}
	return c.done(h, key, codeNotAuthorized, mk.Mkdir(ctx, p))
}

// remove answers kXR_rm: a closed upload of lakefed's own root:// client
// held for its kXR_mv is dropped (see isHeldName); any other file is
// deleted from every endpoint that holds it. A directory is
// kXR_isDirectory (kXR_rmdir removes one).
func (c *conn) remove(h *header, data []byte) error {
	if p, _, err := splitPath(data); err == nil {
		if u, ok := c.takeHeld(p); ok {
			dropUpload(u.tmp)
			return c.send(h.sid(), uint16(xrdproto.Ok))
		}
	}
	p, tok, ok, err := c.pathRequest(h, data, ActDelete)
	if !ok {
		return err
	}
	del, can := c.s.ns.(interface {
		Delete(ctx context.Context, p string) error
	})
	if !can {
		return c.unsupported(h, "kXR_rm")
	}
	ctx, cancel := c.reqCtx(tok)
	defer cancel()
	key := "rm " + p
	in, err := c.s.ns.Stat(ctx, p)
	switch {
	case err != nil:
		return c.sendFailure(h.sid(), key, codeNotAuthorized, err)
	case in.IsDir:
		c.s.countError(classRefused)
		return c.sendError(h.sid(), codeIsDirectory, fmt.Sprintf("unable to remove %s: is a directory (use rmdir)", p))
	}
	return c.done(h, key, codeNotAuthorized, del.Delete(ctx, p))
}

// rmdir answers kXR_rmdir: the directory must be empty across the whole
// namespace (kXR_ItExists, "directory not empty", otherwise: XRootD
// 5.6's answer for ENOTEMPTY; 5.5 said kXR_FSError). A file is
// kXR_FSError "not a directory", as xrootd answers.
func (c *conn) rmdir(h *header, data []byte) error {
	p, tok, ok, err := c.pathRequest(h, data, ActDelete)
	if !ok {
		return err
	}
	var rmdir func(ctx context.Context, p string) error
	switch ns := c.s.ns.(type) {
	case endpoint.DirRemover:
		rmdir = ns.Rmdir
	case interface {
		Delete(ctx context.Context, p string) error
	}:
		rmdir = ns.Delete // a directory: the Endpoint contract's rmdir
	default:
		return c.unsupported(h, "kXR_rmdir")
	}
	ctx, cancel := c.reqCtx(tok)
	defer cancel()
	key := "rmdir " + p
	in, err := c.s.ns.Stat(ctx, p)
	switch {
	case err != nil:
		return c.sendFailure(h.sid(), key, codeNotAuthorized, err)
	case !in.IsDir:
		c.s.countError(classRefused)
		return c.sendError(h.sid(), codeFSError, fmt.Sprintf("unable to remove %s: not a directory", p))
	}
	return c.done(h, key, codeNotAuthorized, rmdir(ctx, p))
}

// move answers a kXR_mv that is not of a held upload: from must be
// modifiable and deletable by the caller, to creatable (or modifiable
// when it exists), and the namespace renames (endpoint.Renamer).
func (c *conn) move(h *header, from, to string, fromCGI, toCGI url.Values) error {
	tok := bearerToken(fromCGI)
	if tok == "" {
		tok = bearerToken(toCGI)
	}
	if tok == "" {
		tok = c.tokenOf(nil)
	}
	for _, act := range []string{ActModify, ActDelete} {
		if err := c.authorize(tok, from, act); err != nil {
			return c.refuse(h.sid(), err)
		}
	}
	r, can := c.s.ns.(endpoint.Renamer)
	if !can {
		return c.unsupported(h, "kXR_mv")
	}
	if err := c.writeAllowed(tok, to); err != nil {
		if errors.Is(err, endpoint.ErrUnavailable) {
			return c.sendFailure(h.sid(), "mv "+from, codeNotAuthorized, err)
		}
		return c.refuse(h.sid(), err)
	}
	ctx, cancel := c.reqCtx(tok)
	defer cancel()
	return c.done(h, "mv "+from, codeNotAuthorized, r.Rename(ctx, from, to))
}

// truncate answers kXR_truncate of a path: the file's size becomes the
// request's offset (endpoint.Truncater). A truncate of an open handle
// is kXR_Unsupported: uploads are stored whole on close.
func (c *conn) truncate(h *header, data []byte) error {
	if len(strings.TrimRight(string(data), "\x00")) == 0 {
		c.s.countError(classProtocol)
		return c.sendError(h.sid(), codeUnsupported, "kXR_truncate of an open file is not supported by lakefed: truncate the file by its path")
	}
	size := int64(u64(h.params(), 4))
	p, tok, ok, err := c.pathRequest(h, data, ActModify)
	if !ok {
		return err
	}
	t, can := c.s.ns.(endpoint.Truncater)
	if !can {
		return c.unsupported(h, "kXR_truncate")
	}
	ctx, cancel := c.reqCtx(tok)
	defer cancel()
	key := "truncate " + p
	if in, err := c.s.ns.Stat(ctx, p); err != nil {
		return c.sendFailure(h.sid(), key, codeNotAuthorized, err)
	} else if in.IsDir {
		c.s.countError(classRefused)
		return c.sendError(h.sid(), codeIsDirectory, fmt.Sprintf("unable to truncate %s: is a directory", p))
	}
	return c.done(h, key, codeNotAuthorized, t.Truncate(ctx, p, size))
}

// chmod answers kXR_chmod: its mode bits are the POSIX ones
// (XOpenRequestMode, kXR_ur 0400 ... kXR_ox 01).
func (c *conn) chmod(h *header, data []byte) error {
	mode := fs.FileMode(u16(h.params(), 14)) & fs.ModePerm
	p, tok, ok, err := c.pathRequest(h, data, ActModify)
	if !ok {
		return err
	}
	ch, can := c.s.ns.(endpoint.Chmoder)
	if !can {
		return c.unsupported(h, "kXR_chmod")
	}
	ctx, cancel := c.reqCtx(tok)
	defer cancel()
	return c.done(h, "chmod "+p, codeNotAuthorized, ch.Chmod(ctx, p, mode))
}

// querySpace answers kXR_query kXR_Qspace as xrootd does, the form xrdfs
// spaceinfo adds up over the servers locate names: "oss.cgroup=...&
// oss.space=<total>&oss.free=<free>&oss.maxf=<largest free>&
// oss.used=<used>&oss.quota=-1", in bytes, for the endpoints that take
// writes of the path (endpoint.SpaceReporter). When none can tell, the
// answer is kXR_Unsupported saying which cannot.
func (c *conn) querySpace(h *header, data []byte) error {
	if len(strings.TrimRight(string(data), "\x00")) == 0 {
		data = []byte("/")
	}
	p, tok, ok, err := c.pathRequest(h, data, ActRead, ActList)
	if !ok {
		return err
	}
	sr, can := c.s.ns.(endpoint.SpaceReporter)
	if !can {
		return c.unsupported(h, "kXR_query space")
	}
	ctx, cancel := c.reqCtx(tok)
	defer cancel()
	sp, err := sr.Space(ctx, p)
	key := "space " + p
	if err != nil {
		return c.sendFailure(h.sid(), key, codeNotAuthorized, err)
	}
	c.answered(key)
	ans := fmt.Sprintf("oss.cgroup=default&oss.space=%d&oss.free=%d&oss.maxf=%d&oss.used=%d&oss.quota=-1",
		sp.Total, sp.Free, sp.LargestFree, sp.Used)
	return c.send(h.sid(), uint16(xrdproto.Ok), append([]byte(ans), 0))
}

// opCounts are the door's request counters for kXR_query stats, in the
// terms of XRootD's own (XrdXrootdStats): which requests arrived, not
// how they ended (Stats has that).
type opCounts struct {
	start  time.Time
	conns  atomic.Int64     // connections accepted since New
	logins atomic.Int64     // kXR_login
	reqs   [64]atomic.Int64 // by request ID - kXR_1stRequest
	waits  atomic.Int64     // kXR_wait answers
}

// count records one request of id.
func (o *opCounts) count(id uint16) {
	if id >= reqFirst && int(id-reqFirst) < len(o.reqs) {
		o.reqs[id-reqFirst].Add(1)
	}
}

func (o *opCounts) n(ids ...uint16) int64 {
	var n int64
	for _, id := range ids {
		if id >= reqFirst && int(id-reqFirst) < len(o.reqs) {
			n += o.reqs[id-reqFirst].Load()
		}
	}
	return n
}

// queryStats answers kXR_query kXR_Qstats with XRootD's statistics XML
// (XrdStats: a <statistics> element, one <stats id="..."> per part the
// letters ask for: "a" all, "i" info, "l" link, "p" protocol), filled
// with the door's counters, plus a <stats id="lakefed"> with Stats'
// errors by class. Parts the door has no counters for (b, d, u, s: the
// buffer pool, poller, process usage and scheduler of an xrootd) are
// left out. The link's in and out are file bytes received and sent; the
// door does not count protocol bytes.
func (c *conn) queryStats(h *header, data []byte) error {
	opts := strings.TrimRight(string(data), "\x00")
	if opts == "" {
		opts = "a"
	}
	all := strings.Contains(opts, "a")
	want := func(letter string) bool { return all || strings.Contains(opts, letter) }
	if !want("i") && !want("l") && !want("p") {
		return c.send(h.sid(), uint16(xrdproto.Ok))
	}
	s := c.s
	st := s.Stats()
	o := &s.ops
	host, port := c.selfAddr(), ""
	if i := strings.LastIndexByte(host, ':'); i >= 0 {
		host, port = strings.Trim(host[:i], "[]"), host[i+1:]
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<statistics tod="%d" ver="lakefed" src="%s" tos="%d" pgm="lakefed" ins="door" pid="%d" site="">`,
		time.Now().Unix(), c.selfAddr(), o.start.Unix(), os.Getpid())
	if want("i") {
		fmt.Fprintf(&b, `<stats id="info"><host>%s</host><port>%s</port><name>door</name></stats>`, host, port)
	}
	if want("l") {
		fmt.Fprintf(&b, `<stats id="link"><num>%d</num><maxn>%d</maxn><tot>%d</tot><in>%d</in><out>%d</out><ctime>0</ctime><tmo>0</tmo><stall>0</stall><sfps>0</sfps></stats>`,
			st.Connections, st.Connections, o.conns.Load(), st.WrittenBytes, st.ReadBytes)
	}
	if want("p") {
		var errs int64
		for _, n := range st.Errors {
			errs += n
		}
		reads := o.n(read.RequestID, reqPgRead)
		readv := o.n(reqReadV)
		writes := o.n(write.RequestID, reqPgWrite)
		syncs := o.n(xrdsync.RequestID)
		opens := o.n(open.RequestID)
		var all int64
		for i := range o.reqs {
			all += o.reqs[i].Load()
		}
		misc := all - reads - readv - writes - syncs - opens
		fmt.Fprintf(&b, `<stats id="xrootd"><num>%d</num><ops><open>%d</open><rf>0</rf><rd>%d</rd><pr>0</pr><rv>%d</rv><rs>0</rs><wv>0</wv><ws>0</ws><wr>%d</wr><sync>%d</sync><getf>0</getf><putf>0</putf><misc>%d</misc></ops>`,
			o.conns.Load(), opens, reads, readv, writes, syncs, misc)
		fmt.Fprintf(&b, `<sig><ok>0</ok><bad>0</bad><ign>0</ign></sig><aio><num>0</num><max>0</max><rej>0</rej></aio><err>%d</err><rdr>%d</rdr><dly>%d</dly><lgn><num>%d</num><af>0</af><au>0</au><ua>%d</ua></lgn></stats>`,
			errs, st.Redirects, o.waits.Load(), o.logins.Load(), o.logins.Load())
	}
	fmt.Fprintf(&b, `<stats id="lakefed"><conn>%d</conn><opens>%d</opens><redirects>%d</redirects><rbytes>%d</rbytes><wbytes>%d</wbytes><errors>`,
		st.Connections, st.Opens, st.Redirects, st.ReadBytes, st.WrittenBytes)
	for _, cl := range classes {
		fmt.Fprintf(&b, "<%s>%d</%s>", cl, st.Errors[cl], cl)
	}
	b.WriteString(`</errors></stats></statistics>`)
	return c.send(h.sid(), uint16(xrdproto.Ok), append([]byte(b.String()), 0))
}

// modeOf is the mode a stat line gives info: its own, else 0644 for a
// file and 0755 for a directory (kinds that have no permissions: S3,
// WebDAV).
func modeOf(info endpoint.Info) fs.FileMode {
	switch {
	case info.Mode != 0:
		return info.Mode & 0o7777
	case info.IsDir:
		return 0o755
	}
	return 0o644
}

// ownerOf is an owner or group name for a stat line: one word, "-" when
// unknown (XrdCl splits the line at spaces).
func ownerOf(name string) string {
	name = strings.Map(func(r rune) rune {
		if r <= ' ' || r == 0x7f {
			return '_'
		}
		return r
	}, name)
	if name == "" {
		return "-"
	}
	return name
}

// timeOf is t in Unix seconds, or fallback's when t is unknown.
func timeOf(t, fallback time.Time) string {
	if t.IsZero() {
		t = fallback
	}
	return strconv.FormatInt(t.Unix(), 10)
}
