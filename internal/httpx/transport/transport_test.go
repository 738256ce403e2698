package transport

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/endpoint"
)

func TestDefaults(t *testing.T) {
	tr, err := New(endpoint.Config{Timeout: 3 * time.Second}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if tr.MaxIdleConns != DefaultMaxIdleConns || tr.MaxIdleConnsPerHost != DefaultMaxIdleConnsPerHost || tr.MaxConnsPerHost != 0 {
		t.Errorf("pool = %d/%d/%d, want the defaults and no per-host bound", tr.MaxIdleConns, tr.MaxIdleConnsPerHost, tr.MaxConnsPerHost)
	}
	if tr.TLSHandshakeTimeout != 3*time.Second || tr.ResponseHeaderTimeout != 0 {
		t.Errorf("timeouts = %v/%v, want the endpoint's for the handshake and none for the header", tr.TLSHandshakeTimeout, tr.ResponseHeaderTimeout)
	}
	if !tr.DisableCompression || tr.ForceAttemptHTTP2 || tr.Proxy == nil || tr.TLSClientConfig != nil {
		t.Errorf("compression off %v, h2 %v, proxy set %v, tls %v: want no gzip, h1, the environment's proxy, system roots",
			tr.DisableCompression, tr.ForceAttemptHTTP2, tr.Proxy != nil, tr.TLSClientConfig)
	}
}

func TestOptions(t *testing.T) {
	tr, err := New(endpoint.Config{InsecureSkipVerify: true}, Options{MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024,
		MaxConnsPerHost: 1024, ResponseHeaderTimeout: time.Second, NoProxy: true})
	if err != nil {
		t.Fatal(err)
	}
	if tr.MaxIdleConns != 1024 || tr.MaxIdleConnsPerHost != 1024 || tr.MaxConnsPerHost != 1024 {
		t.Errorf("pool = %d/%d/%d, want 1024 each", tr.MaxIdleConns, tr.MaxIdleConnsPerHost, tr.MaxConnsPerHost)
	}
	if tr.ResponseHeaderTimeout != time.Second || tr.Proxy != nil {
		t.Errorf("header timeout %v, proxy set %v", tr.ResponseHeaderTimeout, tr.Proxy != nil)
	}
	if tr.TLSHandshakeTimeout != endpoint.DefaultTimeout {
		t.Errorf("handshake timeout = %v, want the default %v", tr.TLSHandshakeTimeout, endpoint.DefaultTimeout)
	}
	if tr.TLSClientConfig == nil || !tr.TLSClientConfig.InsecureSkipVerify {
		t.Error("insecure_skip_verify not passed on")
	}
}

func TestBadCA(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(bad, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New(endpoint.Config{CAFile: bad}, Options{}); err == nil {
		t.Error("a CA file without certificates was accepted")
	}
}
