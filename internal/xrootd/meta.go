package xrootd

import (
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"net/url"
	"strconv"
	"strings"

	"go-hep.org/x/hep/xrootd/xrdproto"
	"go-hep.org/x/hep/xrootd/xrdproto/query"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/httpx"
)

// splitPath splits a request's path argument into the clean path and its
// opaque CGI. The argument may end in NUL bytes (some clients send a C
// string). The path is not percent-decoded: XRootD paths are raw bytes.
func splitPath(data []byte) (string, url.Values, error) {
	data = bytes.TrimRight(data, "\x00")
	raw, cgi, _ := strings.Cut(string(data), "?")
	if raw == "" {
		return "", nil, &httpx.PathError{Reason: "empty path"}
	}
	p, err := httpx.CleanPath(raw)
	if err != nil {
		return "", nil, err
	}
	v, err := url.ParseQuery(cgi) // a malformed pair is dropped, like XrdOucEnv does
	if err != nil && len(v["authz"]) == 0 && strings.Contains(cgi, "authz") {
		for part := range strings.SplitSeq(cgi, "&") {
			if k, _, _ := strings.Cut(part, "="); k == "authz" {
				v.Set("authz", badToken) // a token offered, whose escapes are bad
			}
		}
	}
	return p, v, nil
}

// badToken is what Authorize gets for an authz that is there but empty
// or badly escaped: no issuer signs a token with a NUL in it, so it is
// refused, where no token at all would be anonymous.
const badToken = "\x00"

// bearerToken is the bearer token in a request's CGI: the last authz
// value, unescaped, without its optional "Bearer " (XRootD's and gfal2's
// "?authz=Bearer%20<jwt>"); "" when there is none.
func bearerToken(cgi url.Values) string {
	vs := cgi["authz"]
	if len(vs) == 0 {
		return ""
	}
	t := strings.TrimSpace(vs[len(vs)-1])
	if len(t) >= 7 && strings.EqualFold(t[:7], "Bearer ") {
		t = strings.TrimSpace(t[7:])
	}
	if t == "" {
		return badToken
	}
	return t
}

// tokenOf is the bearer token a request acts with: its own authz, else
// the connection's token, the last one that was granted anything on
// this connection. XrdCl sends the URL's CGI with kXR_open, kXR_stat
// and kXR_dirlist but not with the checksum query xrdcp makes after a
// copy (XrdCl::Utils::GetRemoteCheckSum takes the path without it): a
// token, once verified, is the connection's credential as a ztn login
// would be. It is verified again, expiry included, at each use.
func (c *conn) tokenOf(cgi url.Values) string {
	if tok := bearerToken(cgi); tok != "" {
		return tok
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.token
}

// statActs are the actions of which one lets a caller stat a path: read
// or list it, and also create or modify it. xrdcp stats its destination
// before it opens it for writing (and stops at a refusal), so a token
// that may only create files (storage.create) could otherwise write
// nothing through the door; what the stat tells is whether the path
// exists, which the open's own answer would tell that caller anyway.
var statActs = []string{ActRead, ActList, ActCreate, ActModify}

// authorize asks Options.Authorize whether tok may do one of acts (any
// one suffices) on p: nil without a hook or when one is granted, else
// the refusal of the first. A token granted something becomes the
// connection's token.
func (c *conn) authorize(tok, p string, acts ...string) error {
	if c.s.opts.Authorize == nil {
		return nil
	}
	ctx, cancel := c.reqCtx("")
	defer cancel()
	var first error
	for _, a := range acts {
		err := c.s.opts.Authorize(ctx, tok, a, p)
		if err == nil {
			if tok != "" && tok != badToken {
				c.mu.Lock()
				c.token = tok
				c.mu.Unlock()
			}
			return nil
		}
		if first == nil {
			first = err
		}
	}
	return first
}

// refuse answers a request Authorize refused with kXR_NotAuthorized and
// the refusal's one-line reason.
func (c *conn) refuse(sid [2]byte, err error) error {
	c.s.countError(classRefused)
	msg := strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, err.Error())
	return c.sendError(sid, codeNotAuthorized, msg)
}

// statLine formats info as xrootd 5 answers kXR_stat (and each entry of
// a kXR_dirlist with kXR_dstat): "id size flags mtime ctime atime mode
// owner group" (XrdXrootdProtocol::StatGen), whose last five fields
// make xrdfs stat print CTime, ATime, Mode, Owner and Group and xrdfs
// ls -l the mode. The id only has to be stable and non-zero (zero reads
// as offline). What the endpoint kind does not know is filled in: ctime
// and atime from mtime, the mode from modeOf, owner and group "-".
func statLine(p string, info endpoint.Info) string {
	h := fnv.New64a()
	h.Write([]byte(p))
	id := int64(h.Sum64() >> 1)
	if id == 0 {
		id = 1
	}
	return fmt.Sprintf("%d %d %d %d %s %s %04o %s %s", id, info.Size, statFlags(info), info.ModTime.Unix(),
		timeOf(info.CTime, info.ModTime), timeOf(info.ATime, info.ModTime), modeOf(info), ownerOf(info.Owner), ownerOf(info.Group))
}

func statFlags(info endpoint.Info) int {
	if info.IsDir {
		return statIsDir | statXSet | statReadable | statWritable
	}
	return statReadable | statWritable
}

// stat answers kXR_stat, by path or, without one, by open file handle.
func (c *conn) stat(h *header, data []byte) error {
	if h.params()[0]&statVFS != 0 {
		c.s.countError(classProtocol)
		return c.sendError(h.sid(), codeUnsupported, "kXR_stat of a file system (kXR_vfs) is not supported by lakefed")
	}
	if len(bytes.TrimRight(data, "\x00")) == 0 {
		f := c.file(u32(h.params(), 12))
		if f == nil {
			c.s.countError(classProtocol)
			return c.sendError(h.sid(), codeFileNotOpen, "stat of a handle that is not open")
		}
		info := f.stat()
		return c.send(h.sid(), uint16(xrdproto.Ok), append([]byte(statLine(f.path, info)), 0))
	}
	p, cgi, err := splitPath(data)
	if err != nil {
		return c.sendFailure(h.sid(), "", codeArgInvalid, err)
	}
	tok := c.tokenOf(cgi)
	if err := c.authorize(tok, p, statActs...); err != nil {
		return c.refuse(h.sid(), err)
	}
	ctx, cancel := c.reqCtx(tok)
	defer cancel()
	info, err := c.s.ns.Stat(ctx, p)
	key := "stat " + p
	if err != nil {
		return c.sendFailure(h.sid(), key, codeArgInvalid, err)
	}
	c.answered(key)
	return c.send(h.sid(), uint16(xrdproto.Ok), append([]byte(statLine(p, info)), 0))
}

// statx answers kXR_statx: one flag byte per newline-separated path;
// a path that cannot be described, or that Authorize refuses, is
// kXR_other, as XRootD answers it.
func (c *conn) statx(h *header, data []byte) error {
	lines := strings.Split(strings.TrimRight(string(data), "\x00\n"), "\n")
	ctx, cancel := c.reqCtx("")
	defer cancel()
	out := make([]byte, 0, len(lines))
	for _, l := range lines {
		p, cgi, err := splitPath([]byte(l))
		tok := c.tokenOf(cgi)
		if err != nil || c.authorize(tok, p, statActs...) != nil {
			out = append(out, statOther)
			continue
		}
		info, err := c.s.ns.Stat(c.withBearer(ctx, tok), p)
		switch {
		case err == nil:
			out = append(out, byte(statFlags(info)))
		case errors.Is(err, endpoint.ErrNotFound) || errors.Is(err, endpoint.ErrRefused):
			out = append(out, statOther)
		default:
			// An outage for one path fails the whole request: a flag
			// byte cannot say "unknown".
			return c.sendFailure(h.sid(), "statx "+p, codeArgInvalid, err)
		}
	}
	return c.send(h.sid(), uint16(xrdproto.Ok), out)
}

// dirlist answers kXR_dirlist: names separated by newlines, the last
// ending in NUL; with kXR_dstat each name is followed by its stat line,
// after a leading ".\n0 0 0 0\n" that tells the client stat information
// is there (XrdXrootdProtocol::do_DirStat). Long listings go in
// kXR_oksofar parts.
func (c *conn) dirlist(h *header, data []byte) error {
	p, cgi, err := splitPath(data)
	if err != nil {
		return c.sendFailure(h.sid(), "", codeArgInvalid, err)
	}
	tok := c.tokenOf(cgi)
	if err := c.authorize(tok, p, ActList); err != nil {
		return c.refuse(h.sid(), err)
	}
	ctx, cancel := c.reqCtx(tok)
	defer cancel()
	list, err := c.s.ns.List(ctx, p)
	key := "dirlist " + p
	if err != nil {
		return c.sendFailure(h.sid(), key, codeArgInvalid, err)
	}
	c.answered(key)
	dstat := h.params()[15]&(dirlistDStat|dirlistDCksm) != 0
	var b []byte
	if dstat {
		b = append(b, ".\n0 0 0 0\n"...)
	}
	const part = 64 << 10
	for _, e := range list {
		if e.Name == "" || e.Name == "." || e.Name == ".." || strings.ContainsAny(e.Name, "\n\x00") {
			continue
		}
		b = append(b, e.Name...)
		b = append(b, '\n')
		if dstat {
			b = append(b, statLine(strings.TrimSuffix(p, "/")+"/"+e.Name, e)...)
			b = append(b, '\n')
		}
		if len(b) >= part {
			if err := c.send(h.sid(), uint16(xrdproto.OkSoFar), b); err != nil {
				return err
			}
			b = b[:0]
		}
	}
	if n := len(b); n > 0 {
		b[n-1] = 0
	}
	return c.send(h.sid(), uint16(xrdproto.Ok), b)
}

// locate answers kXR_locate with every endpoint that holds path, as
// xrootd's "S<access><host:port>": a root:// endpoint by its own
// address, any other (WebDAV, S3, a local directory) by the door's,
// which serves its bytes; access is "w" when the namespace writes to
// that endpoint (endpoint.Locator's Writable), else "r". A directory is
// the door itself (xrdfs ls locates the directory, then lists it at
// each server named), writable when an endpoint that has it is.
func (c *conn) locate(h *header, data []byte) error {
	p, cgi, err := splitPath(bytes.TrimPrefix(data, []byte("*")))
	if err != nil {
		return c.sendFailure(h.sid(), "", codeArgInvalid, err)
	}
	tok := c.tokenOf(cgi)
	if err := c.authorize(tok, p, ActRead, ActList); err != nil {
		return c.refuse(h.sid(), err)
	}
	ctx, cancel := c.reqCtx(tok)
	defer cancel()
	key := "locate " + p
	info, err := c.s.ns.Stat(ctx, p)
	if err != nil {
		return c.sendFailure(h.sid(), key, codeArgInvalid, err)
	}
	if !info.IsDir {
		// Where a file's bytes are is for those who may read them.
		if err := c.authorize(tok, p, ActRead); err != nil {
			return c.refuse(h.sid(), err)
		}
	}
	if l, ok := c.s.ns.(endpoint.Locator); ok {
		locs, err := l.Locations(ctx, p)
		if err != nil && !errors.Is(err, endpoint.ErrNotFound) {
			return c.sendFailure(h.sid(), key, codeArgInvalid, err)
		}
		// Not found after a Stat that found it: a file only the write
		// buffer holds so far, which the door serves.
		c.answered(key)
		return c.send(h.sid(), uint16(xrdproto.Ok), append([]byte(locateAnswer(locs, info.IsDir, c.selfAddr())), 0))
	}
	var locs []string
	self := false
	if info.IsDir {
		self = true
	} else {
		reps, err := c.s.ns.Replicas(ctx, p)
		if err != nil {
			return c.sendFailure(h.sid(), key, codeArgInvalid, err)
		}
		seen := map[string]bool{}
		for _, u := range reps {
			if !isRoot(u) {
				self = true
				continue
			}
			hp := hostPort(u)
			if !seen[hp] {
				seen[hp] = true
				locs = append(locs, "Sr"+hp)
			}
		}
		if len(reps) == 0 {
			self = true
		}
	}
	if self {
		locs = append(locs, "Sr"+c.selfAddr())
	}
	c.answered(key)
	return c.send(h.sid(), uint16(xrdproto.Ok), append([]byte(strings.Join(locs, " ")), 0))
}

// locateAnswer is the kXR_locate answer for locs: one
// "S<r|w><host:port>" per address, the door's (self) for endpoints that
// are not root:// and for a directory; an address named twice is
// writable when either is.
func locateAnswer(locs []endpoint.Location, isDir bool, self string) string {
	var addrs []string
	writable := map[string]bool{}
	add := func(a string, w bool) {
		if _, ok := writable[a]; !ok {
			addrs = append(addrs, a)
		}
		writable[a] = writable[a] || w
	}
	for _, l := range locs {
		switch {
		case isDir:
			add(self, l.Writable)
		case l.URL != nil && isRoot(l.URL):
			add(hostPort(l.URL), l.Writable)
		default:
			add(self, l.Writable)
		}
	}
	if len(addrs) == 0 {
		add(self, false)
	}
	out := make([]string, len(addrs))
	for i, a := range addrs {
		access := "r"
		if writable[a] {
			access = "w"
		}
		out[i] = "S" + access + a
	}
	return strings.Join(out, " ")
}

// selfAddr is the door's address as clients reach it.
func (c *conn) selfAddr() string {
	if c.s.opts.Advertise != "" {
		return c.s.opts.Advertise
	}
	if a, ok := c.nc.LocalAddr().(*net.TCPAddr); ok {
		ip := a.IP
		if v4 := ip.To4(); v4 != nil {
			ip = v4
		}
		return net.JoinHostPort(ip.String(), strconv.Itoa(a.Port))
	}
	return addrString(c.nc.LocalAddr())
}

// isRoot reports whether u is a URL an XRootD client can be sent to.
func isRoot(u *url.URL) bool {
	switch strings.ToLower(u.Scheme) {
	case "root", "roots", "xroot", "xroots":
		return u.Host != ""
	}
	return false
}

// hostPort is u's host:port, 1094 (the XRootD port) when u names none.
func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "1094"
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// queryConfig is kXR_query type kXR_Qconfig.
const queryConfig = 7

// configValue is what kXR_Qconfig answers for name: a value for the
// names lakefed knows, the name itself otherwise, as XRootD answers it.
// uproot and fsspec-xrootd ask for the readv limits before vector reads
// and fail without them.
func configValue(name string) string {
	switch name {
	case "readv_iov_max":
		return strconv.Itoa(maxReadVItems)
	case "readv_ior_max":
		return strconv.Itoa(maxReadVItem)
	case "bind_max":
		return "0"
	case "chksum":
		return "0:adler32"
	case "role":
		return "manager"
	case "version":
		return "lakefed"
	}
	return name
}

// query answers kXR_query for checksums (kXR_Qcksum: "adler32 <hex>",
// or the algorithm the cks.type CGI names), configuration (kXR_Qconfig:
// one line per name asked), space (kXR_Qspace, querySpace) and
// statistics (kXR_Qstats, queryStats). Other queries are
// kXR_Unsupported.
func (c *conn) query(h *header, data []byte) error {
	switch t := u16(h.params(), 0); t {
	case querySpace:
		return c.querySpace(h, data)
	case queryStats:
		return c.queryStats(h, data)
	case query.Checksum:
	case queryConfig:
		var b []byte
		for _, name := range strings.Fields(string(bytes.TrimRight(data, "\x00"))) {
			b = append(append(b, configValue(name)...), '\n')
		}
		return c.send(h.sid(), uint16(xrdproto.Ok), b)
	default:
		c.s.countError(classProtocol)
		return c.sendError(h.sid(), codeUnsupported, fmt.Sprintf("kXR_query type %d is not supported by lakefed (only kXR_Qcksum, kXR_Qconfig, kXR_Qspace and kXR_Qstats)", t))
	}
	p, cgi, err := splitPath(data)
	if err != nil {
		return c.sendFailure(h.sid(), "", codeArgInvalid, err)
	}
	tok := c.tokenOf(cgi)
	if err := c.authorize(tok, p, ActRead); err != nil {
		return c.refuse(h.sid(), err)
	}
	algo := strings.ToLower(cgi.Get("cks.type"))
	if algo == "" {
		algo = "adler32"
	}
	ctx, cancel := c.reqCtx(tok)
	defer cancel()
	sum, err := c.s.ns.Checksum(ctx, p, algo)
	key := "query " + p
	if err != nil {
		return c.sendFailure(h.sid(), key, codeArgInvalid, err)
	}
	c.answered(key)
	return c.send(h.sid(), uint16(xrdproto.Ok), append([]byte(algo+" "+sum), 0))
}

// redirectTarget picks the replica an open for read is sent to: the
// first root:// one whose host is not in tried (the hosts XrdCl names
// after failing there; "host" or "host:port") and that is not the door
// itself (self, host:port: a loop). ok is false when there is none and
// the door serves the file itself.
func redirectTarget(reps []*url.URL, tried, self string) (*url.URL, bool) {
	skip := map[string]bool{strings.ToLower(self): true}
	for t := range strings.SplitSeq(tried, ",") {
		if t = strings.ToLower(strings.TrimSpace(t)); t != "" {
			skip[t] = true
		}
	}
	for _, u := range reps {
		if !isRoot(u) {
			continue
		}
		if skip[strings.ToLower(u.Hostname())] || skip[strings.ToLower(hostPort(u))] {
			continue
		}
		return u, true
	}
	return nil, false
}

// redirectBody is the kXR_redirect body sending the open of path to u:
// port and host when u's path is path, which the client then asks for
// there; otherwise port 0 and u as a whole URL, whose path XrdCl puts in
// the request instead (XrdClXRootDMsgHandler, RewriteRequestRedirect).
// The client's CGI is not repeated: it keeps its own.
func redirectBody(u *url.URL, p string) []byte {
	up, err := httpx.CleanPath(u.Path)
	b := make([]byte, 4, 64)
	if err == nil && up == p {
		port, _ := strconv.Atoi(u.Port())
		if port == 0 {
			port = 1094
		}
		b[0], b[1], b[2], b[3] = byte(port>>24), byte(port>>16), byte(port>>8), byte(port)
		host := u.Hostname()
		if strings.Contains(host, ":") {
			host = "[" + host + "]"
		}
		b = append(b, host...)
		if u.RawQuery != "" {
			b = append(b, '?')
			b = append(b, u.RawQuery...)
		}
		return b
	}
	v := *u
	if v.Path != "" && !strings.HasPrefix(v.Path, "//") {
		v.Path = "/" + v.Path // root://host//abs/path: XRootD's absolute form
	}
	return append(b, v.String()...)
}
