package auth

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"os"
	"slices"
	"testing"
)

// recordedVOMS is a VOMS proxy voms-proxy-fake made (testdata/voms:
// the proxy and user certificates, the CAs, the vomsdir), for tests that
// must run without the tool: the proxy's VOMS extension, the user's
// certificate (the AC's holder), the trust and a time within the AC's
// validity.
func recordedVOMS(t testing.TB) (ext []byte, check VOMSCheck) {
	t.Helper()
	b, err := os.ReadFile("testdata/voms/chain.pem")
	if err != nil {
		t.Fatal(err)
	}
	var chain []*x509.Certificate
	for blk, rest := pem.Decode(b); blk != nil; blk, rest = pem.Decode(rest) {
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		chain = append(chain, c)
	}
	for _, e := range chain[0].Extensions {
		if e.Id.Equal(oidVOMSACs) {
			ext = e.Value
		}
	}
	roots, _, err := LoadCAs("testdata/voms/ca.pem", "")
	if err != nil || ext == nil {
		t.Fatalf("testdata/voms: %v, VOMS extension found: %v", err, ext != nil)
	}
	acs, err := ParseVOMSACs(ext)
	if err != nil {
		t.Fatal(err)
	}
	return ext, VOMSCheck{Holder: chain[1], Roots: roots, VOMSDir: "testdata/voms/vomsdir", Now: acs[0].NotBefore.Add(acs[0].NotAfter.Sub(acs[0].NotBefore) / 2)}
}

// TestVOMSRecorded: the recorded AC verifies within its validity and
// gives its FQAN; a minute after its end it does not.
func TestVOMSRecorded(t *testing.T) {
	ext, check := recordedVOMS(t)
	acs, err := ParseVOMSACs(ext)
	if err != nil || len(acs) != 1 {
		t.Fatalf("ParseVOMSACs: %d ACs, %v", len(acs), err)
	}
	if acs[0].VO != "cms" || acs[0].Host != "voms.example.org" {
		t.Errorf("VO %q host %q, want cms and voms.example.org", acs[0].VO, acs[0].Host)
	}
	got, err := VerifyVOMS(acs[0], check)
	if err != nil || !slices.Equal(got, []string{"/cms/Role=production"}) {
		t.Fatalf("VerifyVOMS = %q, %v", got, err)
	}
	check.Now = acs[0].NotAfter.Add(61e9)
	if _, err := VerifyVOMS(acs[0], check); err == nil {
		t.Errorf("VerifyVOMS after the AC's end: no error")
	}
}

// FuzzVOMSAC throws mutated VOMS extensions at the parser and the
// verifier, with the trust of the recorded proxy: nothing may panic, and
// only the recorded extension itself may verify (any change of the
// signed bytes or the signature breaks the signature; a change of the
// certificates extension breaks the chain or the .lsc match).
func FuzzVOMSAC(f *testing.F) {
	ext, check := recordedVOMS(f)
	f.Add(ext)
	f.Add(ext[:len(ext)/2])
	f.Add([]byte{0x30, 0x03, 0x30, 0x01, 0x30})
	f.Fuzz(func(t *testing.T, b []byte) {
		acs, err := ParseVOMSACs(b)
		if err != nil {
			return
		}
		if len(acs) > maxACs {
			t.Fatalf("%d ACs parsed, bound %d", len(acs), maxACs)
		}
		for _, ac := range acs {
			fq, err := VerifyVOMS(ac, check)
			if err != nil {
				continue
			}
			if !bytes.Equal(b, ext) && !sameSigned(b, ext) {
				t.Fatalf("a changed extension verified: FQANs %q", fq)
			}
		}
	})
}

// sameSigned reports whether the extension b carries the recorded AC
// unchanged (its bytes appear whole in b): a wrapper may differ, the
// signed AC may not.
func sameSigned(b, ext []byte) bool {
	acs, err := ParseVOMSACs(ext)
	if err != nil {
		return false
	}
	return bytes.Contains(b, acs[0].info) && bytes.Contains(b, acs[0].signature)
}
