package auth

import (
	"bytes"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// RFC 3820 object identifiers.
var (
	// oidProxyCertInfo is id-pe-proxyCertInfo (RFC 3820 §3.8).
	oidProxyCertInfo = asn1.ObjectIdentifier{1, 3, 6, 1, 5, 5, 7, 1, 14}
	// oidInheritAll is id-ppl-inheritAll: the proxy has all its issuer's rights.
	oidInheritAll = asn1.ObjectIdentifier{1, 3, 6, 1, 5, 5, 7, 21, 1}
	// oidLimited is Globus's "limited proxy" language (voms-proxy-init
	// -limited): all rights for data access, none to start jobs.
	oidLimited = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 3536, 1, 1, 1, 9}
	// oidCN is the commonName attribute.
	oidCN = asn1.ObjectIdentifier{2, 5, 4, 3}
)

// maxChain bounds a client's chain: CA intermediates plus proxies of
// proxies. Real ones are 2-5 long.
const maxChain = 16

// certCacheSize bounds the verified-chain cache (one entry per TLS
// connection; see certCache).
const certCacheSize = 4096

// proxyCertInfo is the RFC 3820 §3.8 extension value:
//
//	ProxyCertInfo ::= SEQUENCE {
//	    pCPathLenConstraint   INTEGER (0..MAX) OPTIONAL,
//	    proxyPolicy           ProxyPolicy }
//	ProxyPolicy ::= SEQUENCE {
//	    policyLanguage        OBJECT IDENTIFIER,
//	    policy                OCTET STRING OPTIONAL }
type proxyCertInfo struct {
	PathLen int `asn1:"optional,default:-1"`
	Policy  struct {
		Language asn1.ObjectIdentifier
		Policy   []byte `asn1:"optional"`
	}
}

// LoadCAs reads trusted CA certificates: every PEM certificate in file,
// and in dir every file named *.pem or <hash>.N (the OpenSSL hashed
// layout of /etc/grid-security/certificates; IGTF's *.r0 CRLs,
// *.signing_policy and *.namespaces are not certificates and are
// skipped). It returns the pool and the number of certificates added.
// A file in dir that holds no certificate is skipped; an unreadable file
// or dir is an error.
func LoadCAs(file, dir string) (*x509.CertPool, int, error) {
	pool := x509.NewCertPool()
	n := 0
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, 0, fmt.Errorf("%w: CA file: %v", ErrConfig, err)
		}
		k := addPEM(pool, b)
		if k == 0 {
			return nil, 0, fmt.Errorf("%w: CA file %s holds no PEM certificate", ErrConfig, file)
		}
		n += k
	}
	if dir != "" {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return nil, 0, fmt.Errorf("%w: CA dir: %v", ErrConfig, err)
		}
		for _, e := range ents {
			if !caFileName(e.Name()) {
				continue
			}
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				return nil, 0, fmt.Errorf("%w: CA dir: %v", ErrConfig, err)
			}
			n += addPEM(pool, b)
		}
	}
	return pool, n, nil
}

// caFileName reports whether name is a CA certificate in a hashed
// directory: "*.pem", or 8 hex digits, a dot and a decimal number.
func caFileName(name string) bool {
	if strings.HasSuffix(name, ".pem") {
		return true
	}
	hash, num, ok := strings.Cut(name, ".")
	if !ok || len(hash) != 8 || num == "" {
		return false
	}
	for _, c := range hash {
		if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
			return false
		}
	}
	for _, c := range num {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func addPEM(pool *x509.CertPool, b []byte) int {
	n := 0
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return n
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			continue
		}
		pool.AddCert(c)
		n++
	}
}

// trust is the CA pool client certificates are checked against;
// Authorizer.Reload swaps it.
type trust struct {
	pool *x509.CertPool
}

// isProxy reports whether c carries the RFC 3820 proxyCertInfo extension.
func isProxy(c *x509.Certificate) bool {
	for _, e := range c.Extensions {
		if e.Id.Equal(oidProxyCertInfo) {
			return true
		}
	}
	return false
}

// VerifyChain checks a client's certificate chain (leaf first, as TLS
// sends it) and returns the end entity's DN in OpenSSL slash form, the
// number of RFC 3820 proxies in front of it, and when the chain expires.
//
// Go's verifier refuses proxy certificates (they are signed by an end
// entity, not a CA, and carry a critical extension it does not know), so
// the proxies are checked here, leaf first, each against the certificate
// after it (RFC 3820 §4.1): signed by it, its issuer field is that
// certificate's subject, its subject is that subject plus one CN, the
// proxyCertInfo extension is present and critical with a path length
// that allows the proxies below it and a policy language of inheritAll
// or limited (an "independent" proxy carries none of its issuer's
// rights, so no identity), it is not a CA, may not sign certificates,
// and is within its validity; the signer, if it has a key usage, has
// digitalSignature. Then the end entity goes to x509.Verify against
// roots, with the rest of the chain as intermediates and client-auth
// usage.
func VerifyChain(chain []*x509.Certificate, roots *x509.CertPool, now time.Time) (dn string, proxies int, expires time.Time, err error) {
	if len(chain) == 0 {
		return "", 0, time.Time{}, fmt.Errorf("%w: no certificate", ErrInvalidCert)
	}
	if len(chain) > maxChain {
		return "", 0, time.Time{}, fmt.Errorf("%w: chain of %d certificates", ErrInvalidCert, len(chain))
	}
	for proxies < len(chain) && isProxy(chain[proxies]) {
		proxies++
	}
	if proxies == len(chain) {
		return "", 0, time.Time{}, fmt.Errorf("%w: proxy chain without its end-entity certificate", ErrInvalidCert)
	}
	expires = chain[0].NotAfter
	for i := range proxies {
		if err := checkProxy(chain[i], chain[i+1], i, now); err != nil {
			return "", 0, time.Time{}, fmt.Errorf("%w: proxy %d: %v", ErrInvalidCert, i, err)
		}
		if chain[i].NotAfter.Before(expires) {
			expires = chain[i].NotAfter
		}
	}
	ee := chain[proxies]
	inter := x509.NewCertPool()
	for _, c := range chain[proxies+1:] {
		inter.AddCert(c)
	}
	verified, err := ee.Verify(x509.VerifyOptions{
		Roots:         roots,
		Intermediates: inter,
		CurrentTime:   now,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return "", 0, time.Time{}, fmt.Errorf("%w: %v", ErrInvalidCert, err)
	}
	for _, c := range verified[0] {
		if c.NotAfter.Before(expires) {
			expires = c.NotAfter
		}
	}
	dn, err = slashDN(ee.RawSubject)
	if err != nil {
		return "", 0, time.Time{}, fmt.Errorf("%w: subject: %v", ErrInvalidCert, err)
	}
	return dn, proxies, expires, nil
}

// checkProxy checks proxy p against its signer, with below proxies
// issued under it in the chain.
func checkProxy(p, signer *x509.Certificate, below int, now time.Time) error {
	var info proxyCertInfo
	found := false
	for _, e := range p.Extensions {
		if !e.Id.Equal(oidProxyCertInfo) {
			continue
		}
		if found {
			return errors.New("two proxyCertInfo extensions")
		}
		found = true
		if !e.Critical {
			return errors.New("proxyCertInfo not critical")
		}
		rest, err := asn1.Unmarshal(e.Value, &info)
		if err != nil || len(rest) != 0 {
			return errors.New("malformed proxyCertInfo")
		}
	}
	for _, id := range p.UnhandledCriticalExtensions {
		if !id.Equal(oidProxyCertInfo) {
			return fmt.Errorf("unknown critical extension %v", id)
		}
	}
	if info.PathLen >= 0 && below > info.PathLen {
		return fmt.Errorf("path length %d allows fewer proxies than the %d below it", info.PathLen, below)
	}
	if l := info.Policy.Language; !l.Equal(oidInheritAll) && !l.Equal(oidLimited) {
		return fmt.Errorf("policy language %v (want inheritAll or limited)", l)
	}
	if now.Before(p.NotBefore) || now.After(p.NotAfter) {
		return fmt.Errorf("outside its validity %s to %s", p.NotBefore.UTC().Format(time.RFC3339), p.NotAfter.UTC().Format(time.RFC3339))
	}
	if p.BasicConstraintsValid && p.IsCA {
		return errors.New("proxy is a CA")
	}
	if p.KeyUsage&x509.KeyUsageCertSign != 0 {
		return errors.New("proxy may sign certificates")
	}
	if signer.KeyUsage != 0 && signer.KeyUsage&x509.KeyUsageDigitalSignature == 0 {
		return errors.New("signer lacks digitalSignature key usage")
	}
	if !bytes.Equal(p.RawIssuer, signer.RawSubject) {
		return errors.New("issuer is not the signer's subject")
	}
	if err := subjectExtends(p.RawSubject, signer.RawSubject); err != nil {
		return err
	}
	// CheckSignature, not CheckSignatureFrom: the signer is an end entity
	// (or a proxy), which CheckSignatureFrom refuses as not a CA.
	if err := signer.CheckSignature(p.SignatureAlgorithm, p.RawTBSCertificate, p.Signature); err != nil {
		return fmt.Errorf("not signed by the certificate after it: %v", err)
	}
	return nil
}

// subjectExtends checks that the DER name sub is the DER name issuer with
// one more RDN, a single CN (RFC 3820 §3.4).
func subjectExtends(sub, issuer []byte) error {
	var s, is []asn1.RawValue
	if rest, err := asn1.Unmarshal(sub, &s); err != nil || len(rest) != 0 {
		return errors.New("malformed subject")
	}
	if rest, err := asn1.Unmarshal(issuer, &is); err != nil || len(rest) != 0 {
		return errors.New("malformed issuer subject")
	}
	if len(s) != len(is)+1 {
		return errors.New("subject is not the issuer's subject plus one CN")
	}
	for i := range is {
		if !bytes.Equal(s[i].FullBytes, is[i].FullBytes) {
			return errors.New("subject does not start with the issuer's subject")
		}
	}
	var last pkix.RelativeDistinguishedNameSET
	if rest, err := asn1.Unmarshal(s[len(s)-1].FullBytes, &last); err != nil || len(rest) != 0 {
		return errors.New("malformed last RDN")
	}
	if len(last) != 1 || !last[0].Type.Equal(oidCN) {
		return errors.New("last RDN of subject is not a single CN")
	}
	return nil
}

// shortNames are the attribute names of OpenSSL's one-line DN form, which
// grid authorisation files (grid-mapfile, XRootD authdb, Dynafed) use.
var shortNames = map[string]string{
	"2.5.4.3":                    "CN",
	"2.5.4.4":                    "SN",
	"2.5.4.5":                    "serialNumber",
	"2.5.4.6":                    "C",
	"2.5.4.7":                    "L",
	"2.5.4.8":                    "ST",
	"2.5.4.10":                   "O",
	"2.5.4.11":                   "OU",
	"2.5.4.12":                   "title",
	"2.5.4.42":                   "GN",
	"0.9.2342.19200300.100.1.1":  "UID",
	"0.9.2342.19200300.100.1.25": "DC",
	"1.2.840.113549.1.9.1":       "emailAddress",
}

// slashDN formats a DER name as OpenSSL's X509_NAME_oneline does:
// "/DC=ch/DC=cern/OU=Users/CN=Jane Doe", in certificate order, with "+"
// between the attributes of a multi-valued RDN.
func slashDN(der []byte) (string, error) {
	var rdns pkix.RDNSequence
	if rest, err := asn1.Unmarshal(der, &rdns); err != nil || len(rest) != 0 {
		return "", errors.New("malformed name")
	}
	var b strings.Builder
	for _, rdn := range rdns {
		for i, atv := range rdn {
			if i == 0 {
				b.WriteByte('/')
			} else {
				b.WriteByte('+')
			}
			name, ok := shortNames[atv.Type.String()]
			if !ok {
				name = atv.Type.String()
			}
			b.WriteString(name)
			b.WriteByte('=')
			fmt.Fprint(&b, atv.Value)
		}
	}
	return b.String(), nil
}

// certCache remembers the verdict on a connection's chain. TLS gives
// every request of one connection the same *x509.Certificate, so the
// leaf's pointer is the key, and the chain is verified once per
// connection, not once per request.
type certCache struct {
	mu  sync.Mutex
	m   map[*x509.Certificate]certVerdict // guarded by mu
	max int
	gen atomic.Uint64 // bumped when the CAs are reloaded
}

type certVerdict struct {
	id    *Identity
	err   error
	until time.Time
	gen   uint64
}

func newCertCache(max int) *certCache {
	return &certCache{m: make(map[*x509.Certificate]certVerdict), max: max}
}

// certIdentity returns the identity of a client's verified chain.
func (a *Authorizer) certIdentity(chain []*x509.Certificate) (*Identity, error) {
	now := a.now()
	leaf := chain[0]
	c := a.certs
	gen := c.gen.Load()
	c.mu.Lock()
	v, ok := c.m[leaf]
	c.mu.Unlock()
	if ok && v.gen == gen && now.Before(v.until) {
		return v.id, v.err
	}
	dn, proxies, expires, err := VerifyChain(chain, a.trustPool(), now)
	v = certVerdict{gen: gen, until: expires, err: err}
	if err == nil {
		id := &Identity{Kind: X509, Name: dn, Proxy: proxies > 0, Expires: expires}
		var change time.Time
		id.VOs, id.FQANs, change = a.vomsAttributes(chain, proxies, dn, now)
		if !change.IsZero() && change.Before(v.until) {
			// An AC that expires (or starts) before the chain does
			// changes the identity: verify again then.
			v.until = change
		}
		v.id = id
	} else {
		// A refusal is remembered briefly: the client's next request on
		// the connection need not pay for the check again.
		v.until = now.Add(time.Minute)
	}
	c.mu.Lock()
	if len(c.m) >= c.max {
		for k := range c.m {
			delete(c.m, k)
			if len(c.m) < c.max*3/4 {
				break
			}
		}
	}
	c.m[leaf] = v
	c.mu.Unlock()
	return v.id, v.err
}

// CertIdentity returns the identity of a client's certificate chain
// (leaf first, as TLS sends it), checked as Middleware checks an HTTPS
// client's: VerifyChain, then the VOMS attributes of a proxy. Without
// trusted CAs, certificates are not used and the caller is anonymous.
// Its errors wrap ErrInvalidCert.
func (a *Authorizer) CertIdentity(chain []*x509.Certificate) (Identity, error) {
	if a.trust == nil || len(chain) == 0 {
		return Identity{}, nil
	}
	id, err := a.certIdentity(chain)
	if err != nil {
		return Identity{}, err
	}
	return *id, nil
}

func (a *Authorizer) trustPool() *x509.CertPool {
	a.trustMu.RLock()
	defer a.trustMu.RUnlock()
	return a.trust.pool
}

// Reload reads the CA file and directory again (new IGTF release, a CA
// added or withdrawn); chains already verified are verified again on
// their next request. The server calls it on SIGHUP with
// Reloader.Reload. On error the old CAs stay.
func (a *Authorizer) Reload() error {
	if a.trust == nil {
		return nil
	}
	pool, n, err := LoadCAs(a.caFile, a.caDir)
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("%w: no CA certificates in %q / %q", ErrConfig, a.caFile, a.caDir)
	}
	a.trustMu.Lock()
	a.trust.pool = pool
	a.trustMu.Unlock()
	a.certs.gen.Add(1)
	return nil
}
