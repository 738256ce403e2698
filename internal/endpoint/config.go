package endpoint

import "time"

// Config is what every kind's constructor gets. Fields a kind does not use
// are ignored by it; kinds validate the ones they do use.
type Config struct {
	// Name identifies the endpoint in logs, metrics and errors. Required.
	Name string `yaml:"name"`
	// URL says where the endpoint is and, by its scheme, which kind it is:
	// file:///dir, http(s)://host/path, dav(s)://host/path (same as
	// http(s)), and later s3://bucket/prefix, root://host//path,
	// lakefed(s)://host/ (another federator). Required.
	URL string `yaml:"url"`
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
}

// DefaultTimeout is the Timeout used when Config.Timeout is zero.
const DefaultTimeout = 10 * time.Second

// TimeoutOrDefault returns c.Timeout, or DefaultTimeout when it is zero.
func (c Config) TimeoutOrDefault() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return DefaultTimeout
}
