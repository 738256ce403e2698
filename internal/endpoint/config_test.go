package endpoint

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTLSConfig(t *testing.T) {
	if tc, err := (Config{}).TLSConfig(); tc != nil || err != nil {
		t.Errorf("TLSConfig() with nothing set = %v, %v; want nil, nil", tc, err)
	}
	if tc, err := (Config{InsecureSkipVerify: true}).TLSConfig(); err != nil || tc == nil || !tc.InsecureSkipVerify {
		t.Errorf("TLSConfig(insecure) = %v, %v; want InsecureSkipVerify", tc, err)
	}
	if _, err := (Config{CAFile: "/nonexistent/ca.pem"}).TLSConfig(); err == nil || !strings.Contains(err.Error(), "ca_file") {
		t.Errorf("TLSConfig(missing file) = %v; want a ca_file error", err)
	}
	junk := filepath.Join(t.TempDir(), "junk.pem")
	if err := os.WriteFile(junk, []byte("not a certificate"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := (Config{CAFile: junk}).TLSConfig(); err == nil || !strings.Contains(err.Error(), "no PEM certificates") {
		t.Errorf("TLSConfig(junk file) = %v; want 'no PEM certificates'", err)
	}
}
