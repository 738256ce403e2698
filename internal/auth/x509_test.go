package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// pkiCert is a certificate and its key.
type pkiCert struct {
	cert *x509.Certificate
	key  crypto.Signer
}

var serial atomic.Int64

func ecKey(t testing.TB) crypto.Signer {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func mustCreate(t testing.TB, tmpl, parent *x509.Certificate, pub crypto.PublicKey, signer crypto.Signer) *x509.Certificate {
	t.Helper()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// newCA makes a self-signed CA.
func newCA(t testing.TB, cn string) pkiCert {
	t.Helper()
	k := ecKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serial.Add(1)),
		Subject:               pkix.Name{Organization: []string{"lakefed test"}, CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	return pkiCert{mustCreate(t, tmpl, tmpl, k.Public(), k), k}
}

// newUser makes an end-entity client certificate signed by ca.
func newUser(t testing.TB, ca pkiCert, cn string) pkiCert {
	t.Helper()
	k := ecKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)),
		Subject:      pkix.Name{Organization: []string{"lakefed test"}, OrganizationalUnit: []string{"Users"}, CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(12 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	return pkiCert{mustCreate(t, tmpl, ca.cert, k.Public(), ca.key), k}
}

// proxyOpts vary a proxy from the RFC 3820 one.
type proxyOpts struct {
	noExt       bool
	nonCritical bool
	language    asn1.ObjectIdentifier
	pathLen     int // -1: none
	notAfter    time.Time
	signer      crypto.Signer // sign with this key instead of the issuer's
	subjectCN   []string      // RDNs to add (default one CN)
	isCA        bool
}

// newProxy makes an RFC 3820 proxy of issuer (an end entity or a proxy).
func newProxy(t testing.TB, issuer pkiCert, o proxyOpts) pkiCert {
	t.Helper()
	k := ecKey(t)
	sn := serial.Add(1)
	var rdns pkix.RDNSequence
	if _, err := asn1.Unmarshal(issuer.cert.RawSubject, &rdns); err != nil {
		t.Fatal(err)
	}
	cns := o.subjectCN
	if cns == nil {
		cns = []string{big.NewInt(sn).String()}
	}
	for _, cn := range cns {
		rdns = append(rdns, pkix.RelativeDistinguishedNameSET{{Type: oidCN, Value: cn}})
	}
	rawSubject, err := asn1.Marshal(rdns)
	if err != nil {
		t.Fatal(err)
	}
	lang := o.language
	if lang == nil {
		lang = oidInheritAll
	}
	info := struct {
		PathLen int // not optional: asn1 would leave out a 0
		Policy  struct{ Language asn1.ObjectIdentifier }
	}{PathLen: o.pathLen}
	info.Policy.Language = lang
	var val []byte
	if o.pathLen < 0 {
		val, err = asn1.Marshal(struct {
			Policy struct{ Language asn1.ObjectIdentifier }
		}{info.Policy})
	} else {
		val, err = asn1.Marshal(info)
	}
	if err != nil {
		t.Fatal(err)
	}
	notAfter := o.notAfter
	if notAfter.IsZero() {
		notAfter = time.Now().Add(6 * time.Hour)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(sn),
		RawSubject:   rawSubject,
		NotBefore:    time.Now().Add(-5 * time.Minute),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
	}
	if o.isCA {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	}
	if !o.noExt {
		tmpl.ExtraExtensions = []pkix.Extension{{Id: oidProxyCertInfo, Critical: !o.nonCritical, Value: val}}
	}
	signer := issuer.key
	if o.signer != nil {
		signer = o.signer
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, issuer.cert, k.Public(), signer)
	if err != nil {
		// CreateCertificate checks its own signature against the parent's
		// key; a forged signer fails there, so sign by hand.
		if o.signer == nil {
			t.Fatal(err)
		}
		return pkiCert{forge(t, tmpl, issuer.cert, k.Public(), o.signer), k}
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return pkiCert{c, k}
}

// forge makes a certificate that names parent as its issuer but is signed
// by signer: CreateCertificate refuses, so it signs with signer as a
// self-standing parent with parent's subject.
func forge(t testing.TB, tmpl, parent *x509.Certificate, pub crypto.PublicKey, signer crypto.Signer) *x509.Certificate {
	t.Helper()
	fake := *parent
	fake.PublicKey = signer.Public()
	return mustCreate(t, tmpl, &fake, pub, signer)
}

func chainOf(cs ...pkiCert) []*x509.Certificate {
	out := make([]*x509.Certificate, len(cs))
	for i, c := range cs {
		out[i] = c.cert
	}
	return out
}

func TestVerifyChain(t *testing.T) {
	ca := newCA(t, "Test CA")
	other := newCA(t, "Other CA")
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	user := newUser(t, ca, "Jane Doe")
	mallory := newUser(t, ca, "Mallory")
	stranger := newUser(t, other, "Stranger")
	proxy := newProxy(t, user, proxyOpts{pathLen: -1})
	proxy2 := newProxy(t, proxy, proxyOpts{pathLen: -1})
	limited := newProxy(t, user, proxyOpts{pathLen: -1, language: oidLimited})
	pl0 := newProxy(t, user, proxyOpts{pathLen: 0})
	const dn = "/O=lakefed test/OU=Users/CN=Jane Doe"
	now := time.Now()
	cases := []struct {
		name    string
		chain   []*x509.Certificate
		proxies int
		wantErr string
	}{
		{"user certificate", chainOf(user), 0, ""},
		{"proxy", chainOf(proxy, user), 1, ""},
		{"proxy of a proxy", chainOf(proxy2, proxy, user), 2, ""},
		{"limited proxy", chainOf(limited, user), 1, ""},
		{"path length 0, no proxy below", chainOf(pl0, user), 1, ""},
		{"path length 0 with a proxy below", chainOf(newProxy(t, pl0, proxyOpts{pathLen: -1}), pl0, user), 0, "path length"},
		{"proxy signed by someone else", chainOf(newProxy(t, user, proxyOpts{pathLen: -1, signer: mallory.key}), user), 0, "not signed"},
		{"proxy with its user cert swapped", chainOf(proxy, mallory), 0, "issuer is not"},
		{"expired proxy", chainOf(newProxy(t, user, proxyOpts{pathLen: -1, notAfter: now.Add(-time.Minute)}), user), 0, "validity"},
		{"proxy without the extension", chainOf(newProxy(t, user, proxyOpts{pathLen: -1, noExt: true}), user), 0, "x509"},
		{"extension not critical", chainOf(newProxy(t, user, proxyOpts{pathLen: -1, nonCritical: true}), user), 0, "not critical"},
		{"independent proxy", chainOf(newProxy(t, user, proxyOpts{pathLen: -1, language: asn1.ObjectIdentifier{1, 3, 6, 1, 5, 5, 7, 21, 2}}), user), 0, "policy language"},
		{"two CNs added", chainOf(newProxy(t, user, proxyOpts{pathLen: -1, subjectCN: []string{"1", "2"}}), user), 0, "plus one CN"},
		{"proxy that is a CA", chainOf(newProxy(t, user, proxyOpts{pathLen: -1, isCA: true}), user), 0, "CA"},
		{"only a proxy", chainOf(proxy), 0, "without its end-entity"},
		{"untrusted CA", chainOf(stranger), 0, "unknown authority"},
		{"proxy of an untrusted user", chainOf(newProxy(t, stranger, proxyOpts{pathLen: -1}), stranger), 0, "unknown authority"},
		{"empty", nil, 0, "no certificate"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, n, exp, err := VerifyChain(tc.chain, roots, now)
			if tc.wantErr != "" {
				if err == nil || !errors.Is(err, ErrInvalidCert) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("VerifyChain = %q, %v; want error with %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("VerifyChain: %v", err)
			}
			if got != dn || n != tc.proxies {
				t.Errorf("VerifyChain = %q, %d proxies; want %q, %d", got, n, dn, tc.proxies)
			}
			if exp.After(tc.chain[0].NotAfter) {
				t.Errorf("expires %v after the leaf's NotAfter %v", exp, tc.chain[0].NotAfter)
			}
		})
	}
}

func writePEMFile(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func keyPEM(t testing.TB, k crypto.Signer) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

func TestLoadCAsDir(t *testing.T) {
	dir := t.TempDir()
	ca1, ca2, ca3 := newCA(t, "one"), newCA(t, "two"), newCA(t, "three")
	writePEMFile(t, filepath.Join(dir, "1a2b3c4d.0"), "CERTIFICATE", ca1.cert.Raw)
	writePEMFile(t, filepath.Join(dir, "1a2b3c4d.1"), "CERTIFICATE", ca2.cert.Raw)
	writePEMFile(t, filepath.Join(dir, "three.pem"), "CERTIFICATE", ca3.cert.Raw)
	writePEMFile(t, filepath.Join(dir, "1a2b3c4d.r0"), "X509 CRL", []byte{1, 2, 3})
	os.WriteFile(filepath.Join(dir, "1a2b3c4d.signing_policy"), []byte("access_id_CA X509 '/CN=one'"), 0o644)
	os.WriteFile(filepath.Join(dir, "README"), []byte("not a cert"), 0o644)
	pool, n, err := LoadCAs("", dir)
	if err != nil || n != 3 {
		t.Fatalf("LoadCAs = %d, %v; want 3 certificates", n, err)
	}
	for _, ca := range []pkiCert{ca1, ca2, ca3} {
		u := newUser(t, ca, "u")
		if _, _, _, err := VerifyChain(chainOf(u), pool, time.Now()); err != nil {
			t.Errorf("user of %s: %v", ca.cert.Subject.CommonName, err)
		}
	}
}

// tlsEnv is a TLS server on loopback from ServerTLS with the middleware
// in front of a recorder.
type tlsEnv struct {
	dir      string
	ca       pkiCert
	srv      *httptest.Server
	rl       *Reloader
	seen     *seen
	certFile string
	keyFile  string
}

func writeServerCert(t testing.TB, ca pkiCert, certFile, keyFile string) *x509.Certificate {
	t.Helper()
	k := ecKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)),
		Subject:      pkix.Name{CommonName: "localhost"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
	}
	c := mustCreate(t, tmpl, ca.cert, k.Public(), ca.key)
	// Write to a temp name and rename, as a deploy tool would: a reload
	// never sees half a file.
	writePEMFile(t, certFile+".tmp", "CERTIFICATE", c.Raw)
	os.WriteFile(keyFile+".tmp", keyPEM(t, k), 0o600)
	os.Rename(certFile+".tmp", certFile)
	os.Rename(keyFile+".tmp", keyFile)
	return c
}

func newTLSEnv(t *testing.T, rules []Rule) *tlsEnv {
	t.Helper()
	e := &tlsEnv{dir: t.TempDir(), ca: newCA(t, "Test CA"), seen: &seen{}}
	caFile := filepath.Join(e.dir, "ca.pem")
	writePEMFile(t, caFile, "CERTIFICATE", e.ca.cert.Raw)
	e.certFile, e.keyFile = filepath.Join(e.dir, "cert.pem"), filepath.Join(e.dir, "key.pem")
	writeServerCert(t, e.ca, e.certFile, e.keyFile)
	cfg, rl, err := ServerTLS(e.certFile, e.keyFile, caFile, "")
	if err != nil {
		t.Fatal(err)
	}
	e.rl = rl
	a, _ := newTestAuthorizer(t, Config{CAFile: caFile, Rules: rules}, nil)
	e.srv = httptest.NewUnstartedServer(a.Middleware(e.seen.handler(), nil))
	e.srv.TLS = cfg
	e.srv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes
	e.srv.StartTLS()
	t.Cleanup(e.srv.Close)
	return e
}

// client returns an HTTPS client trusting the test CA and presenting
// chain (none when empty), with keep-alives off so each request
// handshakes.
func (e *tlsEnv) client(chain []*x509.Certificate, key crypto.Signer) *http.Client {
	roots := x509.NewCertPool()
	roots.AddCert(e.ca.cert)
	tc := &tls.Config{RootCAs: roots}
	if len(chain) > 0 {
		c := tls.Certificate{PrivateKey: key}
		for _, x := range chain {
			c.Certificate = append(c.Certificate, x.Raw)
		}
		tc.Certificates = []tls.Certificate{c}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: tc, DisableKeepAlives: true}, Timeout: 10 * time.Second}
}

func TestTLSClientCertificates(t *testing.T) {
	const dn = "/O=lakefed test/OU=Users/CN=Jane Doe"
	e := newTLSEnv(t, []Rule{{Prefix: "/home/jane", Identities: []string{dn}, Allow: []Action{Read}}})
	user := newUser(t, e.ca, "Jane Doe")
	proxy := newProxy(t, user, proxyOpts{pathLen: -1})
	proxy2 := newProxy(t, proxy, proxyOpts{pathLen: -1})
	mallory := newUser(t, e.ca, "Mallory")
	forged := newProxy(t, user, proxyOpts{pathLen: -1, signer: mallory.key})
	expired := newProxy(t, user, proxyOpts{pathLen: -1, notAfter: time.Now().Add(-time.Minute)})
	for _, tc := range []struct {
		name      string
		chain     []pkiCert
		key       crypto.Signer
		want      int // 0: handshake fails
		wantProxy bool
	}{
		{"user", []pkiCert{user}, user.key, 200, false},
		{"proxy", []pkiCert{proxy, user}, proxy.key, 200, true},
		{"proxy of proxy", []pkiCert{proxy2, proxy, user}, proxy2.key, 200, true},
		{"another user", []pkiCert{mallory}, mallory.key, 403, false},
		{"no certificate", nil, nil, 401, false},
		{"forged proxy", []pkiCert{forged, user}, forged.key, 0, false},
		{"expired proxy", []pkiCert{expired, user}, expired.key, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := e.client(chainOf(tc.chain...), tc.key).Get(e.srv.URL + "/home/jane/f")
			if tc.want == 0 {
				if err == nil {
					resp.Body.Close()
					t.Fatalf("GET = %s, want a failed handshake", resp.Status)
				}
				return
			}
			if err != nil {
				t.Fatalf("GET: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("GET = %s, want %d", resp.Status, tc.want)
			}
			if tc.want == 200 {
				e.seen.mu.Lock()
				id := e.seen.id
				e.seen.mu.Unlock()
				if id.Kind != X509 || id.Name != dn || id.Proxy != tc.wantProxy {
					t.Errorf("identity = %+v, want x509 %q proxy=%v", id, dn, tc.wantProxy)
				}
			}
		})
	}
}

// TestMiddlewareVerifiesCertificates: behind a TLS config that verifies
// nothing (tls.RequestClientCert), the middleware's own check refuses a
// forged proxy with 401.
func TestMiddlewareVerifiesCertificates(t *testing.T) {
	ca := newCA(t, "Test CA")
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	writePEMFile(t, caFile, "CERTIFICATE", ca.cert.Raw)
	a, _ := newTestAuthorizer(t, Config{CAFile: caFile, Rules: []Rule{{Prefix: "/", Allow: []Action{Read}}}}, nil)
	user := newUser(t, ca, "Jane Doe")
	good := newProxy(t, user, proxyOpts{pathLen: -1})
	forged := newProxy(t, user, proxyOpts{pathLen: -1, signer: newUser(t, ca, "M").key})
	h := a.Middleware((&seen{}).handler(), nil)
	for _, tc := range []struct {
		chain []*x509.Certificate
		want  int
	}{{chainOf(good, user), 200}, {chainOf(forged, user), 401}} {
		r := httptest.NewRequest("GET", "https://lakefed.test/f", nil)
		r.TLS = &tls.ConnectionState{PeerCertificates: tc.chain}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.want {
			t.Errorf("GET with chain = %d %s, want %d", w.Code, w.Body, tc.want)
		}
	}
}

// TestTLSReload swaps the certificate files and sees the new certificate
// served after Reload, and the old one before.
func TestTLSReload(t *testing.T) {
	e := newTLSEnv(t, nil)
	served := func() *big.Int {
		t.Helper()
		resp, err := e.client(nil, nil).Get(e.srv.URL + "/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.TLS.PeerCertificates[0].SerialNumber
	}
	first := served()
	next := writeServerCert(t, e.ca, e.certFile, e.keyFile)
	if got := served(); got.Cmp(first) != 0 {
		t.Fatalf("before Reload served serial %v, want the old %v", got, first)
	}
	if err := e.rl.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := served(); got.Cmp(next.SerialNumber) != 0 {
		t.Fatalf("after Reload served serial %v, want the new %v", got, next.SerialNumber)
	}
	// A broken file keeps the current certificate.
	os.WriteFile(e.certFile, []byte("garbage"), 0o600)
	if err := e.rl.Reload(); err == nil {
		t.Error("Reload of a garbage certificate succeeded")
	}
	if got := served(); got.Cmp(next.SerialNumber) != 0 {
		t.Errorf("after a failed Reload served serial %v, want %v", got, next.SerialNumber)
	}
}

// TestAuthorizerReloadCAs: a CA added to the directory is trusted after
// Reload.
func TestAuthorizerReloadCAs(t *testing.T) {
	dir := t.TempDir()
	ca1, ca2 := newCA(t, "one"), newCA(t, "two")
	writePEMFile(t, filepath.Join(dir, "one.pem"), "CERTIFICATE", ca1.cert.Raw)
	a, _ := newTestAuthorizer(t, Config{CADir: dir, Rules: []Rule{{Prefix: "/", Allow: []Action{Read}}}}, nil)
	h := a.Middleware((&seen{}).handler(), nil)
	u := newUser(t, ca2, "u")
	get := func() int {
		r := httptest.NewRequest("GET", "https://lakefed.test/f", nil)
		r.TLS = &tls.ConnectionState{PeerCertificates: chainOf(u)}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	if c := get(); c != 401 {
		t.Fatalf("user of an unknown CA = %d, want 401", c)
	}
	writePEMFile(t, filepath.Join(dir, "two.pem"), "CERTIFICATE", ca2.cert.Raw)
	if err := a.Reload(); err != nil {
		t.Fatal(err)
	}
	if c := get(); c != 200 {
		t.Fatalf("user of a CA added and reloaded = %d, want 200", c)
	}
}
