package xrootd

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/auth"
	"github.com/lakefed/lakefed/internal/auth/authtest"
	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/endpoint/xroot/xrdwire"
	"github.com/lakefed/lakefed/internal/httpx"
	"github.com/lakefed/lakefed/internal/testenv"
)

// doorTLS is the server TLS config of a lakefed listener (auth.ServerTLS,
// as the server builds it) for the test CA's 127.0.0.1 certificate.
func doorTLS(t testing.TB, c *testenv.TLS) *tls.Config {
	t.Helper()
	cfg, _, err := auth.ServerTLS(c.CertFile, c.KeyFile, "", "")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// protoMsg is the handshake and a kXR_protocol with reqFlags
// (kXR_ableTLS, kXR_wantTLS) and expect kXR_ExpLogin, as XrdCl sends
// them in one write.
func protoMsg(reqFlags byte) []byte {
	msg := make([]byte, 20+24)
	binary.BigEndian.PutUint32(msg[12:], 4)
	binary.BigEndian.PutUint32(msg[16:], 2012)
	req := msg[20:]
	binary.BigEndian.PutUint16(req[0:], 1)
	binary.BigEndian.PutUint16(req[2:], 3006) // kXR_protocol
	binary.BigEndian.PutUint32(req[4:], 0x520)
	req[8], req[9] = reqFlags, 3 // flags, expect kXR_ExpLogin
	return msg
}

// dialProto connects to addr and sends protoMsg(reqFlags). It returns
// the connection, switched to TLS (trusting pool) when the answer says
// kXR_gotoTLS, and the answer's flags.
func dialProto(t *testing.T, addr string, reqFlags byte, pool *x509.CertPool) (*rawClient, uint32) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := nc.Write(protoMsg(reqFlags)); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := xrdwire.ReadFrame(nc); err != nil {
		t.Fatalf("handshake answer: %v", err)
	}
	sid, st, body, err := xrdwire.ReadFrame(nc)
	if err != nil || sid != [2]byte{0, 1} || st != 0 || len(body) < 8 {
		t.Fatalf("kXR_protocol answer: sid %v status %d body % x err %v", sid, st, body, err)
	}
	flags := binary.BigEndian.Uint32(body[4:])
	var c net.Conn = nc
	if flags&flagGotoTLS != 0 {
		tc := tls.Client(nc, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
		if err := tc.Handshake(); err != nil {
			t.Fatalf("TLS handshake after kXR_gotoTLS: %v", err)
		}
		c = tc
	}
	return &rawClient{t: t, c: c, sid: 1}, flags
}

// login sends kXR_login and checks the answer is a bare session id.
func (r *rawClient) login() {
	r.t.Helper()
	if sec := r.loginSec(); sec != "" {
		r.t.Fatalf("login asks for authentication: %q", sec)
	}
}

// loginSec sends kXR_login and returns the security protocols its
// answer offers after the session id.
func (r *rawClient) loginSec() string {
	r.t.Helper()
	params := make([]byte, 16)
	copy(params[4:12], "test")
	params[14] = 5
	st, body := r.answer(r.request(3007, params, nil))
	if st != 0 || len(body) < 16 {
		r.t.Fatalf("login: status %d body %q", st, body)
	}
	return string(body[16:])
}

// ztnCred is XrdSecProtocolztn's credential for tok.
func ztnCred(tok string) []byte {
	b := append([]byte("ztn\x00"), 0, 'T', 0, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(len(tok)+1))
	return append(append(b, tok...), 0)
}

func authParams(cred string) []byte {
	p := make([]byte, 16)
	copy(p[12:], cred)
	return p
}

// kXR_auth: a TLS connection's login offers ztn and unix; a ztn token
// is the connection's credential from then on; unix is anonymous; ztn
// in plain TCP, where no one offered it, is refused.
func TestZtnAuth(t *testing.T) {
	ca := testenv.NewTLS(t)
	is := authtest.NewIssuer(t)
	ns := newFakeNS()
	ns.set("/data/f", []byte("secret"))
	_, addr := startDoor(t, ns, Options{TLS: doorTLS(t, ca), Authorize: newAuth(t, is)})
	tok := is.Token(t, "storage.read:/data", time.Hour)

	r, _ := dialProto(t, addr, protoAbleTLS|protoWantTLS, ca.Pool)
	if sec := r.loginSec(); sec != secParams {
		t.Fatalf("login over TLS offers %q, want %q", sec, secParams)
	}
	if st, _ := r.answer(r.request(3017, pathParams(), []byte("/data/f"))); st == 0 {
		t.Fatal("stat before kXR_auth allowed")
	}
	if st, body := r.answer(r.request(3000, authParams("ztn"), ztnCred(tok))); st != 0 {
		t.Fatalf("kXR_auth ztn: status %d %q", st, body)
	}
	if st, body := r.answer(r.request(3017, pathParams(), []byte("/data/f"))); st != 0 {
		t.Fatalf("stat after kXR_auth ztn: status %d %+v", st, xrdwire.ParseError(body))
	}
	if st, body := r.answer(r.request(3000, authParams("ztn"), []byte("junk"))); st != 4003 || xrdwire.ParseError(body).Code != 3010 {
		t.Errorf("malformed ztn credential: status %d %q, want kXR_NotAuthorized", st, body)
	}

	u, _ := dialProto(t, addr, protoAbleTLS|protoWantTLS, ca.Pool)
	u.loginSec()
	if st, _ := u.answer(u.request(3000, authParams("unix"), []byte("unix\x00me us"))); st != 0 {
		t.Fatalf("kXR_auth unix: status %d", st)
	}
	if st, body := u.answer(u.request(3017, pathParams(), []byte("/data/f"))); st != 4003 || xrdwire.ParseError(body).Code != 3010 {
		t.Errorf("stat after unix auth: status %d %q, want kXR_NotAuthorized (anonymous)", st, body)
	}

	p, _ := dialProto(t, addr, protoAbleTLS, ca.Pool)
	if sec := p.loginSec(); sec != "" {
		t.Errorf("login in plain TCP offers %q, want nothing", sec)
	}
	if st, _ := p.answer(p.request(3000, authParams("ztn"), ztnCred(tok))); st != 4003 {
		t.Errorf("kXR_auth ztn in plain TCP: status %d, want kXR_error", st)
	}
	if st, _ := p.answer(p.request(3017, pathParams(), []byte("/data/f"))); st == 0 {
		t.Error("a ztn token sent in plain TCP was taken")
	}
}

// A client that asks for TLS (kXR_wantTLS: roots://) gets kXR_haveTLS
// and kXR_gotoTLS, and the session goes on inside TLS on the same
// connection; one that does not stays in plain TCP; a door without TLS
// says so (no kXR_haveTLS), which makes XrdCl refuse a roots:// URL.
func TestTLSUpgrade(t *testing.T) {
	ca := testenv.NewTLS(t)
	ns := newFakeNS()
	ns.set("/d/f", []byte("hello"))
	_, addr := startDoor(t, ns, Options{TLS: doorTLS(t, ca)})

	r, flags := dialProto(t, addr, protoAbleTLS|protoWantTLS, ca.Pool)
	if flags&flagHaveTLS == 0 || flags&flagGotoTLS == 0 || flags&flagIsManager == 0 {
		t.Fatalf("flags %#x for a client that wants TLS: want kXR_haveTLS|kXR_gotoTLS|kXR_isManager", flags)
	}
	if _, ok := r.c.(*tls.Conn); !ok {
		t.Fatal("connection not switched to TLS")
	}
	r.login()
	if st, body := r.answer(r.request(3017, pathParams(), []byte("/d/f"))); st != 0 || !strings.Contains(string(body), " 5 ") {
		t.Fatalf("stat over TLS: status %d %q", st, body)
	}

	plain, flags := dialProto(t, addr, protoAbleTLS, ca.Pool)
	if flags&flagHaveTLS == 0 || flags&flagGotoTLS != 0 {
		t.Fatalf("flags %#x for a client able but not wanting TLS: want kXR_haveTLS without kXR_gotoTLS", flags)
	}
	plain.login()
	if st, _ := plain.answer(plain.request(3017, pathParams(), []byte("/d/f"))); st != 0 {
		t.Fatalf("stat in plain TCP beside TLS: status %d", st)
	}
	// TLS once other requests ran is refused: they write to the plain
	// connection.
	if st, _ := plain.answer(plain.request(3006, []byte{0, 0, 5, 0x20, protoWantTLS, 3}, nil)); st != 4003 {
		t.Errorf("kXR_wantTLS after login: status %d, want kXR_error", st)
	}

	_, noTLS := startDoor(t, ns, Options{})
	if _, flags := dialProto(t, noTLS, protoAbleTLS|protoWantTLS, ca.Pool); flags&(flagHaveTLS|flagGotoTLS) != 0 {
		t.Errorf("door without TLS answers flags %#x: want neither kXR_haveTLS nor kXR_gotoTLS", flags)
	}
}

// RequireTLS: kXR_tlsLogin, a TLS-able client is switched even without
// asking, and a plain one gets kXR_TLSRequired for everything.
func TestRequireTLS(t *testing.T) {
	ca := testenv.NewTLS(t)
	ns := newFakeNS()
	ns.set("/d/f", []byte("hello"))
	s, addr := startDoor(t, ns, Options{TLS: doorTLS(t, ca), RequireTLS: true})

	r, flags := dialProto(t, addr, protoAbleTLS, ca.Pool)
	if flags&flagTLSLogin == 0 || flags&flagGotoTLS == 0 {
		t.Fatalf("flags %#x with RequireTLS: want kXR_tlsLogin and kXR_gotoTLS", flags)
	}
	r.login()
	if st, _ := r.answer(r.request(3017, pathParams(), []byte("/d/f"))); st != 0 {
		t.Fatalf("stat over TLS: status %d", st)
	}

	plain, _ := dialProto(t, addr, 0, ca.Pool)
	for _, id := range []uint16{3007, 3017} { // login, stat
		st, body := plain.answer(plain.request(id, pathParams(), []byte("/d/f")))
		if se := xrdwire.ParseError(body); st != 4003 || se.Code != 3028 {
			t.Errorf("request %d in plain TCP with RequireTLS: status %d %+v, want kXR_TLSRequired (3028)", id, st, se)
		}
	}
	if st := s.Stats(); st.Errors[classRefused] != 2 {
		t.Errorf("refused = %d, want 2", st.Errors[classRefused])
	}
}

// Bytes sent in plain after a kXR_protocol asking for TLS, before its
// answer, are a protocol violation: the connection is closed, they are
// not served.
func TestTLSPlainBytesAfterWantTLS(t *testing.T) {
	ca := testenv.NewTLS(t)
	_, addr := startDoor(t, newFakeNS(), Options{TLS: doorTLS(t, ca)})
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	ping := make([]byte, 24)
	binary.BigEndian.PutUint16(ping[0:], 2)
	binary.BigEndian.PutUint16(ping[2:], 3011) // kXR_ping, in plain, too early
	if _, err := nc.Write(append(protoMsg(protoWantTLS), ping...)); err != nil {
		t.Fatal(err)
	}
	for range 2 { // handshake and kXR_protocol answers
		if _, _, _, err := xrdwire.ReadFrame(nc); err != nil {
			t.Fatalf("answers before TLS: %v", err)
		}
	}
	if _, _, _, err := xrdwire.ReadFrame(nc); err == nil {
		t.Fatal("the door answered a request sent in plain after kXR_wantTLS")
	}
}

// newAuth is an Authorizer trusting is, with /public open to anonymous
// read and list, and the door's hook on it as the server makes it.
func newAuth(t *testing.T, is *authtest.Issuer) func(ctx context.Context, token, act, p string) error {
	t.Helper()
	a, err := auth.New(context.Background(), auth.Config{
		Issuers: []auth.Issuer{{URL: is.URL}},
		Rules:   []auth.Rule{{Prefix: "/public", Anonymous: []auth.Action{auth.Read, auth.List}}},
	}, auth.Options{Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return func(ctx context.Context, token, act, p string) error {
		id, err := a.Identify(ctx, token)
		if err != nil {
			return err
		}
		return a.Allow(ctx, id, auth.Action(act), p)
	}
}

// The authz= CGI carries the caller's token: requests are decided on it
// before the namespace is asked, a refusal is kXR_NotAuthorized (never
// kXR_NotFound, which would tell what exists), and no token is anonymous.
func TestAuthzCGI(t *testing.T) {
	is := authtest.NewIssuer(t)
	ns := newFakeNS()
	ns.set("/public/p", []byte("public"))
	ns.set("/data/f", []byte("secret"))
	s, addr := startDoor(t, ns, Options{Authorize: newAuth(t, is)})

	bare := is.Token(t, "storage.read:/data", time.Hour)
	read := url.QueryEscape("Bearer " + bare)
	expired := is.Token(t, "storage.read:/data", -time.Hour)
	other := is.Token(t, "storage.read:/elsewhere", time.Hour)
	create := is.Token(t, "storage.create:/data", time.Hour)
	forged := bare[:len(bare)-4] + "AAAA"
	const (
		ok         = 0
		notAuth    = 3010
		notFound   = 3011
		reqStat    = 3017
		reqOpen    = 3010
		reqDirlist = 3004
		reqQuery   = 3001
		reqLocate  = 3027
	)
	cksum := make([]byte, 16)
	binary.BigEndian.PutUint16(cksum, 3) // kXR_Qcksum
	newFile := make([]byte, 16)
	binary.BigEndian.PutUint16(newFile[2:], 0x0008|0x0020) // kXR_new, kXR_open_updt
	for _, c := range []struct {
		name   string
		id     uint16
		params []byte
		path   string
		want   int    // 0: kXR_ok; else the kXR_error code
		reason string // in the refusal
	}{
		{"anonymous public", reqStat, nil, "/public/p", ok, ""},
		{"anonymous private", reqStat, nil, "/data/f", notAuth, "needs credentials"},
		{"anonymous private missing", reqStat, nil, "/data/none", notAuth, "needs credentials"},
		{"token", reqStat, nil, "/data/f?authz=" + read, ok, ""},
		{"bare token", reqStat, nil, "/data/f?authz=" + bare + "&x=1", ok, ""},
		{"token missing file", reqStat, nil, "/data/none?authz=" + read, notFound, ""},
		{"expired", reqStat, nil, "/data/f?authz=" + expired, notAuth, "expired"},
		{"forged", reqStat, nil, "/data/f?authz=" + forged, notAuth, "invalid token"},
		{"empty authz", reqStat, nil, "/public/p?authz=", notAuth, "invalid token"},
		{"bad escape", reqStat, nil, "/public/p?authz=%zz", notAuth, "invalid token"},
		{"other scope", reqStat, nil, "/data/f?authz=" + other, notAuth, "no scope"},
		{"other scope missing", reqStat, nil, "/data/none?authz=" + other, notAuth, "no scope"},
		{"open read", reqOpen, nil, "/data/f?authz=" + bare, ok, ""},
		{"open read anonymous", reqOpen, nil, "/data/f", notAuth, ""},
		{"dirlist", reqDirlist, nil, "/data?authz=" + bare, ok, ""},
		{"dirlist anonymous", reqDirlist, nil, "/data", notAuth, ""},
		{"checksum", reqQuery, cksum, "/data/f?authz=" + bare, ok, ""},
		{"checksum anonymous", reqQuery, cksum, "/data/f", notAuth, ""},
		{"locate", reqLocate, nil, "/data/f?authz=" + bare, ok, ""},
		{"locate anonymous", reqLocate, nil, "/data/f", notAuth, ""},
		{"write with a read token", reqOpen, newFile, "/data/new?authz=" + bare, notAuth, "no scope"},
		{"write with a create token", reqOpen, newFile, "/data/new?authz=" + create, ok, ""},
		{"replace with a create token", reqOpen, newFile, "/data/f?authz=" + create, notAuth, "no scope"},
		{"write anonymous", reqOpen, newFile, "/public/new", notAuth, "needs credentials"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := dialRaw(t, addr) // no token of an earlier case on it
			params := c.params
			if params == nil {
				params = pathParams()
			}
			st, body := r.answer(r.request(c.id, params, []byte(c.path)))
			if c.want == ok {
				if st != 0 {
					t.Fatalf("status %d %+v, want kXR_ok", st, xrdwire.ParseError(body))
				}
				return
			}
			se := xrdwire.ParseError(body)
			if st != 4003 || int(se.Code) != c.want {
				t.Fatalf("status %d %+v, want kXR_error %d", st, se, c.want)
			}
			if !strings.Contains(se.Message, c.reason) {
				t.Errorf("reason %q, want it to say %q", se.Message, c.reason)
			}
			if strings.Contains(se.Message, bare[:20]) {
				t.Errorf("reason %q repeats the token", se.Message)
			}
		})
	}
	// statx: a refused path is kXR_other, an allowed one its flags.
	r := dialRaw(t, addr)
	st, body := r.answer(r.request(3022, pathParams(), []byte("/data/f\n/data/f?authz="+bare+"\n/public/p")))
	if st != 0 || !bytes.Equal(body, []byte{statOther, statReadable | statWritable, statReadable | statWritable}) {
		t.Errorf("statx = %d % x, want other, file, file", st, body)
	}
	if st := s.Stats(); st.Errors[classRefused] < 10 || st.Errors[classNotFound] != 1 {
		t.Errorf("errors %v: want the refusals counted as refused, one notfound", st.Errors)
	}
}

// A token granted something is the connection's credential for the
// requests after it that carry none (xrdcp's checksum query carries no
// CGI); a request's own token still decides it.
func TestAuthzConnectionToken(t *testing.T) {
	is := authtest.NewIssuer(t)
	ns := newFakeNS()
	ns.set("/data/f", []byte("secret"))
	_, addr := startDoor(t, ns, Options{Authorize: newAuth(t, is)})
	r := dialRaw(t, addr)
	tok := is.Token(t, "storage.read:/data", time.Hour)
	expired := is.Token(t, "storage.read:/data", -time.Hour)
	cksum := make([]byte, 16)
	binary.BigEndian.PutUint16(cksum, 3)
	for i, c := range []struct {
		id     uint16
		params []byte
		path   string
		want   int
	}{
		{3017, nil, "/data/f", 3010},                  // anonymous
		{3017, nil, "/data/f?authz=" + expired, 3010}, // refused: not remembered
		{3017, nil, "/data/f", 3010},
		{3017, nil, "/data/f?authz=" + tok, 0},
		{3017, nil, "/data/f", 0},                     // the connection's token
		{3001, cksum, "/data/f?cks.type=adler32", 0},  // as xrdcp asks
		{3017, nil, "/data/f?authz=" + expired, 3010}, // its own token decides
		{3017, nil, "/elsewhere/f", 3010},             // the token's scope, no more
		{3017, nil, "/data/f", 0},
	} {
		params := c.params
		if params == nil {
			params = pathParams()
		}
		st, body := r.answer(r.request(c.id, params, []byte(c.path)))
		code := 0
		if st != 0 {
			code = int(xrdwire.ParseError(body).Code)
		}
		if code != c.want {
			t.Errorf("#%d %d %s: code %d (status %d %q), want %d", i, c.id, c.path[:min(len(c.path), 30)], code, st, body, c.want)
		}
	}
	// Another connection has no token.
	r2 := dialRaw(t, addr)
	if st, _ := r2.answer(r2.request(3017, pathParams(), []byte("/data/f"))); st == 0 {
		t.Error("a second connection got the first one's token")
	}
}

// A create-only token may upload a new file; if the file appears
// before the close, the upload is refused, not stored over it.
func TestCreateOnlyUploadRaced(t *testing.T) {
	is := authtest.NewIssuer(t)
	ns := newFakeNS()
	_, addr := startDoor(t, ns, Options{Authorize: newAuth(t, is)})
	r := dialRaw(t, addr)
	create := is.Token(t, "storage.create:/data", time.Hour)
	for i, race := range []bool{false, true} {
		p := []string{"/data/a", "/data/b"}[i]
		fh := r.open(p+"?authz="+create, 0x0008|0x0020)
		params := make([]byte, 16)
		binary.BigEndian.PutUint32(params, fh)
		if st, body := r.answer(r.request(3019, params, []byte("mine"))); st != 0 { // kXR_write
			t.Fatalf("write: %d %q", st, body)
		}
		if race {
			ns.set(p, []byte("theirs"))
		}
		st, body := r.answer(r.request(3003, params, nil)) // kXR_close
		got, _ := ns.get(p)
		if !race {
			if st != 0 || string(got) != "mine" {
				t.Fatalf("close of a new file: status %d %q, stored %q", st, body, got)
			}
			continue
		}
		if se := xrdwire.ParseError(body); st != 4003 || se.Code != 3010 || string(got) != "theirs" {
			t.Errorf("close after the file appeared: status %d %+v, stored %q; want kXR_NotAuthorized and theirs kept", st, se, got)
		}
	}
}

// caDir is an OpenSSL hashed CA directory (<subject hash>.0) holding
// the test CA, which XrdCl reads from X509_CERT_DIR.
func caDir(t *testing.T, ca *testenv.TLS) string {
	t.Helper()
	openssl := testenv.Require(t, "openssl")
	out, err := exec.Command(openssl, "x509", "-hash", "-noout", "-in", ca.CAFile).Output()
	if err != nil {
		t.Fatalf("openssl x509 -hash: %v", err)
	}
	dir := t.TempDir()
	b, err := os.ReadFile(ca.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, strings.TrimSpace(string(out))+".0"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Real clients over roots:// with tokens in authz=: xrdcp downloads and
// uploads, xrdfs lists and stats, all inside TLS; without a token the
// private file is refused (kXR_NotAuthorized, 3010), not missing.
func TestRootsXrdcpWithToken(t *testing.T) {
	xrdcp := testenv.Require(t, "xrdcp")
	xrdfs := testenv.Require(t, "xrdfs")
	ca := testenv.NewTLS(t)
	// No token but the test's: none XrdCl's ztn could find around it.
	env := []string{"X509_CERT_DIR=" + caDir(t, ca), "XRD_LOGLEVEL=Debug",
		"BEARER_TOKEN=", "BEARER_TOKEN_FILE=", "XDG_RUNTIME_DIR=" + t.TempDir()}
	is := authtest.NewIssuer(t)
	ns := newFakeNS()
	data := payload(3<<20+17, 40)
	ns.set("/data/f.root", data)
	ns.set("/public/p", []byte("public"))
	s, addr := startDoor(t, ns, Options{TLS: doorTLS(t, ca), Authorize: newAuth(t, is)})
	tok := url.QueryEscape("Bearer " + is.Token(t, "storage.read:/data storage.create:/data/up", time.Hour))
	dir := t.TempDir()

	dst := filepath.Join(dir, "f")
	out, err := run(t, env, xrdcp, "-f", "--cksum", "adler32", "roots://"+addr+"//data/f.root?authz="+tok, dst)
	if err != nil {
		t.Fatalf("xrdcp roots:// download: %v\n%s", err, lastLines(out, 40))
	}
	if got, _ := os.ReadFile(dst); !bytes.Equal(got, data) {
		t.Fatalf("downloaded %d bytes, want %d", len(got), len(data))
	}
	if !strings.Contains(out, "TLS hand-shake done") {
		t.Errorf("xrdcp's log does not say the TLS handshake was done:\n%s", grepLines(out, "(?i)tls"))
	}

	src := filepath.Join(dir, "up")
	up := payload(1<<20+3, 41)
	if err := os.WriteFile(src, up, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = run(t, env, xrdcp, "--cksum", "adler32", src, "roots://"+addr+"//data/up/g.root?authz="+tok)
	if err != nil {
		t.Fatalf("xrdcp roots:// upload: %v\n%s", err, lastLines(out, 40))
	}
	if got, ok := ns.get("/data/up/g.root"); !ok || !bytes.Equal(got, up) {
		t.Fatalf("uploaded %d bytes (stored %v), want %d", len(got), ok, len(up))
	}

	out, err = run(t, env, xrdcp, "-f", "roots://"+addr+"//data/f.root", filepath.Join(dir, "anon"))
	if err == nil || !strings.Contains(out, "3010") {
		t.Errorf("xrdcp without a token: %v, want kXR_NotAuthorized [3010]\n%s", err, lastLines(out, 10))
	}
	out, err = run(t, env, xrdcp, "-f", "roots://"+addr+"//data/none.root?authz="+tok, filepath.Join(dir, "none"))
	if err == nil || !strings.Contains(out, "3011") {
		t.Errorf("xrdcp of a missing file with a token: %v, want kXR_NotFound [3011]\n%s", err, lastLines(out, 10))
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		// The size alone: xrdfs's debug log may land inside its "Size:" line.
		{[]string{"stat", "/data/f.root?authz=" + tok}, strconv.Itoa(len(data))},
		{[]string{"ls", "-l", "/data?authz=" + tok}, "/data/f.root"},
	} {
		out, err := run(t, env, xrdfs, append([]string{"roots://" + addr}, c.args...)...)
		if err != nil || !strings.Contains(out, c.want) || !strings.Contains(out, "TLS hand-shake done") {
			t.Errorf("xrdfs roots:// %s: %v, want %q and a TLS handshake in\n%s", c.args[0], err, c.want, lastLines(out, 20))
		}
	}
	if st := s.Stats(); st.ReadBytes < int64(len(data)) || st.Errors[classRefused] == 0 {
		t.Errorf("stats %+v", st)
	}

	// ztn: the token from BEARER_TOKEN, sent in kXR_auth inside TLS;
	// no CGI needed. Without a token XrdCl falls back to unix, which is
	// anonymous.
	ztnEnv := append(slices.Clone(env), "BEARER_TOKEN="+is.Token(t, "storage.read:/data", time.Hour))
	out, err = run(t, ztnEnv, xrdcp, "-f", "roots://"+addr+"//data/f.root", filepath.Join(dir, "ztn"))
	if err != nil || !strings.Contains(out, "Authenticated with ztn") {
		t.Errorf("xrdcp roots:// with BEARER_TOKEN: %v, want a copy authenticated with ztn\n%s", err, grepLines(out, "(?i)auth|error"))
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "ztn")); !bytes.Equal(got, data) {
		t.Errorf("ztn copy has %d bytes, want %d", len(got), len(data))
	}
	badEnv := append(slices.Clone(env), "BEARER_TOKEN="+is.Token(t, "storage.read:/data", -time.Hour))
	out, err = run(t, badEnv, xrdcp, "-f", "roots://"+addr+"//data/f.root", filepath.Join(dir, "ztnbad"))
	if err == nil || !strings.Contains(out, "expired") {
		t.Errorf("xrdcp roots:// with an expired BEARER_TOKEN: %v, want a refusal saying expired\n%s", err, grepLines(out, "(?i)auth|error"))
	}
	if _, err := os.Stat(fmt.Sprintf("/tmp/bt_u%d", os.Geteuid())); err != nil { // else XrdCl finds that token
		out, err = run(t, env, xrdcp, "-f", "roots://"+addr+"//public/p", filepath.Join(dir, "anonp"))
		if err != nil || !strings.Contains(out, "Authenticated with unix") {
			t.Errorf("anonymous xrdcp roots:// of /public: %v, want a copy authenticated with unix\n%s", err, grepLines(out, "(?i)auth|error"))
		}
	}

	// root:// to the same door stays in plain TCP, and works.
	out, err = run(t, env, xrdcp, "-f", "root://"+addr+"//data/f.root?authz="+tok, filepath.Join(dir, "plain"))
	if err != nil || strings.Contains(out, "TLS hand-shake") {
		t.Errorf("xrdcp root:// to a door with TLS: %v, want a plain download\n%s", err, grepLines(out, "(?i)tls|error"))
	}

	// A door without TLS: XrdCl refuses roots:// rather than going plain.
	_, plain := startDoor(t, ns, Options{})
	out, err = run(t, env, xrdcp, "-f", "roots://"+plain+"//data/f.root", filepath.Join(dir, "p"))
	if err == nil || !strings.Contains(out, "encryption") {
		t.Errorf("xrdcp roots:// to a door without TLS: %v, want a refusal about encryption\n%s", err, lastLines(out, 10))
	}
}

// bearerNS records the bearer token (httpx.Bearer) namespace calls get.
type bearerNS struct {
	*fakeNS
	mu   sync.Mutex
	seen map[string]string // "stat"/"open" → token
}

func (n *bearerNS) note(call string, ctx context.Context) {
	n.mu.Lock()
	n.seen[call] = httpx.Bearer(ctx)
	n.mu.Unlock()
}

func (n *bearerNS) Stat(ctx context.Context, p string) (endpoint.Info, error) {
	n.note("stat", ctx)
	return n.fakeNS.Stat(ctx, p)
}

func (n *bearerNS) Open(ctx context.Context, p string, off, l int64) (io.ReadCloser, error) {
	n.note("open", ctx)
	return n.fakeNS.Open(ctx, p, off, l)
}

// The namespace gets the caller's granted token, for endpoints that
// pass it on (endpoint.Config.PassToken), as Middleware gives it.
func TestTokenPassedOn(t *testing.T) {
	is := authtest.NewIssuer(t)
	ns := &bearerNS{fakeNS: newFakeNS(), seen: map[string]string{}}
	ns.set("/data/f", []byte("secret"))
	_, addr := startDoor(t, ns, Options{Authorize: newAuth(t, is)})
	r := dialRaw(t, addr)
	tok := is.Token(t, "storage.read:/data", time.Hour)
	fh := r.open("/data/f?authz=Bearer%20"+tok, 0)
	params := make([]byte, 16)
	binary.BigEndian.PutUint32(params, fh)
	binary.BigEndian.PutUint32(params[12:], 6)
	if st, body := r.answer(r.request(3013, params, nil)); st != 0 || string(body) != "secret" { // kXR_read
		t.Fatalf("read: %d %q", st, body)
	}
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if ns.seen["stat"] != tok || ns.seen["open"] != tok {
		t.Errorf("namespace got tokens stat %.10q open %.10q, want the caller's %.10q", ns.seen["stat"], ns.seen["open"], tok)
	}
}
