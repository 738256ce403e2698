package main

import (
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
)

func TestParseFlags(t *testing.T) {
	tests := []struct {
		args []string
		pos  []string
		f    bool
		fmt  string
	}{
		{[]string{"a", "b"}, []string{"a", "b"}, false, ""},
		{[]string{"-f", "a", "b"}, []string{"a", "b"}, true, ""},
		{[]string{"a", "b", "-f"}, []string{"a", "b"}, true, ""},
		{[]string{"a", "--format", "csv", "b"}, []string{"a", "b"}, false, "csv"},
		{[]string{"3", "--format", "csv"}, []string{"3"}, false, "csv"},
		{[]string{"a", "--", "-f", "--format"}, []string{"a", "-f", "--format"}, false, ""},
		{[]string{"-", "-f"}, []string{"-"}, true, ""},
		{nil, nil, false, ""},
	}
	for _, tt := range tests {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		f := fs.Bool("f", false, "")
		format := fs.String("format", "", "")
		if err := parseFlags(fs, tt.args); err != nil {
			t.Errorf("parseFlags(%q): %v", tt.args, err)
			continue
		}
		if !slices.Equal(fs.Args(), tt.pos) && !(len(fs.Args()) == 0 && len(tt.pos) == 0) || *f != tt.f || *format != tt.fmt {
			t.Errorf("parseFlags(%q): args %q -f %v --format %q; want %q %v %q", tt.args, fs.Args(), *f, *format, tt.pos, tt.f, tt.fmt)
		}
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if err := parseFlags(fs, []string{"a", "--nope"}); err == nil {
		t.Error("an unknown flag after an argument was accepted")
	}
}

// TestFlagsAnywhere: every subcommand, and every bench subcommand, takes
// its flags after its positional arguments too ("lakefed bench export 3
// --format csv" once failed with "wrong number of run IDs"). "-h" after
// the arguments must show the command's usage, not be taken as one more
// argument. New commands are covered as they join the tables.
func TestFlagsAnywhere(t *testing.T) {
	// Positional arguments to put before "-h"; one "x" by default.
	positional := map[string][]string{
		"cp":            {"a", "b"},
		"bench compare": {"1", "2"},
	}
	var cmds [][]string
	for _, c := range commands {
		switch c.name {
		case "version": // takes no flags
		case "bench":
			for _, b := range benchCommands {
				cmds = append(cmds, []string{"bench", b.name})
			}
		default:
			cmds = append(cmds, []string{c.name})
		}
	}
	for _, cmd := range cmds {
		name := strings.Join(cmd, " ")
		t.Run(name, func(t *testing.T) {
			pos, ok := positional[name]
			if !ok {
				pos = []string{"x"}
			}
			args := append(append(slices.Clone(cmd), pos...), "-h")
			r := lakefed(t, args...)
			if r.code != exitOK || !strings.Contains(r.stderr, "Usage: lakefed "+cmd[0]) {
				t.Errorf("lakefed %q: exit %d, stderr %q; want exit 0 and the usage", args, r.code, r.stderr)
			}
		})
	}
}
