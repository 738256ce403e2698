package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// StartXRootDChecksum is StartXRootD with the server configured to compute
// adler32 checksums ("xrootd.chksum adler32"), so kXR_query checksum and
// XrdHttp's Want-Digest answer. Without that directive xrootd refuses
// checksum queries.
func StartXRootDChecksum(t testing.TB) *Server {
	t.Helper()
	return StartXRootDWith(t, "xrootd.chksum adler32\n")
}

// StartXRootDWith is StartXRootD with extra lines appended to the server's
// configuration file.
func StartXRootDWith(t testing.TB, extra string) *Server {
	t.Helper()
	bin := Require(t, "xrootd")
	state := t.TempDir()
	data := filepath.Join(state, "data")
	for _, d := range []string{data, filepath.Join(state, "admin"), filepath.Join(state, "run")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	_ = os.Chmod(state, 0o755)
	_ = os.Chmod(filepath.Dir(state), 0o755)
	var s *Server
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		port, httpPort := FreePort(t), FreePort(t)
		conf := fmt.Sprintf(`all.export /
oss.localroot %[1]s
xrd.port %[2]d
all.adminpath %[3]s/admin
all.pidpath %[3]s/run
xrd.protocol XrdHttp:%[4]d libXrdHttp.so
http.listingdeny false
%[5]s`, data, port, state, httpPort, extra)
		cfg := filepath.Join(state, "xrootd.cfg")
		if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		args := []string{"-c", cfg, "-l", filepath.Join(state, "xrootd.log")}
		if os.Geteuid() == 0 {
			args = append([]string{"-R", XRootDUser}, args...)
			ChownToXRootD(t, state)
		}
		s = &Server{
			URL:     fmt.Sprintf("http://127.0.0.1:%d/", httpPort),
			RootURL: fmt.Sprintf("root://127.0.0.1:%d/", port),
			Dir:     data, Port: httpPort, state: state,
		}
		// Another package's server can take a port FreePort gave before
		// xrootd binds it: then try other ports.
		if err = tryStart(t, s, filepath.Join(state, "stdout.log"), []int{port, httpPort}, bin, args...); err == nil {
			return s
		}
		log, _ := os.ReadFile(filepath.Join(state, "xrootd.log"))
		err = fmt.Errorf("%w\nxrootd.log:\n%s", err, log)
	}
	t.Fatal(err)
	return s
}
