package config

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Load reads, parses, fills defaults and validates the file at path.
func Load(path string) (*Config, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("config %s:\n%w", path, err)
	}
	return c, nil
}

// readFile reads path, refusing (without reading on) a file larger than
// MaxFileSize.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%w: %s", ErrTooLarge, path)
	}
	return data, nil
}

// Parse parses a config from YAML text, fills defaults and validates it.
// The error joins every problem found, each a *FieldError.
func Parse(data []byte) (*Config, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, syntaxError(data, err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, &FieldError{Msg: "empty config"}
	}
	if err := checkAliases(&doc); err != nil {
		return nil, err
	}
	c := &Config{}
	d := &decoder{lines: map[string]int{}}
	d.decode(doc.Content[0], reflect.ValueOf(c).Elem(), "")
	c.lines = d.lines
	if d.stopped {
		return nil, errors.Join(d.errs...)
	}
	// Validate even when decoding failed: a value of the wrong type must
	// not hide a bad URL further down (check-config reports every
	// problem). The fields that failed to decode kept their zero value,
	// so what Validate says of them is dropped: the decode error says it.
	c.SetDefaults()
	errs := d.errs
	for _, e := range unjoin(c.Validate()) {
		if !coveredBy(e, d.errs) {
			errs = append(errs, e)
		}
	}
	if len(errs) > 0 {
		slices.SortStableFunc(errs, byLine)
		return nil, errors.Join(errs...)
	}
	return c, nil
}

// unjoin returns the errors errors.Join put in err, or err alone.
func unjoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// coveredBy reports whether e is about a field (or a field inside one)
// that one of decodeErrs is about.
func coveredBy(e error, decodeErrs []error) bool {
	var fe *FieldError
	if !errors.As(e, &fe) || fe.Path == "" {
		return false
	}
	for _, de := range decodeErrs {
		var d *FieldError
		if errors.As(de, &d) && d.Path != "" &&
			(fe.Path == d.Path || strings.HasPrefix(fe.Path, d.Path+".") || strings.HasPrefix(fe.Path, d.Path+"[")) {
			return true
		}
	}
	return false
}

// byLine orders problems by their line in the file; those without one
// (a missing field) last.
func byLine(a, b error) int {
	line := func(e error) int {
		var fe *FieldError
		if errors.As(e, &fe) && fe.Line > 0 {
			return fe.Line
		}
		return math.MaxInt
	}
	return cmp.Compare(line(a), line(b))
}
