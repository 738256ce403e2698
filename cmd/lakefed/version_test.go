package main

import (
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// TestVersionLine: the build's stamp (module version, vcs.revision,
// vcs.modified) makes the line, and the -X values win over it.
func TestVersionLine(t *testing.T) {
	const rev = "46d757a1b2c3d4e5f60718293a4b5c6d7e8f9012"
	stamped := func(ver string, settings ...string) *debug.BuildInfo {
		bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/lakefed/lakefed", Version: ver}}
		for i := 0; i+1 < len(settings); i += 2 {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
		}
		return bi
	}
	tests := []struct {
		name       string
		bi         *debug.BuildInfo
		xVer, xRev string
		xMod       bool
		want       string
	}{
		{"no stamp", nil, "", "", false, "lakefed dev " + runtime.Version()},
		{"devel without vcs", stamped("(devel)"), "", "", false, "lakefed dev go1.26.8"},
		{"tagged clean", stamped("v0.4.0", "vcs.revision", rev, "vcs.modified", "false"), "", "", false,
			"lakefed v0.4.0 (commit 46d757a1b2c3) go1.26.8"},
		{"pseudo-version modified", stamped("v0.4.1-0.20261126065300-46d757a1b2c3+dirty", "vcs.revision", rev, "vcs.modified", "true"), "", "", false,
			"lakefed v0.4.1-0.20261126065300-46d757a1b2c3 (commit 46d757a1b2c3, modified) go1.26.8"},
		{"-X over devel", stamped("(devel)"), "v0.5.0", rev, true, "lakefed v0.5.0 (commit 46d757a1b2c3, modified) go1.26.8"},
		{"-X commit clears the stamp's modified", stamped("(devel)", "vcs.revision", "ffff", "vcs.modified", "true"), "", rev, false,
			"lakefed dev (commit 46d757a1b2c3) go1.26.8"},
		{"short revision", stamped("(devel)"), "", "abc1234", false, "lakefed dev (commit abc1234) go1.26.8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := versionLine(tt.bi, tt.xVer, tt.xRev, tt.xMod); got != tt.want {
				t.Errorf("versionLine = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestVersionCommand: the binary prints one line of the documented shape,
// naming the Go release that built it.
func TestVersionCommand(t *testing.T) {
	r := lakefed(t, "version")
	line := strings.TrimSuffix(r.stdout, "\n")
	re := regexp.MustCompile(`^lakefed \S+( \(commit [0-9a-f]{7,12}(, modified)?\))? (go\S+)$`)
	m := re.FindStringSubmatch(line)
	if r.code != exitOK || m == nil {
		t.Fatalf("lakefed version: exit %d, stdout %q; want one line matching %s", r.code, r.stdout, re)
	}
	if m[3] != runtime.Version() {
		t.Errorf("lakefed version says %s, want the Go that built it, %s", m[3], runtime.Version())
	}
	if r := lakefed(t, "version", "extra"); r.code != exitUsage {
		t.Errorf("lakefed version extra: exit %d, want %d", r.code, exitUsage)
	}
}
