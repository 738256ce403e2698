package auth

import (
	"bufio"
	"bytes"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// VOMS attribute certificates (RFC 5755 ACs as VOMS issues them, carried
// in a proxy certificate's extension) are parsed and verified here with
// encoding/asn1 and crypto/x509. No maintained Go library verifies a VOMS
// AC's signature and its server's chain: the one Go parser found,
// gitlab.cern.ch/fts/go-proxy (github.com/ayllon/go-proxy), by its own
// README checks neither, and attributes taken from an unchecked AC are
// attributes anyone can claim. The checks follow VOMS's own verifier
// (voms/src/ac/validate.cc and vomsdir's .lsc files).

// VOMS object identifiers (VOMS AC format, "VOMS Attribute Certificate
// Format", OGF GFD.182).
var (
	// oidVOMSACs is the proxy certificate extension carrying the ACs:
	// SEQUENCE OF SEQUENCE OF AttributeCertificate.
	oidVOMSACs = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 8005, 100, 100, 5}
	// oidVOMSFQANs is the AC attribute holding the FQANs, an
	// IetfAttrSyntax whose policyAuthority is "VO://host:port".
	oidVOMSFQANs = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 8005, 100, 100, 4}
	// oidVOMSCerts is the AC extension carrying the VOMS server's
	// certificate (and possibly its chain): SEQUENCE OF Certificate.
	oidVOMSCerts = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 8005, 100, 100, 10}
	// oidVOMSTags is VOMS's generic attributes extension (voms -ga):
	// informational, never used for a decision here.
	oidVOMSTags = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 8005, 100, 100, 11}
	// oidNoRevAvail is id-ce-noRevAvail (RFC 5755 §4.3.6).
	oidNoRevAvail = asn1.ObjectIdentifier{2, 5, 29, 56}
	// oidAuthorityKeyID is id-ce-authorityKeyIdentifier (RFC 5755 §4.3.3).
	oidAuthorityKeyID = asn1.ObjectIdentifier{2, 5, 29, 35}
)

// DefaultVOMSDir is where the .lsc files naming each VO's VOMS servers
// live when Config.VOMSDir is empty (the grid-security layout).
const DefaultVOMSDir = "/etc/grid-security/vomsdir"

// Bounds on what a proxy may carry: real proxies hold one or two ACs of
// a handful of FQANs each.
const (
	maxACs   = 16
	maxFQANs = 64
)

// attributeCertificate is RFC 5755 §4.1's AttributeCertificate.
type attributeCertificate struct {
	Info      asn1.RawValue // the DER of AttributeCertificateInfo, as signed
	SigAlg    pkix.AlgorithmIdentifier
	Signature asn1.BitString
}

// acInfo is RFC 5755 §4.1's AttributeCertificateInfo.
type acInfo struct {
	Version    int
	Holder     acHolder
	Issuer     asn1.RawValue // AttCertIssuer: v2Form is [0] V2Form
	SigAlg     pkix.AlgorithmIdentifier
	Serial     *big.Int
	Validity   acValidity
	Attributes []acAttribute
	IssuerUID  asn1.BitString   `asn1:"optional"`
	Extensions []pkix.Extension `asn1:"optional"`
}

// acHolder is RFC 5755 §4.2.2's Holder; VOMS names the holder by
// baseCertificateID.
type acHolder struct {
	BaseCertificateID issuerSerial  `asn1:"optional,tag:0"`
	EntityName        asn1.RawValue `asn1:"optional,tag:1"`
	ObjectDigestInfo  asn1.RawValue `asn1:"optional,tag:2"`
}

// issuerSerial is RFC 5755's IssuerSerial.
type issuerSerial struct {
	Issuer asn1.RawValue // GeneralNames
	Serial *big.Int
	UID    asn1.BitString `asn1:"optional"`
}

type acValidity struct {
	NotBefore time.Time `asn1:"generalized"`
	NotAfter  time.Time `asn1:"generalized"`
}

type acAttribute struct {
	Type   asn1.ObjectIdentifier
	Values []asn1.RawValue `asn1:"set"`
}

// ietfAttrSyntax is RFC 5755 §4.4's IetfAttrSyntax.
type ietfAttrSyntax struct {
	PolicyAuthority asn1.RawValue `asn1:"optional,tag:0"` // GeneralNames
	Values          []asn1.RawValue
}

// VOMSAC is one parsed VOMS attribute certificate, not yet verified.
type VOMSAC struct {
	// VO is the virtual organisation, from the FQAN attribute's
	// policyAuthority "VO://host:port".
	VO string
	// Host is the VOMS server's host name from the same URI; with VO it
	// names the .lsc file (vomsdir/VO/Host.lsc).
	Host string
	// FQANs are the attributes in the order the AC lists them, as
	// written ("/cms/Role=production/Capability=NULL").
	FQANs []string
	// NotBefore and NotAfter bound the AC's validity.
	NotBefore, NotAfter time.Time

	info, signature []byte
	sigAlg          x509.SignatureAlgorithm
	issuer          []byte // DER name of the AC's issuer (the VOMS server)
	holderIssuer    []byte // DER name of the holder's baseCertificateID
	holderSerial    *big.Int
	certs           []*x509.Certificate // from the certs extension
	targets         bool                // restricted to target hosts
}

// ParseVOMSACs parses the value of a proxy certificate's VOMS extension
// (1.3.6.1.4.1.8005.100.100.5): every AC in it. Parsing checks the form
// only; VerifyVOMS checks what they are worth. An AC that does not parse
// makes the whole extension an error: what the issuer meant cannot be
// known.
func ParseVOMSACs(der []byte) ([]*VOMSAC, error) {
	var seqs []asn1.RawValue
	if rest, err := asn1.Unmarshal(der, &seqs); err != nil || len(rest) != 0 {
		return nil, errors.New("malformed VOMS extension")
	}
	var out []*VOMSAC
	for _, s := range seqs {
		var acs []asn1.RawValue
		if rest, err := asn1.Unmarshal(s.FullBytes, &acs); err != nil || len(rest) != 0 {
			return nil, errors.New("malformed VOMS AC sequence")
		}
		for _, raw := range acs {
			if len(out) == maxACs {
				return nil, fmt.Errorf("more than %d VOMS ACs", maxACs)
			}
			ac, err := parseAC(raw.FullBytes)
			if err != nil {
				return nil, err
			}
			out = append(out, ac)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("VOMS extension holds no AC")
	}
	return out, nil
}

func parseAC(der []byte) (*VOMSAC, error) {
	var ac attributeCertificate
	if rest, err := asn1.Unmarshal(der, &ac); err != nil || len(rest) != 0 {
		return nil, errors.New("malformed attribute certificate")
	}
	var info acInfo
	if rest, err := asn1.Unmarshal(ac.Info.FullBytes, &info); err != nil || len(rest) != 0 {
		return nil, errors.New("malformed attribute certificate info")
	}
	if info.Version != 1 {
		return nil, fmt.Errorf("attribute certificate version %d (want v2)", info.Version+1)
	}
	if !info.SigAlg.Algorithm.Equal(ac.SigAlg.Algorithm) {
		return nil, errors.New("inner and outer signature algorithms differ")
	}
	out := &VOMSAC{
		NotBefore: info.Validity.NotBefore, NotAfter: info.Validity.NotAfter,
		info: ac.Info.FullBytes, signature: ac.Signature.RightAlign(),
		sigAlg: sigAlgOf(ac.SigAlg), holderSerial: info.Holder.BaseCertificateID.Serial,
	}
	if out.holderSerial == nil {
		return nil, errors.New("holder without baseCertificateID")
	}
	var err error
	if out.holderIssuer, err = oneDirName(info.Holder.BaseCertificateID.Issuer.FullBytes); err != nil {
		return nil, fmt.Errorf("holder issuer: %v", err)
	}
	// AttCertIssuer v2Form ([0] V2Form, RFC 5755 §4.2.3 "MUST use"):
	// its issuerName is the VOMS server's DN.
	iss := info.Issuer
	if iss.Class != asn1.ClassContextSpecific || iss.Tag != 0 || !iss.IsCompound {
		return nil, errors.New("issuer is not a v2Form")
	}
	var names asn1.RawValue
	if _, err := asn1.Unmarshal(iss.Bytes, &names); err != nil {
		return nil, errors.New("malformed issuer")
	}
	if out.issuer, err = oneDirName(names.FullBytes); err != nil {
		return nil, fmt.Errorf("issuer: %v", err)
	}
	for _, at := range info.Attributes {
		if !at.Type.Equal(oidVOMSFQANs) {
			continue
		}
		if out.FQANs != nil || len(at.Values) != 1 {
			return nil, errors.New("FQAN attribute given twice")
		}
		if err := out.parseFQANs(at.Values[0].FullBytes); err != nil {
			return nil, err
		}
	}
	if out.FQANs == nil {
		return nil, errors.New("no FQAN attribute")
	}
	for _, e := range info.Extensions {
		switch {
		case e.Id.Equal(oidVOMSCerts):
			if out.certs != nil {
				return nil, errors.New("certificates extension given twice")
			}
			if out.certs, err = parseCertSeq(e.Value); err != nil {
				return nil, err
			}
		case e.Id.Equal(oidTargetInformation):
			out.targets = true
		case e.Id.Equal(oidNoRevAvail), e.Id.Equal(oidAuthorityKeyID), e.Id.Equal(oidVOMSTags):
		default:
			if e.Critical {
				return nil, fmt.Errorf("unknown critical extension %v", e.Id)
			}
		}
	}
	return out, nil
}

// oidTargetInformation is id-ce-targetInformation (RFC 5755 §4.3.2): an
// AC meant only for the servers it names (voms-proxy-init -target).
var oidTargetInformation = asn1.ObjectIdentifier{2, 5, 29, 55}

// parseFQANs reads the IetfAttrSyntax of the FQAN attribute.
func (ac *VOMSAC) parseFQANs(der []byte) error {
	var ias ietfAttrSyntax
	if rest, err := asn1.Unmarshal(der, &ias); err != nil || len(rest) != 0 {
		return errors.New("malformed FQAN attribute")
	}
	// policyAuthority: [0] GeneralNames holding one URI, "VO://host:port".
	var uri asn1.RawValue
	if _, err := asn1.Unmarshal(ias.PolicyAuthority.Bytes, &uri); err != nil || uri.Class != asn1.ClassContextSpecific || uri.Tag != 6 {
		return errors.New("FQAN attribute without a policy authority URI")
	}
	u, err := url.Parse(string(uri.Bytes))
	if err != nil || u.Scheme == "" || u.Hostname() == "" {
		return fmt.Errorf("policy authority %q is not VO://host:port", uri.Bytes)
	}
	// url.Parse lower-cases the scheme; the VO is the name as written.
	ac.VO = string(uri.Bytes[:len(u.Scheme)])
	ac.Host = u.Hostname()
	if len(ias.Values) > maxFQANs {
		return fmt.Errorf("more than %d FQANs", maxFQANs)
	}
	ac.FQANs = make([]string, 0, len(ias.Values))
	for _, v := range ias.Values {
		// IetfAttrSyntax values: octets (VOMS's choice) or a UTF8String.
		if v.Class != asn1.ClassUniversal || v.Tag != asn1.TagOctetString && v.Tag != asn1.TagUTF8String {
			return errors.New("FQAN that is not a string")
		}
		ac.FQANs = append(ac.FQANs, string(v.Bytes))
	}
	return nil
}

// oneDirName returns the DER name of GeneralNames holding exactly one
// directoryName ([4], explicit since Name is a CHOICE).
func oneDirName(der []byte) ([]byte, error) {
	var gns []asn1.RawValue
	if rest, err := asn1.Unmarshal(der, &gns); err != nil || len(rest) != 0 {
		return nil, errors.New("malformed general names")
	}
	if len(gns) != 1 || gns[0].Class != asn1.ClassContextSpecific || gns[0].Tag != 4 || !gns[0].IsCompound {
		return nil, errors.New("not a single directory name")
	}
	var name asn1.RawValue
	if rest, err := asn1.Unmarshal(gns[0].Bytes, &name); err != nil || len(rest) != 0 {
		return nil, errors.New("malformed directory name")
	}
	return name.FullBytes, nil
}

// parseCertSeq reads the certificates extension, VOMS's AC_CERTS:
// SEQUENCE { SEQUENCE OF Certificate }, the server's certificate first.
func parseCertSeq(der []byte) ([]*x509.Certificate, error) {
	var seq struct{ Certs []asn1.RawValue }
	if rest, err := asn1.Unmarshal(der, &seq); err != nil || len(rest) != 0 || len(seq.Certs) == 0 || len(seq.Certs) > maxChain {
		return nil, errors.New("malformed certificates extension")
	}
	out := make([]*x509.Certificate, 0, len(seq.Certs))
	for _, r := range seq.Certs {
		c, err := x509.ParseCertificate(r.FullBytes)
		if err != nil {
			return nil, fmt.Errorf("certificates extension: %v", err)
		}
		out = append(out, c)
	}
	return out, nil
}

// sigAlgs maps signature algorithm OIDs to crypto/x509's names, which
// it does not export. RSA-PSS is absent: VOMS servers sign with the
// algorithm of their own certificate, PKCS #1 v1.5 or ECDSA in practice.
var sigAlgs = []struct {
	oid asn1.ObjectIdentifier
	alg x509.SignatureAlgorithm
}{
	{asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 5}, x509.SHA1WithRSA},
	{asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 11}, x509.SHA256WithRSA},
	{asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 12}, x509.SHA384WithRSA},
	{asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 13}, x509.SHA512WithRSA},
	{asn1.ObjectIdentifier{1, 2, 840, 10045, 4, 1}, x509.ECDSAWithSHA1},
	{asn1.ObjectIdentifier{1, 2, 840, 10045, 4, 3, 2}, x509.ECDSAWithSHA256},
	{asn1.ObjectIdentifier{1, 2, 840, 10045, 4, 3, 3}, x509.ECDSAWithSHA384},
	{asn1.ObjectIdentifier{1, 2, 840, 10045, 4, 3, 4}, x509.ECDSAWithSHA512},
	{asn1.ObjectIdentifier{1, 3, 101, 112}, x509.PureEd25519},
}

func sigAlgOf(ai pkix.AlgorithmIdentifier) x509.SignatureAlgorithm {
	for _, s := range sigAlgs {
		if s.oid.Equal(ai.Algorithm) {
			return s.alg
		}
	}
	return x509.UnknownSignatureAlgorithm
}

// VOMSCheck is what VerifyVOMS checks an AC against.
type VOMSCheck struct {
	// Holder is the end-entity certificate of the proxy chain the AC
	// came in: the AC must name it (baseCertificateID: its serial, and
	// its issuer's DN or, as VOMS servers write it, its own).
	Holder *x509.Certificate
	// Roots are the trusted CAs the VOMS server's certificate must
	// chain to.
	Roots *x509.CertPool
	// VOMSDir is the grid-security vomsdir: VO/host.lsc lists the DN of
	// the VOMS server of VO on host, then its CA's DN (then that CA's
	// issuer's, and so on), and may hold several such chains separated
	// by a line of dashes ("------ NEXT CHAIN ------").
	VOMSDir string
	// Now is the time the AC must be valid at.
	Now time.Time
}

// VerifyVOMS checks ac and returns its FQANs normalised (NormalizeFQAN):
// the VO and host name a .lsc file in VOMSDir; the AC carries its
// server's certificate, whose chain (the AC's certificates, then Roots)
// verifies and whose DNs, leaf first, are one of the .lsc file's chains;
// the AC's issuer is that certificate's subject and its signature
// verifies with that certificate's key; the AC names Holder; Now is
// within the AC's validity; it is not restricted to targets (which
// lakefed cannot judge); and every FQAN lies in the AC's VO. The error
// says which check failed.
func VerifyVOMS(ac *VOMSAC, c VOMSCheck) ([]string, error) {
	if !safeName(ac.VO) || !safeName(ac.Host) {
		return nil, fmt.Errorf("VO %q or host %q is not a plain name", ac.VO, ac.Host)
	}
	if c.Now.Before(ac.NotBefore) || c.Now.After(ac.NotAfter) {
		return nil, fmt.Errorf("outside its validity %s to %s", ac.NotBefore.UTC().Format(time.RFC3339), ac.NotAfter.UTC().Format(time.RFC3339))
	}
	if ac.targets {
		return nil, errors.New("restricted to target hosts")
	}
	if ac.holderSerial.Cmp(c.Holder.SerialNumber) != 0 ||
		!bytes.Equal(ac.holderIssuer, c.Holder.RawIssuer) && !bytes.Equal(ac.holderIssuer, c.Holder.RawSubject) {
		return nil, errors.New("holder is not the proxy's end-entity certificate")
	}
	fqans := make([]string, 0, len(ac.FQANs))
	for _, f := range ac.FQANs {
		n, err := NormalizeFQAN(f)
		if err != nil {
			return nil, err
		}
		if g, _ := splitFQAN(n); g != "/"+ac.VO && !strings.HasPrefix(g, "/"+ac.VO+"/") {
			return nil, fmt.Errorf("FQAN %q is outside VO %q", f, ac.VO)
		}
		fqans = append(fqans, n)
	}
	chains, err := readLSC(filepath.Join(c.VOMSDir, ac.VO, ac.Host+".lsc"))
	if err != nil {
		return nil, err
	}
	if len(ac.certs) == 0 {
		return nil, errors.New("carries no VOMS server certificate")
	}
	server := ac.certs[0]
	if c.Roots == nil {
		return nil, errors.New("no trusted CAs to check the VOMS server against")
	}
	inter := x509.NewCertPool()
	for _, ic := range ac.certs[1:] {
		inter.AddCert(ic)
	}
	verified, err := server.Verify(x509.VerifyOptions{Roots: c.Roots, Intermediates: inter, CurrentTime: c.Now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	if err != nil {
		return nil, fmt.Errorf("VOMS server certificate: %v", err)
	}
	if !slices.ContainsFunc(verified, func(ch []*x509.Certificate) bool { return lscMatch(chains, ch) }) {
		dn, _ := slashDN(server.RawSubject)
		return nil, fmt.Errorf("VOMS server %q and its CA are not what %s/%s.lsc names", dn, ac.VO, ac.Host)
	}
	if !bytes.Equal(ac.issuer, server.RawSubject) {
		return nil, errors.New("issuer is not the VOMS server certificate's subject")
	}
	if ac.sigAlg == x509.UnknownSignatureAlgorithm {
		return nil, errors.New("unknown signature algorithm")
	}
	// CheckSignature, not CheckSignatureFrom: the signer is a server
	// certificate, not a CA. It accepts SHA-1, which VOMS servers of
	// the 2010s still sign with.
	if err := server.CheckSignature(ac.sigAlg, ac.info, ac.signature); err != nil {
		return nil, fmt.Errorf("signature: %v", err)
	}
	return fqans, nil
}

// safeName reports whether s may name a directory or file of vomsdir.
func safeName(s string) bool {
	if s == "" || s == "." || s == ".." || len(s) > 255 {
		return false
	}
	for _, r := range s {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '.' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// maxLSC bounds a .lsc file: a few DNs.
const maxLSC = 64 << 10

// readLSC reads a .lsc file: chains of DNs, leaf first, separated by
// lines starting with "-"; blank lines and "#" comments are skipped.
func readLSC(path string) ([][]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("no .lsc file: %v", err)
	}
	defer f.Close()
	var chains [][]string
	var cur []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 4096), maxLSC)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		switch {
		case l == "" || strings.HasPrefix(l, "#"):
		case strings.HasPrefix(l, "-"):
			if cur != nil {
				chains, cur = append(chains, cur), nil
			}
		default:
			cur = append(cur, l)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf(".lsc file: %v", err)
	}
	if cur != nil {
		chains = append(chains, cur)
	}
	for _, ch := range chains {
		if len(ch) < 2 {
			return nil, fmt.Errorf(".lsc file %s: a chain names %d DN, want the server's and its CA's", path, len(ch))
		}
	}
	if len(chains) == 0 {
		return nil, fmt.Errorf(".lsc file %s names no DN", path)
	}
	return chains, nil
}

// lscMatch reports whether one of the .lsc chains is the verified chain
// ch, DN by DN from the server's certificate up, as far as it goes.
func lscMatch(chains [][]string, ch []*x509.Certificate) bool {
	for _, want := range chains {
		if len(want) > len(ch) {
			continue
		}
		ok := true
		for i, dn := range want {
			got, err := slashDN(ch[i].RawSubject)
			if err != nil || got != dn {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// NormalizeFQAN checks an FQAN ("/cms/uscms/Role=production/Capability=NULL")
// and returns it without its null parts: "/Capability=NULL" and
// "/Role=NULL" say no capability and no role (the VOMS FQAN syntax), so
// "/cms/Role=NULL/Capability=NULL" is "/cms".
func NormalizeFQAN(f string) (string, error) {
	if len(f) < 2 || f[0] != '/' || len(f) > 1024 {
		return "", fmt.Errorf("FQAN %q does not start with /", f)
	}
	for _, r := range f {
		if r < 0x20 || r == 0x7f {
			return "", fmt.Errorf("FQAN %q has a control character", f)
		}
	}
	parts := strings.Split(f[1:], "/")
	out := make([]string, 0, len(parts))
	role := false
	for _, p := range parts {
		switch {
		case p == "" || p == "." || p == "..":
			return "", fmt.Errorf("FQAN %q has an empty or dot part", f)
		case p == "Role=NULL" || p == "Capability=NULL":
			role = true
		case strings.HasPrefix(p, "Role="):
			if role {
				return "", fmt.Errorf("FQAN %q has two roles", f)
			}
			role = true
			out = append(out, p)
		case strings.HasPrefix(p, "Capability="):
			out = append(out, p)
		case strings.Contains(p, "="):
			return "", fmt.Errorf("FQAN %q: unknown attribute %q", f, p)
		default:
			if role {
				return "", fmt.Errorf("FQAN %q has a group after its role", f)
			}
			out = append(out, p)
		}
	}
	if len(out) == 0 || strings.Contains(out[0], "=") {
		return "", fmt.Errorf("FQAN %q has no group", f)
	}
	return "/" + strings.Join(out, "/"), nil
}

// splitFQAN splits a normalised FQAN into its group and its role ("" for
// none): "/cms/Role=production" is "/cms" and "production".
func splitFQAN(f string) (group, role string) {
	if i := strings.Index(f, "/Role="); i >= 0 {
		role = f[i+len("/Role="):]
		role, _, _ = strings.Cut(role, "/")
		return f[:i], role
	}
	if i := strings.Index(f, "/Capability="); i >= 0 {
		return f[:i], ""
	}
	return f, ""
}

// vomsAttributes returns the VOs and FQANs proven by the VOMS ACs of a
// verified chain with proxies proxies in front of its end entity: those
// of the proxy nearest the leaf that carries the VOMS extension (a proxy
// delegated from a VOMS proxy carries its issuer's ACs on; one that got
// its own carries those). Every AC is verified alone (VerifyVOMS); one
// that fails any check is ignored entirely and logged with the reason.
// until is when the answer may change: the first AC validity bound still
// ahead (zero for never).
func (a *Authorizer) vomsAttributes(chain []*x509.Certificate, proxies int, dn string, now time.Time) (vos, fqans []string, until time.Time) {
	var ext []byte
	for _, c := range chain[:proxies] {
		for _, e := range c.Extensions {
			if e.Id.Equal(oidVOMSACs) {
				ext = e.Value
				break
			}
		}
		if ext != nil {
			break
		}
	}
	if ext == nil {
		return nil, nil, time.Time{}
	}
	acs, err := ParseVOMSACs(ext)
	if err != nil {
		a.log.Warn("voms attributes ignored", "identity", dn, "reason", err.Error())
		return nil, nil, time.Time{}
	}
	check := VOMSCheck{Holder: chain[proxies], Roots: a.trustPool(), VOMSDir: a.vomsDir, Now: now}
	soonest := func(t time.Time) {
		if t.After(now) && (until.IsZero() || t.Before(until)) {
			until = t
		}
	}
	for _, ac := range acs {
		soonest(ac.NotBefore)
		f, err := VerifyVOMS(ac, check)
		if err != nil {
			a.log.Warn("voms attribute certificate ignored", "identity", dn, "vo", ac.VO, "host", ac.Host, "reason", err.Error())
			continue
		}
		soonest(ac.NotAfter)
		if !slices.Contains(vos, ac.VO) {
			vos = append(vos, ac.VO)
		}
		fqans = append(fqans, f...)
	}
	return vos, fqans, until
}
