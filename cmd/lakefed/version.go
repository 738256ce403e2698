package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// What "lakefed version" prints, when the build says it: make build and
// make install set them with -ldflags "-X main.version=v1.2.3 -X
// main.commit=HASH -X main.modified=true". The go command stamps the same
// facts into the binary on its own (debug.ReadBuildInfo), but not in a git
// worktree, whose .git is a file, nor with -buildvcs=false; what is set
// here wins over the stamp. Empty: not set.
var (
	version  string
	commit   string
	modified string // "true" when the tree had uncommitted changes
)

// runVersion prints what the binary is: its version, the commit it was
// built from (and whether the tree had uncommitted changes) and the Go
// release that built it, "lakefed v0.4.0 (commit 46d757a1b2c3, modified)
// go1.26.8". Bug reports start with this line.
func runVersion(ctx context.Context, args []string) error {
	if len(args) > 0 {
		return usageErrorf("version: takes no arguments")
	}
	bi, _ := debug.ReadBuildInfo()
	fmt.Println(versionLine(bi, version, commit, modified == "true"))
	return nil
}

// versionLine formats the version from the build's stamp bi (nil when the
// binary has none) and the -X values, which win when they are set.
func versionLine(bi *debug.BuildInfo, xVersion, xCommit string, xModified bool) string {
	ver, rev, dirty, goVer := "", "", false, runtime.Version()
	if bi != nil {
		// "(devel)" is what a build outside module mode or without
		// VCS information says: not a version.
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			// A pseudo-version of a modified tree ends in "+dirty";
			// "modified" says that already.
			ver = strings.TrimSuffix(v, "+dirty")
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if bi.GoVersion != "" {
			goVer = bi.GoVersion
		}
	}
	if xVersion != "" {
		ver = xVersion
	}
	if xCommit != "" {
		rev, dirty = xCommit, xModified
	}
	if ver == "" {
		ver = "dev"
	}
	var b strings.Builder
	b.WriteString("lakefed ")
	b.WriteString(ver)
	if rev != "" {
		// Twelve hex digits, as in Go's pseudo-versions: short, and
		// unambiguous in a repository of this size for a long while.
		b.WriteString(" (commit ")
		b.WriteString(rev[:min(len(rev), 12)])
		if dirty {
			b.WriteString(", modified")
		}
		b.WriteString(")")
	}
	b.WriteString(" ")
	b.WriteString(goVer)
	return b.String()
}
