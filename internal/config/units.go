package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Duration is a length of time written as a string: decimal numbers,
// each with a unit (ns, us, ms, s, m, h), as in "30s", "250ms" or
// "1h30m" (time.ParseDuration's syntax).
type Duration time.Duration

// UnmarshalYAML parses a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return errors.New("want a duration such as \"30s\"")
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("invalid duration %q (want e.g. \"30s\", \"250ms\")", n.Value)
	}
	*d = Duration(v)
	return nil
}

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String formats d as time.Duration does.
func (d Duration) String() string { return time.Duration(d).String() }

// Size is a byte count written as a number with an optional unit: B,
// kB or KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of
// 1024), as in "64MiB", "1.5GB" or 4096.
type Size int64

// UnmarshalYAML parses a size with an optional unit: B, kB/KB, MB, GB, TB
// (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024).
func (s *Size) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return errors.New("want a size such as \"64MiB\"")
	}
	v, err := ParseSize(n.Value)
	if err != nil {
		return err
	}
	*s = Size(v)
	return nil
}

// ParseSize parses "64MiB", "1.5GB", "4096" into bytes.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := len(t)
	for i > 0 && (t[i-1] < '0' || t[i-1] > '9') && t[i-1] != '.' {
		i--
	}
	num, unit := strings.TrimSpace(t[:i]), strings.TrimSpace(t[i:])
	mult := map[string]float64{
		"": 1, "B": 1,
		"kB": 1e3, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
		"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
	}[unit]
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || mult == 0 || f < 0 {
		return 0, fmt.Errorf("invalid size %q (want e.g. \"64MiB\", \"10GB\")", s)
	}
	return int64(f * mult), nil
}

// Defaults of the fields whose zero value means "the default".
const (
	DefaultListen       = "127.0.0.1:8080"
	DefaultMaxEntries   = 100000
	DefaultHotEntries   = 16384
	DefaultTTL          = 60 * time.Second
	DefaultNegativeTTL  = 5 * time.Second
	DefaultListAfter    = 2
	DefaultListMax      = 10000
	DefaultInterval     = 2 * time.Second
	DefaultProbeTimeout = 2 * time.Second
	DefaultFailAfter    = 2
	DefaultErrorLimit   = 5
	DefaultRecoverAfter = 2
	DefaultFuzzKM       = 100
	DefaultFuzzLatency  = 5 * time.Millisecond
	DefaultMaxHops      = 3
	DefaultRetryAfter   = 10 * time.Second
	// DefaultProxyIdleTimeout: a replica that sends nothing for this long
	// during a proxied read is taken as stalled.
	DefaultProxyIdleTimeout = 5 * time.Second
)

// MaxFileSize is the largest config file Load reads. A config is a few
// kilobytes; anything near this is a mistake or an attack, and parsing it
// would cost memory out of proportion.
const MaxFileSize = 4 << 20

// ErrTooLarge is returned by Load for a file larger than MaxFileSize.
var ErrTooLarge = errors.New("config: file larger than 4 MiB")
