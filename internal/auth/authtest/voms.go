package authtest

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// VOMS is a grid PKI for tests of VOMS proxies, made in Go as PEM files
// (RSA keys, which voms-proxy-fake signs with): a CA, a user, the VOMS
// server of VO "cms" on voms.example.org, named in a vomsdir
// (cms/voms.example.org.lsc), and a rogue VOMS server from the same CA
// that no .lsc file names. Proxy makes real VOMS proxies with
// voms-proxy-fake.
//
//	v := authtest.NewVOMS(t, testenv.Require(t, "voms-proxy-fake"))
//	cfg := auth.Config{CAFile: v.CAFile, VOMSDir: v.VOMSDir}
//	prod := v.Proxy(t, "/cms/Role=production")           // curl --cert prod --key prod
//	rogue := v.Proxy(t, "/cms/Role=production", v.Rogue()...)
type VOMS struct {
	// Dir holds every file.
	Dir string
	// CAFile holds the CAs' certificates (the user's and VOMS
	// servers' CA, and another CA whose VOMS server has the right DN);
	// CACertDir is a directory holding only that file (as ca.pem, which
	// auth.LoadCAs reads).
	CAFile, CACertDir string
	// UserCert and UserKey are the user's; UserDN is its DN.
	UserCert, UserKey, UserDN string
	// VOMSDir is the vomsdir naming the VOMS server (not the rogue).
	VOMSDir string
	// ServerDN and CADN are the VOMS server's and the CA's DNs.
	ServerDN, CADN string

	tool                  string
	server, serverKey     string
	rogue, rogueKey       string
	otherSrv, otherSrvKey string // a VOMS server with the right DN from another trusted CA
}

// The names NewVOMS gives.
const (
	VOMSHost   = "voms.example.org"
	VOMSURI    = VOMSHost + ":15000"
	VOMSUserDN = "/O=lakefed test/OU=Users/CN=Jane Doe"
	vomsSrvDN  = "/O=lakefed test/CN=" + VOMSHost
	vomsCADN   = "/O=lakefed test/CN=Grid Test CA"
)

// NewVOMS makes the PKI under a temporary directory; tool is the path
// of voms-proxy-fake.
func NewVOMS(t testing.TB, tool string) *VOMS {
	t.Helper()
	dir := t.TempDir()
	v := &VOMS{Dir: dir, tool: tool, UserDN: VOMSUserDN, ServerDN: vomsSrvDN, CADN: vomsCADN,
		VOMSDir: filepath.Join(dir, "vomsdir"), CACertDir: filepath.Join(dir, "certificates")}
	ca, caKey := v.issue(t, "ca", pkix.Name{Organization: []string{"lakefed test"}, CommonName: "Grid Test CA"}, nil, nil, 1, true)
	v.CAFile = filepath.Join(dir, "ca.pem")
	v.UserCert, v.UserKey = v.leaf(t, "user", pkix.Name{Organization: []string{"lakefed test"}, OrganizationalUnit: []string{"Users"}, CommonName: "Jane Doe"}, ca, caKey, 2)
	v.server, v.serverKey = v.leaf(t, "voms", pkix.Name{Organization: []string{"lakefed test"}, CommonName: VOMSHost}, ca, caKey, 3)
	v.rogue, v.rogueKey = v.leaf(t, "rogue", pkix.Name{Organization: []string{"lakefed test"}, CommonName: "rogue.example.org"}, ca, caKey, 4)
	other, otherKey := v.issue(t, "other-ca", pkix.Name{Organization: []string{"lakefed test"}, CommonName: "Other CA"}, nil, nil, 5, true)
	v.otherSrv, v.otherSrvKey = v.leaf(t, "voms-other", pkix.Name{Organization: []string{"lakefed test"}, CommonName: VOMSHost}, other, otherKey, 6)
	for _, d := range []string{filepath.Join(v.VOMSDir, "cms"), v.CACertDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Both CAs are trusted: the other one's server fails on the .lsc
	// file alone.
	var both []byte
	for _, c := range []*x509.Certificate{ca, other} {
		both = append(both, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
	}
	writeFile(t, v.CAFile, both, 0o644)
	writeFile(t, filepath.Join(v.CACertDir, "ca.pem"), both, 0o644)
	v.WriteLSC(t, v.ServerDN, v.CADN)
	return v
}

// WriteLSC writes cms/voms.example.org.lsc with the DNs given, one a line.
func (v *VOMS) WriteLSC(t testing.TB, dns ...string) {
	t.Helper()
	var b bytes.Buffer
	for _, dn := range dns {
		b.WriteString(dn + "\n")
	}
	writeFile(t, filepath.Join(v.VOMSDir, "cms", VOMSHost+".lsc"), b.Bytes(), 0o644)
}

// Rogue are Proxy options that make the AC's signer a VOMS server of
// the trusted CA that the vomsdir does not name.
func (v *VOMS) Rogue() []string { return []string{"-hostcert", v.rogue, "-hostkey", v.rogueKey} }

// RogueCert and RogueKey are the rogue VOMS server's certificate and
// key: a valid certificate of the CA with another DN than the user's.
func (v *VOMS) RogueCert() string { return v.rogue }

// RogueKey is the key of RogueCert.
func (v *VOMS) RogueKey() string { return v.rogueKey }

// OtherCA are Proxy options that make the AC's signer a server with the
// right DN but from a CA other than the one the .lsc file names.
func (v *VOMS) OtherCA() []string {
	return []string{"-hostcert", v.otherSrv, "-hostkey", v.otherSrvKey}
}

// Expired are Proxy options that make the AC's validity end an hour ago,
// the proxy's still valid.
func Expired() []string { return []string{"-pastac", "7200", "-vomslife", "1"} }

// Proxy makes an RFC 3820 VOMS proxy of the user for VO cms holding
// fqan, signed by the VOMS server (opts may replace it: Rogue, OtherCA,
// or add others: Expired), and returns its file: the proxy certificate,
// its key and the user's certificate, as X509_USER_PROXY holds them.
func (v *VOMS) Proxy(t testing.TB, fqan string, opts ...string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "proxy.pem")
	args := []string{"-rfc", "-q", "-cert", v.UserCert, "-key", v.UserKey, "-certdir", v.CACertDir,
		"-hostcert", v.server, "-hostkey", v.serverKey, "-voms", "cms", "-fqan", fqan, "-uri", VOMSURI, "-hours", "12"}
	args = append(append(args, opts...), "-out", out)
	cmd := exec.Command(v.tool, args...)
	cmd.Dir = t.TempDir() // where it tries to write its .rnd
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("voms-proxy-fake %v: %v\n%s", args, err, b)
	}
	return out
}

// TamperedProxy returns a proxy of the proxy in file src (as Proxy
// makes it) that carries src's VOMS extension with one bit of the first
// AC's signature flipped: a chain that verifies, whose AC does not.
func (v *VOMS) TamperedProxy(t testing.TB, src string) string {
	t.Helper()
	certs, key := readProxy(t, src)
	var ext pkix.Extension
	for _, e := range certs[0].Extensions {
		if e.Id.Equal(asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 8005, 100, 100, 5}) {
			ext = e
		}
	}
	if ext.Value == nil {
		t.Fatal("proxy without a VOMS extension")
	}
	ext.Value = bytes.Clone(ext.Value)
	// The AC ends with its signature, a BIT STRING; its last byte is a
	// signature byte.
	acEnd := acEndOffset(t, ext.Value)
	ext.Value[acEnd-1] ^= 0x01
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	parent := certs[0]
	serial := big.NewInt(time.Now().UnixNano() & 0x7fffffff)
	tmpl := &x509.Certificate{
		SerialNumber:    serial,
		RawSubject:      proxySubject(t, parent.RawSubject, serial.String()),
		NotBefore:       time.Now().Add(-time.Minute),
		NotAfter:        time.Now().Add(time.Hour),
		KeyUsage:        x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtraExtensions: []pkix.Extension{ext, {Id: asn1.ObjectIdentifier{1, 3, 6, 1, 5, 5, 7, 1, 14}, Critical: true, Value: inheritAll}},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &k.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: der})
	pem.Encode(&b, &pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
	for _, c := range certs {
		pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	out := filepath.Join(t.TempDir(), "tampered.pem")
	writeFile(t, out, b.Bytes(), 0o600)
	return out
}

// inheritAll is the proxyCertInfo value of an inheritAll proxy without
// a path length limit.
var inheritAll = func() []byte {
	b, _ := asn1.Marshal(struct {
		Policy struct{ Language asn1.ObjectIdentifier }
	}{Policy: struct{ Language asn1.ObjectIdentifier }{asn1.ObjectIdentifier{1, 3, 6, 1, 5, 5, 7, 21, 1}}})
	return b
}()

// proxySubject is the DER name parent plus one RDN CN=cn.
func proxySubject(t testing.TB, parent []byte, cn string) []byte {
	var rdns pkix.RDNSequence
	if _, err := asn1.Unmarshal(parent, &rdns); err != nil {
		t.Fatal(err)
	}
	rdns = append(rdns, pkix.RelativeDistinguishedNameSET{{Type: asn1.ObjectIdentifier{2, 5, 4, 3}, Value: cn}})
	b, err := asn1.Marshal(rdns)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// acEndOffset is the end of the first AC in a VOMS extension value
// (SEQUENCE OF SEQUENCE OF AttributeCertificate).
func acEndOffset(t testing.TB, v []byte) int {
	var outer, inner, ac asn1.RawValue
	if _, err := asn1.Unmarshal(v, &outer); err != nil {
		t.Fatal(err)
	}
	if _, err := asn1.Unmarshal(outer.Bytes, &inner); err != nil {
		t.Fatal(err)
	}
	if _, err := asn1.Unmarshal(inner.Bytes, &ac); err != nil {
		t.Fatal(err)
	}
	// The AC starts inner's content, which starts outer's.
	outerHdr := len(outer.FullBytes) - len(outer.Bytes)
	innerHdr := len(inner.FullBytes) - len(inner.Bytes)
	return outerHdr + innerHdr + len(ac.FullBytes)
}

// readProxy reads a proxy file: its certificates, leaf first, and the
// proxy's key.
func readProxy(t testing.TB, path string) ([]*x509.Certificate, crypto.Signer) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var certs []*x509.Certificate
	var key crypto.Signer
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		switch blk.Type {
		case "CERTIFICATE":
			c, err := x509.ParseCertificate(blk.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			certs = append(certs, c)
		case "RSA PRIVATE KEY":
			k, err := x509.ParsePKCS1PrivateKey(blk.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			key = k
		case "PRIVATE KEY":
			k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			key = k.(crypto.Signer)
		}
	}
	if len(certs) < 2 || key == nil {
		t.Fatalf("%s: not a proxy file (%d certificates)", path, len(certs))
	}
	return certs, key
}

// ReadChain reads the certificates of a PEM file, in file order.
func ReadChain(t testing.TB, path string) []*x509.Certificate {
	t.Helper()
	certs, _ := readProxy(t, path)
	return certs
}

// issue makes a certificate (a CA when ca) signed by parent (self-signed
// when nil) and writes NAME.pem and NAME.key.
func (v *VOMS) issue(t testing.TB, name string, subj pkix.Name, parent *x509.Certificate, parentKey crypto.Signer, serial int64, ca bool) (*x509.Certificate, crypto.Signer) {
	t.Helper()
	c, k := v.cert(t, subj, parent, parentKey, serial, ca)
	v.write(t, name, c, k)
	return c, k
}

// leaf makes an end-entity certificate signed by parent and writes
// NAME.pem and NAME.key, whose paths it returns.
func (v *VOMS) leaf(t testing.TB, name string, subj pkix.Name, parent *x509.Certificate, parentKey crypto.Signer, serial int64) (string, string) {
	t.Helper()
	c, k := v.cert(t, subj, parent, parentKey, serial, false)
	return v.write(t, name, c, k)
}

func (v *VOMS) cert(t testing.TB, subj pkix.Name, parent *x509.Certificate, parentKey crypto.Signer, serial int64, ca bool) (*x509.Certificate, crypto.Signer) {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      subj,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(48 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
		// voms-proxy-fake puts the signer's key id in the AC's
		// authorityKeyIdentifier and fails without one.
		SubjectKeyId: keyID(&k.PublicKey),
	}
	if ca {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign
		tmpl.ExtKeyUsage = nil
	}
	if parent == nil {
		parent, parentKey = tmpl, k
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &k.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return c, k
}

// keyID is RFC 5280 §4.2.1.2's method (1) key identifier: the SHA-1 of
// the public key's bits.
func keyID(pub *rsa.PublicKey) []byte {
	h := sha1.Sum(x509.MarshalPKCS1PublicKey(pub))
	return h[:]
}

// write writes NAME.pem and NAME.key (mode 0600, as grid tools demand).
func (v *VOMS) write(t testing.TB, name string, c *x509.Certificate, k crypto.Signer) (string, string) {
	t.Helper()
	cf, kf := filepath.Join(v.Dir, name+".pem"), filepath.Join(v.Dir, name+".key")
	writeFile(t, cf, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}), 0o644)
	writeFile(t, kf, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k.(*rsa.PrivateKey))}), 0o600)
	return cf, kf
}

func writeFile(t testing.TB, path string, b []byte, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, b, mode); err != nil {
		t.Fatal(err)
	}
}
