package config

import (
	"fmt"
	"strings"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/httpx"
)

// Buffer is the write buffer (package internal/buffer): PUTs under its
// prefixes land on local disk, are acknowledged once fsynced and
// journaled, and a mover copies them to their targets, verifies size and
// adler32 there, and only then retires the local copy. It is the YAML
// shape only; package server maps it onto buffer.Config.
//
//	buffer:
//	  dir: /var/spool/lakefed
//	  max_bytes: 500GiB
//	  keep_after_migration: 1h
//	  parallel: 4
//	  retry: {initial: 1s, max: 5m}
//	  when_full: reject          # reject (507) | direct (307 to the target)
//	  prefixes:
//	    - prefix: /store/user
//	      targets: [site-a, cloud]
type Buffer struct {
	// Dir holds the journal and the buffered files. Required.
	Dir string `yaml:"dir"`
	// MaxBytes bounds the bytes buffered. Zero: the disk's free space.
	MaxBytes Size `yaml:"max_bytes"`
	// KeepAfterMigration is how long a migrated file is still read
	// locally. Default 1h.
	KeepAfterMigration Duration `yaml:"keep_after_migration"`
	// Parallel is how many uploads run at once. Default 4.
	Parallel int `yaml:"parallel"`
	// Retry is the capped exponential backoff of failed uploads.
	Retry Retry `yaml:"retry"`
	// WhenFull is "reject" (507, the default) or "direct" (307 to the
	// prefix's first target).
	WhenFull string `yaml:"when_full"`
	// Prefixes are the buffered namespace prefixes and where their files
	// go. At least one.
	Prefixes []BufferPrefix `yaml:"prefixes"`
}

// Retry is a capped exponential backoff.
type Retry struct {
	// Initial is the wait after a file's first failed upload; it doubles
	// on every failure, with jitter, up to the longest wait. Zero: 1s.
	Initial Duration `yaml:"initial"`
	// Max is the longest wait between two tries of one file. Zero: 5m,
	// or the initial wait when that is longer; set, it must not be
	// below the initial wait.
	Max Duration `yaml:"max"`
}

// BufferPrefix is one buffered prefix.
type BufferPrefix struct {
	// Prefix is a clean absolute path ("/store/user"); it holds itself
	// and the paths below it, by whole segments. The most specific
	// prefix of a path places it.
	Prefix string `yaml:"prefix"`
	// Targets are federation endpoint names, or URLs of any kind lakefed
	// writes; every one gets a verified copy, at the path the client
	// wrote.
	Targets []string `yaml:"targets"`
}

// DefaultKeepAfterMigration is buffer.keep_after_migration's default.
const DefaultKeepAfterMigration = Duration(3600 * 1e9)

func (b *Buffer) validate(v *validator, path string, fed *Federation) {
	if b == nil {
		return
	}
	if b.Dir == "" {
		v.errorf(path+".dir", "missing (the spool directory)")
	}
	if fed == nil {
		v.errorf(path, "the write buffer sits in front of the federator: it needs a federation section")
	}
	if b.MaxBytes < 0 || b.KeepAfterMigration < 0 || b.Parallel < 0 || b.Retry.Initial < 0 || b.Retry.Max < 0 {
		v.errorf(path, "sizes, durations and parallel must not be negative")
	}
	if b.Retry.Max != 0 && b.Retry.Initial > b.Retry.Max {
		v.errorf(path+".retry", "initial %v is above max %v", b.Retry.Initial, b.Retry.Max)
	}
	switch b.WhenFull {
	case "", "reject", "direct":
	default:
		v.errorf(path+".when_full", "%q: want reject or direct", b.WhenFull)
	}
	if len(b.Prefixes) == 0 {
		v.errorf(path+".prefixes", "missing: which paths are buffered, and where they go")
	}
	names := map[string]bool{}
	if fed != nil {
		for _, e := range fed.Endpoints {
			names[e.Name] = true
		}
	}
	for i, p := range b.Prefixes {
		pp := fmt.Sprintf("%s.prefixes[%d]", path, i)
		if c, err := httpx.CleanPath(p.Prefix); err != nil || c != p.Prefix {
			v.errorf(pp+".prefix", "%q: want a clean absolute path", p.Prefix)
		}
		if len(p.Targets) == 0 {
			v.errorf(pp+".targets", "missing: at least one endpoint name or URL")
		}
		for j, t := range p.Targets {
			if names[t] {
				continue
			}
			if !strings.Contains(t, "://") {
				v.errorf(fmt.Sprintf("%s.targets[%d]", pp, j), "%q is no endpoint of the federation, and not a URL", t)
				continue
			}
			if _, _, err := endpoint.Resolve(endpoint.Config{Name: "target", URL: t}); err != nil {
				v.errorf(fmt.Sprintf("%s.targets[%d]", pp, j), "%v", err)
			}
		}
	}
}
