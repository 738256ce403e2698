package xroot

import (
	"testing"

	"github.com/lakefed/lakefed/internal/endpoint/endpointtest"
	"github.com/lakefed/lakefed/internal/httpx"
)

// TestConformance runs the endpoint suite against a real xrootd.
func TestConformance(t *testing.T) {
	endpointtest.Run(t, func(t *testing.T) endpointtest.Target {
		x := startXRootD(t)
		return endpointtest.Target{
			Endpoint: x.endpoint(t),
			Caps: endpointtest.Caps{
				Checksums: []string{httpx.Adler32},
				// "?" starts CGI: it is stripped before anything is sent,
				// so no name can hold it through this kind.
				BadNameChars: "?",
			},
		}
	})
}
