package auth

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// Reloader holds a listener's certificate and client CAs, and reads them
// again on Reload; connections made after a Reload get the new ones.
// Its methods are safe for concurrent use.
type Reloader struct {
	certFile, keyFile, caFile, caDir string
	cur                              atomic.Pointer[tlsState]
	now                              func() time.Time
}

type tlsState struct {
	cert *tls.Certificate
	pool *x509.CertPool // nil: client certificates not requested
}

// ServerTLS returns the TLS config of a lakefed listener: the server
// certificate from certFile and keyFile (PEM; the chain in certFile), TLS
// 1.2 at least, and, when caFile or caDir names CAs (see LoadCAs), client
// certificates requested and, when given, verified with VerifyChain, so
// RFC 3820 proxies pass where tls.VerifyClientCertIfGiven would refuse
// them. A client that sends a chain that does not verify fails the
// handshake; one that sends none goes on as anonymous. The Reloader reads
// every file again; the server calls Reload on SIGHUP.
func ServerTLS(certFile, keyFile, caFile, caDir string) (*tls.Config, *Reloader, error) {
	rl := &Reloader{certFile: certFile, keyFile: keyFile, caFile: caFile, caDir: caDir, now: time.Now}
	if err := rl.Reload(); err != nil {
		return nil, nil, err
	}
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
	}
	cfg.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		st := rl.cur.Load()
		c := cfg.Clone()
		c.GetConfigForClient = nil
		c.Certificates = []tls.Certificate{*st.cert}
		if st.pool != nil {
			// RequestClientCert: ask, and let VerifyConnection judge,
			// since Go's verifier refuses proxy certificates. ClientCAs
			// only tells the client which CAs we trust.
			c.ClientAuth = tls.RequestClientCert
			c.ClientCAs = st.pool
			pool := st.pool
			c.VerifyConnection = func(cs tls.ConnectionState) error {
				if len(cs.PeerCertificates) == 0 {
					return nil
				}
				_, _, _, err := VerifyChain(cs.PeerCertificates, pool, rl.now())
				return err
			}
		}
		return c, nil
	}
	// Certificates for callers that read the config without a
	// ClientHello (tls.Listen checks one is there).
	cfg.Certificates = []tls.Certificate{*rl.cur.Load().cert}
	return cfg, rl, nil
}

// Reload reads the certificate, key and CAs again. On error the old ones
// stay and serve on.
func (rl *Reloader) Reload() error {
	cert, err := tls.LoadX509KeyPair(rl.certFile, rl.keyFile)
	if err != nil {
		return fmt.Errorf("auth: server certificate: %w", err)
	}
	st := &tlsState{cert: &cert}
	if rl.caFile != "" || rl.caDir != "" {
		pool, n, err := LoadCAs(rl.caFile, rl.caDir)
		if err != nil {
			return err
		}
		if n == 0 {
			return errors.Join(ErrConfig, fmt.Errorf("no CA certificates in %q / %q", rl.caFile, rl.caDir))
		}
		st.pool = pool
	}
	rl.cur.Store(st)
	return nil
}

// Certificate returns the certificate served now (its leaf parsed).
func (rl *Reloader) Certificate() *tls.Certificate { return rl.cur.Load().cert }
