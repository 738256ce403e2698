package config

import (
	"fmt"
	"net/url"

	"github.com/lakefed/lakefed/internal/endpoint"
)

// OriginFederation is the cache origin that names the federation of the
// same process: the cache reads through it and gets its replica
// failover.
const OriginFederation = "federation"

// Cache is the cache role: a read-through block cache on local disk in
// front of an origin (package internal/cache). It is the YAML shape only;
// package server maps it onto cache.Config. Zero values mean the cache's
// defaults.
//
//	cache:
//	  listen: 127.0.0.1:9100   # default: the federator's listener
//	  dir: /var/cache/lakefed
//	  origin: federation       # or any URL lakefed reads
//	  max_bytes: 100GiB
//	  max_inodes: 1000000
//	  block_size: 1MiB
//	  prefetch_blocks: 8
//	  ram: 256MiB
//	  high_watermark: 0.95
//	  low_watermark: 0.90
//	  revalidate_after: 5m
//	  group: [http://cache-1:9100, http://cache-2:9100]
type Cache struct {
	// Listen is where the cache serves. Empty: the federator's listener,
	// where the cache answers GET and HEAD and the federator the rest.
	Listen string `yaml:"listen"`
	// ListenXroot is the host:port of a root:// door to the cache (XRootD
	// clients read through it). Empty: none.
	ListenXroot string `yaml:"listen_xroot"`
	// Dir holds the cached blocks. Required.
	Dir string `yaml:"dir"`
	// Origin is what the cache reads from: "federation" (this process's
	// federator) or a URL of any kind lakefed reads (http, dav, s3,
	// root, lakefed, file). Required.
	Origin string `yaml:"origin"`
	// MaxBytes bounds the bytes of blocks on disk. Zero: 90 % of the
	// file system.
	MaxBytes Size `yaml:"max_bytes"`
	// MaxInodes bounds the files on disk (two per cached file). Zero:
	// 90 % of the file system's inodes.
	MaxInodes int64 `yaml:"max_inodes"`
	// BlockSize is the unit of fill and of checking. Default 1MiB.
	BlockSize Size `yaml:"block_size"`
	// PrefetchBlocks is how many blocks are read ahead of a sequential
	// reader. Default 8; -1 turns prefetch off.
	PrefetchBlocks int `yaml:"prefetch_blocks"`
	// RAM keeps recently read small blocks in memory. Default 256MiB;
	// -1 turns it off.
	RAM Size `yaml:"ram"`
	// HighWatermark is the fraction of MaxBytes or MaxInodes (or of the
	// file system) above which a purge removes the least recently used
	// files. Default 0.95; at most 1.
	HighWatermark float64 `yaml:"high_watermark"`
	// LowWatermark is the fraction a purge brings bytes and inodes down
	// to. Default 0.90; above 0 and below HighWatermark.
	LowWatermark float64 `yaml:"low_watermark"`
	// RevalidateAfter is how long the origin's description of a file is
	// trusted before it is asked again. Default 5m.
	RevalidateAfter Duration `yaml:"revalidate_after"`
	// OriginIdleTimeout is how long a fill waits for the origin's next
	// bytes before it reopens the read (a stalled server). Default 5s.
	OriginIdleTimeout Duration `yaml:"origin_idle_timeout"`
	// MaxFills bounds the origin reads filling the disk at once (a fill
	// paused for a slow reader counts as none); past it readers stream
	// from the origin uncached. Default 32.
	MaxFills int `yaml:"max_fills"`
	// Sendfile sends whole blocks on disk to plain-HTTP clients with
	// sendfile(2), each pinned in the page cache (mlock) and checked in
	// place, instead of copying it through a buffer: two copies of every
	// byte fewer for the process. For clients across a network: to a
	// client on the same host (loopback) the copying path is faster.
	// Default false.
	Sendfile bool `yaml:"sendfile"`
	// Group lists the base URLs of every node of a cache group, this one
	// included; each path is kept by one of them. [shared]: the nodes
	// find each other through the shared section's Redis (each registers
	// itself; one added joins, one dead leaves within 3 s). Empty: no
	// group.
	Group []string `yaml:"group"`
	// Self is this node's URL in Group. Default: http://<listen>.
	Self string `yaml:"self"`
}

func (c *Cache) validate(v *validator, path string, haveFederation bool) {
	if c == nil {
		return
	}
	if c.Dir == "" {
		v.errorf(path+".dir", "missing (the directory for cached blocks)")
	}
	switch {
	case c.Origin == "":
		v.errorf(path+".origin", "missing: %q or a URL", OriginFederation)
	case c.Origin == OriginFederation:
		if !haveFederation {
			v.errorf(path+".origin", "%q needs a federation section", OriginFederation)
		}
	default:
		if _, _, err := endpoint.Resolve(endpoint.Config{Name: "origin", URL: c.Origin}); err != nil {
			v.errorf(path+".origin", "%v", err)
		}
	}
	if c.Listen == "" && !haveFederation {
		v.errorf(path+".listen", "missing: without a federation section the cache needs a listener of its own")
	}
	if c.MaxBytes < 0 || c.MaxInodes < 0 {
		v.errorf(path+".max_bytes", "bounds must not be negative")
	}
	if c.BlockSize != 0 && (c.BlockSize < 4<<10 || c.BlockSize > 64<<20) {
		v.errorf(path+".block_size", "%d bytes: want 4KiB to 64MiB", c.BlockSize)
	}
	hi, lo := c.HighWatermark, c.LowWatermark
	if hi == 0 {
		hi = 0.95
	}
	if lo == 0 {
		lo = 0.90
	}
	if !(0 < lo && lo < hi && hi <= 1) {
		v.errorf(path+".high_watermark", "watermarks %.2f/%.2f: want 0 < low_watermark < high_watermark <= 1", lo, hi)
	}
	if c.RevalidateAfter < 0 {
		v.errorf(path+".revalidate_after", "must not be negative")
	}
	for i, g := range c.Group {
		if g == GroupShared && len(c.Group) == 1 {
			continue
		}
		u, err := url.Parse(g)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			v.errorf(fmt.Sprintf("%s.group[%d]", path, i), "%q: want an http(s) base URL", g)
		}
	}
	if len(c.Group) > 0 && c.Self == "" && c.Listen == "" {
		v.errorf(path+".self", "missing: a cache group member sharing the federator's listener must say its URL in the group")
	}
}
