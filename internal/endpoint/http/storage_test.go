package http_test

import (
	"context"
	"errors"
	"testing"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/endpoint/endpointtest"
	"github.com/lakefed/lakefed/internal/httpx"
	"github.com/lakefed/lakefed/internal/storage"
	"github.com/lakefed/lakefed/internal/storage/storagetest"
	"github.com/lakefed/lakefed/internal/testenv"
)

// startStorage runs lakefed's storage role on 127.0.0.1:0 until the test
// ends and returns its base URL.
func startStorage(t *testing.T, cfg storage.Config) string {
	t.Helper()
	return storagetest.Start(t, cfg).URL
}

// storageCaps: the storage role offers every checksum lakefed computes.
var storageCaps = endpointtest.Caps{Checksums: []string{httpx.Adler32, httpx.MD5, httpx.CRC32C}}

func TestStorage(t *testing.T) {
	base := startStorage(t, storage.Config{})
	endpointtest.Run(t, func(t *testing.T) endpointtest.Target {
		return endpointtest.Target{Endpoint: newEP(t, endpoint.Config{URL: base}), Caps: storageCaps}
	})
}

func TestStorageTLS(t *testing.T) {
	tl := testenv.NewTLS(t)
	base := startStorage(t, storage.Config{TLSCert: tl.CertFile, TLSKey: tl.KeyFile})
	endpointtest.Run(t, func(t *testing.T) endpointtest.Target {
		return endpointtest.Target{Endpoint: newEP(t, endpoint.Config{URL: base, CAFile: tl.CAFile}), Caps: storageCaps}
	})
	// davs:// is the same, and a client without the CA must fail as
	// unavailable (a TLS failure is not an answer).
	davs := "davs" + base[len("https"):]
	ep := newEP(t, endpoint.Config{URL: davs, CAFile: tl.CAFile})
	if err := ep.Probe(context.Background()); err != nil {
		t.Errorf("Probe over davs = %v", err)
	}
	noCA := newEP(t, endpoint.Config{URL: base})
	if _, err := noCA.Stat(context.Background(), "/"); !errors.Is(err, endpoint.ErrUnavailable) {
		t.Errorf("Stat without the CA = %v, want ErrUnavailable", err)
	}
	insecure := newEP(t, endpoint.Config{URL: base, InsecureSkipVerify: true})
	if _, err := insecure.Stat(context.Background(), "/"); err != nil {
		t.Errorf("Stat with InsecureSkipVerify = %v", err)
	}
}
