package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// StartXRootDTPC is StartXRootDChecksum with XrdHttp's third-party-copy
// handler loaded ("http.exthandler xrdtpc libXrdHttpTPC.so"), so the
// server answers WLCG HTTP-TPC COPY requests (pull with Source, push with
// Destination) on its plain http:// URL.
//
// XrdHttp loads external handlers only once HTTPS is configured (XRootD
// 5.5, XrdHttpProtocol::Config returns before LoadExtHandler without a
// certificate), so the server gets a test certificate (NewTLS) through
// xrd.tls and xrd.tlsca. Its port then speaks both http and https; the
// tests use http, where no CA needs trusting on either side. When the
// TPC library is not installed (package xrootd-plugins on Debian) the
// test ends through Missing.
func StartXRootDTPC(t testing.TB) *Server {
	t.Helper()
	Require(t, "xrootd")
	if !haveXRootDTPC() {
		Missing(t, "libXrdHttpTPC-5.so not found (install xrootd-plugins)")
	}
	tl := NewTLS(t)
	dir := filepath.Dir(tl.CertFile)
	// XRootD runs as XRootDUser under root and reads these itself; it
	// refuses a private key others may read.
	if err := os.Chmod(tl.KeyFile, 0o600); err != nil {
		t.Fatal(err)
	}
	ChownToXRootD(t, dir)
	_ = os.Chmod(dir, 0o755)
	_ = os.Chmod(filepath.Dir(dir), 0o755)
	return StartXRootDWith(t, fmt.Sprintf(`xrootd.chksum adler32
http.exthandler xrdtpc libXrdHttpTPC.so
xrd.tls %s %s
xrd.tlsca certfile %s
`, tl.CertFile, tl.KeyFile, tl.CAFile))
}

// haveXRootDTPC reports whether XrdHttp's TPC plugin is installed where
// the dynamic loader looks.
func haveXRootDTPC() bool {
	for _, pat := range []string{
		"/usr/lib/*/libXrdHttpTPC-5.so",
		"/usr/lib64/libXrdHttpTPC-5.so",
		"/usr/lib/libXrdHttpTPC-5.so",
		"/usr/local/lib/libXrdHttpTPC-5.so",
	} {
		if m, _ := filepath.Glob(pat); len(m) > 0 {
			return true
		}
	}
	return false
}
