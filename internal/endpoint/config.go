package endpoint

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"time"
)

// Config is what every kind's constructor gets. Fields a kind does not use
// are ignored by it; kinds validate the ones they do use.
type Config struct {
	// Name identifies the endpoint in logs, metrics and errors. Required.
	Name string `yaml:"name"`
	// URL says where the endpoint is and, by its scheme, which kind it is
	// (the table is Schemes): file:///dir, http(s)://host/path,
	// dav(s)://host/path (same as http(s)), s3://bucket/prefix,
	// root://host//path, lakefed(s)://host/ (another federator). Required.
	URL string `yaml:"url"`
	// Kind is "" (the kind the URL's scheme names) or the other kind the
	// scheme's row allows (Scheme.Alt): "upstream" for an http(s) URL of
	// another lakefed federator, asked only when no local endpoint has a
	// file.
	Kind string `yaml:"kind"`
	// Timeout bounds each metadata operation (stat, list, delete, mkdir,
	// probe) and the wait for the first byte of a read. Zero means 10s.
	Timeout time.Duration `yaml:"timeout"`
	// CAFile is a PEM bundle of extra CAs to trust for https/davs. Empty:
	// the system roots.
	CAFile string `yaml:"ca_file"`
	// InsecureSkipVerify turns off TLS certificate checks. For tests only.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`
	// BearerToken, when set, is sent as "Authorization: Bearer ..." to
	// HTTP endpoints (WLCG tokens, macaroons).
	BearerToken string `yaml:"bearer_token"`
	// PassToken sends the caller's own bearer token (the one lakefed's
	// auth accepted for the request being served) to the endpoint in
	// place of BearerToken, so the endpoint applies its own rules to the
	// caller. Requests made for no caller (probes, site tests) use
	// BearerToken.
	PassToken bool `yaml:"pass_token"`
	// HTTPURL is the HTTP(S) door of a root:// endpoint (XRootD's XrdHttp),
	// used to redirect HTTP clients there. Empty: root:// endpoints are
	// proxied.
	HTTPURL string `yaml:"http_url"`
	// S3 holds the options of s3:// endpoints; nil for other kinds.
	S3 *S3Config `yaml:"s3"`
}

// S3Config is the part of an endpoint's config only s3:// endpoints use.
// The s3 kind documents and validates its fields.
type S3Config struct {
	// Endpoint is the S3 server's host:port or URL, e.g.
	// "http://127.0.0.1:9000". A bare host:port means https. Required.
	Endpoint string `yaml:"endpoint"`
	// Region is the bucket's region, used in signatures. Set, it also lets
	// pre-signed URLs be made without asking the server. Empty: "us-east-1".
	Region string `yaml:"region"`
	// AccessKey and SecretKey are the credentials. Both empty: taken from
	// the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and, if
	// set, AWS_SESSION_TOKEN); none there either: anonymous requests.
	AccessKey string `yaml:"access_key"`
	// SecretKey is AccessKey's secret. It is only ever used to sign; it
	// never appears in a URL or a log.
	SecretKey string `yaml:"secret_key"`
	// PathStyle forces path-style requests (http://host/bucket/key), which
	// most non-AWS servers (s3proxy, MinIO, Ceph RGW) want. False: minio-go
	// picks virtual-host style for AWS and path style for other servers.
	PathStyle bool `yaml:"path_style"`
	// PresignExpiry is how long a pre-signed redirect URL stays valid.
	// Zero: 1h. At least 1s, at most 7 days (the S3 limit); the federator
	// also requires it to be no shorter than its metadata cache TTL.
	PresignExpiry time.Duration `yaml:"presign_expiry"`
	// MultipartThreshold is the size above which a Put uses a multipart
	// upload, as a size string ("64MiB", "100MB", "1048576"). Smaller
	// files are buffered in memory and sent in one PUT. Empty: "64MiB".
	MultipartThreshold string `yaml:"multipart_threshold"`
	// PartSize is the size of each part of a multipart upload, as a size
	// string. Each Put holds one part in memory. At least "5MiB" (the S3
	// minimum), at most "5GiB"; with 10000 parts at most, it bounds the
	// size of a Put of unknown length. Empty: "64MiB".
	PartSize string `yaml:"part_size"`
}

// DefaultPresignExpiry is the life of a pre-signed S3 URL when
// S3Config.PresignExpiry is zero. It lives here, not in the s3 kind, so the
// config can check it against the metadata cache TTL without linking S3.
const DefaultPresignExpiry = time.Hour

// DefaultTimeout is the Timeout used when Config.Timeout is zero.
const DefaultTimeout = 10 * time.Second

// TimeoutOrDefault returns c.Timeout, or DefaultTimeout when it is zero.
func (c Config) TimeoutOrDefault() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return DefaultTimeout
}

// TLSConfig is the client TLS configuration c asks for: the system roots
// plus the CAs in CAFile, and InsecureSkipVerify. It returns nil, nil when
// c sets neither (the transport's default then applies).
func (c Config) TLSConfig() (*tls.Config, error) {
	if c.CAFile == "" && !c.InsecureSkipVerify {
		return nil, nil
	}
	tc := &tls.Config{InsecureSkipVerify: c.InsecureSkipVerify} //nolint:gosec // opt-in, for tests; documented on the field
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("ca_file: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca_file %s: no PEM certificates", c.CAFile)
		}
		tc.RootCAs = pool
	}
	return tc, nil
}
