// Command refgen writes docs/config.md, the configuration reference, from
// the doc comments of the config package's structs, so that the
// reference cannot drift from the code. It reads the source (go/parser),
// not the compiled types, because the comments are the text. It walks
// from Config through nested structs, pointers, lists and mappings, and
// refuses to write while a YAML key has no doc comment.
//
// It runs from internal/config, by go generate:
//
//	go run ./refgen -o ../../docs/config.md
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
)

func main() {
	out := flag.String("o", "", "the Markdown file to write")
	flag.Parse()
	if *out == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: refgen -o FILE (run in the config package's directory)")
		os.Exit(2)
	}
	if err := run(".", *out); err != nil {
		fmt.Fprintln(os.Stderr, "refgen:", err)
		os.Exit(1)
	}
}

// run writes the reference of the package in dir to out. It leaves an
// unchanged file alone, so that go generate touches nothing when the
// comments did not change.
func run(dir, out string) error {
	md, err := generate(dir)
	if err != nil {
		return err
	}
	if old, err := os.ReadFile(out); err == nil && bytes.Equal(old, md) {
		return nil
	}
	return os.WriteFile(out, md, 0o644)
}

// generate returns the reference of the package in dir.
func generate(dir string) ([]byte, error) {
	m, err := loadModel(dir)
	if err != nil {
		return nil, err
	}
	if err := m.documented(); err != nil {
		return nil, err
	}
	return m.markdown()
}

// documented returns an error naming every YAML key without a doc
// comment: its text is the reference's.
func (m *model) documented() error {
	if len(m.undocumented) == 0 {
		return nil
	}
	return errors.New("fields without a doc comment (each is a key of the config file, and its comment is the key's text in docs/config.md):\n\t" +
		strings.Join(m.undocumented, "\n\t"))
}
