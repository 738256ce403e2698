package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUsageErrors: a usage error of any subcommand exits 2 and prints its
// message once.
func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		msg  string // printed exactly once
	}{
		{"cp unknown flag", []string{"cp", "--nope", "a", "b"}, "flag provided but not defined: -nope"},
		{"check-config unknown flag", []string{"check-config", "x.yaml", "--nope"}, "flag provided but not defined: -nope"},
		{"serve unknown flag", []string{"serve", "--nope"}, "flag provided but not defined: -nope"},
		{"serve bad value", []string{"serve", "-v=maybe", "x.yaml"}, "invalid boolean value"},
		{"demo bad value", []string{"demo", "--listen"}, "flag needs an argument: -listen"},
		{"ls no args", []string{"ls"}, "ls: want one URL or path"},
		{"check-config no file", []string{"check-config"}, "check-config: give"},
		{"check-config two files", []string{"check-config", "a.yaml", "--config", "b.yaml"}, "check-config: give"},
		{"serve no file", []string{"serve"}, "serve: give"},
		{"unknown command", []string{"nope"}, "unknown command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := lakefed(t, tt.args...)
			if r.code != exitUsage {
				t.Errorf("lakefed %q: exit %d, want %d (stderr %q)", tt.args, r.code, exitUsage, r.stderr)
			}
			if n := strings.Count(r.stderr, tt.msg); n != 1 {
				t.Errorf("lakefed %q: stderr has %q %d times, want once:\n%s", tt.args, tt.msg, n, r.stderr)
			}
		})
	}
}

// TestConfigFileArgument: check-config and serve take the file as an
// argument or as --config FILE.
func TestConfigFileArgument(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "fed.yaml")
	if err := os.WriteFile(cfg, []byte("listen: 127.0.0.1:0\nfederation:\n  endpoints: [{name: a, url: \"http://127.0.0.1:1/\"}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"check-config", cfg},
		{"check-config", "--config", cfg},
		{"check-config", "-config=" + cfg},
	} {
		r := lakefed(t, args...)
		if r.code != exitOK || !strings.Contains(r.stdout, ": ok") {
			t.Errorf("lakefed %q: exit %d, stdout %q, stderr %q; want ok", args, r.code, r.stdout, r.stderr)
		}
	}
	for _, args := range [][]string{{cfg}, {"--config", cfg}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			if addr := startServe(t, dir, args...); addr == "" {
				t.Errorf("serve %q started no federator", args)
			}
		})
	}
}
