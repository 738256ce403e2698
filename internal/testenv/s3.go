package testenv

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// S3Server is a real S3 server a test started on 127.0.0.1, with one empty
// bucket and one set of credentials.
type S3Server struct {
	// URL is the server's base URL, "http://127.0.0.1:PORT" (no slash): the
	// s3.endpoint option of an s3:// endpoint.
	URL string
	// Bucket is the bucket StartS3 created.
	Bucket string
	// AccessKey and SecretKey are the only credentials the server takes.
	AccessKey, SecretKey string
	// Region is the region to sign for.
	Region string
	// Impl is "s3proxy" or "moto".
	Impl string
	// Dir is the bucket's directory when objects are plain files there
	// (s3proxy's filesystem backend); "" for moto.
	Dir string
	// Port is the server's port.
	Port int

	srv Server
}

// Stop kills the server and waits for it; later requests fail to connect.
// Safe to call twice; t.Cleanup calls it too.
func (s *S3Server) Stop() { s.srv.Stop() }

// Kill kills the server with SIGKILL, as a crash would.
func (s *S3Server) Kill() { s.srv.Kill() }

// Signal sends sig (SIGSTOP, SIGCONT) to the server.
func (s *S3Server) Signal(sig syscall.Signal) error { return s.srv.Signal(sig) }

// Restart starts the server again after Kill or Stop, on the same port
// with the same objects.
func (s *S3Server) Restart(t testing.TB) { s.srv.Restart(t) }

// S3ProxyInstall is the command that puts the s3proxy jar where StartS3
// looks for it.
const S3ProxyInstall = "mvn -B -q dependency:copy -Dartifact=org.gaul:s3proxy:2.6.0:jar:jar-with-dependencies -DoutputDirectory=$HOME/.cache/lakefed-s3proxy"

// S3ProxyJar returns the s3proxy executable jar: $LAKEFED_S3PROXY_JAR, or
// the newest s3proxy-*-jar-with-dependencies.jar in
// $XDG_CACHE_HOME/lakefed-s3proxy (default ~/.cache/lakefed-s3proxy), or ""
// when there is none.
func S3ProxyJar() string {
	if j := os.Getenv("LAKEFED_S3PROXY_JAR"); j != "" {
		return j
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	jars, _ := filepath.Glob(filepath.Join(cache, "lakefed-s3proxy", "s3proxy-*-jar-with-dependencies.jar"))
	if len(jars) == 0 {
		return ""
	}
	sort.Strings(jars)
	return jars[len(jars)-1]
}

// StartS3 starts a real S3 server on 127.0.0.1 with an empty bucket
// "lakefed-test" and credentials test/test-secret, and stops it on
// t.Cleanup. By default it is s3proxy (org.gaul:s3proxy from Maven Central,
// run with java) with its filesystem backend: it checks SigV4 signatures
// and the expiry of pre-signed URLs, and keeps objects as plain files in
// Dir. LAKEFED_S3_IMPL=moto starts moto's server instead (pip install
// 'moto[server]'), which does not check signatures.
//
// When java or the jar (or moto_server) is missing the test is skipped, or
// fails under LAKEFED_REQUIRE_INTEROP=1; S3ProxyInstall fetches the jar.
func StartS3(t testing.TB) *S3Server {
	t.Helper()
	return StartS3On(t, "127.0.0.1")
}

// StartS3On is StartS3 with the server listening on host (an address of
// this machine) instead of 127.0.0.1.
func StartS3On(t testing.TB, host string) *S3Server {
	t.Helper()
	impl := os.Getenv("LAKEFED_S3_IMPL")
	if impl == "" {
		impl = "s3proxy"
	}
	state := t.TempDir()
	port := FreePort(t)
	s := &S3Server{
		URL:    "http://" + net.JoinHostPort(host, strconv.Itoa(port)),
		Bucket: "lakefed-test", AccessKey: "test", SecretKey: "test-secret",
		Region: "us-east-1", Impl: impl, Port: port,
	}
	s.srv.state, s.srv.host, s.srv.Port = state, host, port
	log := filepath.Join(state, "server.log")
	switch impl {
	case "s3proxy":
		java := Require(t, "java")
		jar := S3ProxyJar()
		if jar == "" {
			Missing(t, "s3proxy jar not found (LAKEFED_S3PROXY_JAR or ~/.cache/lakefed-s3proxy); fetch it with: "+S3ProxyInstall)
		}
		data := filepath.Join(state, "data")
		s.Dir = filepath.Join(data, s.Bucket)
		if err := os.MkdirAll(s.Dir, 0o755); err != nil {
			t.Fatal(err)
		}
		props := fmt.Sprintf(`s3proxy.endpoint=%s
s3proxy.authorization=aws-v2-or-v4
s3proxy.identity=%s
s3proxy.credential=%s
jclouds.provider=filesystem
jclouds.filesystem.basedir=%s
`, s.URL, s.AccessKey, s.SecretKey, data)
		conf := filepath.Join(state, "s3proxy.conf")
		if err := os.WriteFile(conf, []byte(props), 0o644); err != nil {
			t.Fatal(err)
		}
		// A small heap and no perf data: tests start many of these on a
		// small machine.
		start(t, &s.srv, log, []int{port}, java, "-XX:-UsePerfData", "-Xmx256m", "-XX:+UseSerialGC",
			"-jar", jar, "--properties", conf)
	case "moto":
		bin := Require(t, "moto_server")
		start(t, &s.srv, log, []int{port}, bin, "-H", host, "-p", fmt.Sprint(port))
		req, _ := http.NewRequest(http.MethodPut, s.URL+"/"+s.Bucket, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("moto: create bucket: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("moto: create bucket: %s", resp.Status)
		}
	default:
		t.Fatalf("LAKEFED_S3_IMPL=%q: want s3proxy or moto", impl)
	}
	// The port opens before the server answers requests: wait for an S3
	// answer (any status) from the bucket.
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(s.URL + "/" + s.Bucket)
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(log)
			t.Fatalf("%s does not answer: %v\n%s", impl, err, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return s
}
