package config

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// FieldError is one problem with the config file: where it is (the line,
// when known, and the field's path such as "federation.endpoints[1].url")
// and what is wrong.
type FieldError struct {
	// Line is the 1-based line in the file, or 0 when unknown (a missing
	// field, or a Config built in code).
	Line int
	// Path names the field: keys joined by dots, list items as [i].
	Path string
	// Msg says what is wrong, in lower case.
	Msg string
}

func (e *FieldError) Error() string {
	var b strings.Builder
	if e.Line > 0 {
		b.WriteString("line ")
		b.WriteString(strconv.Itoa(e.Line))
		b.WriteString(": ")
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// decoder walks a yaml.Node tree beside a Go value by reflection, so that
// every problem (an unknown key, a value of the wrong type, a bad duration)
// is reported with its field path and line, and every problem is reported,
// not just the first. yaml.v3's own KnownFields(true) stops at the first
// unknown key and does not name the path.
//
// The walk follows aliases itself, so yaml.v3's own guard against
// excessive aliasing (which counts per Decode call) does not cover it;
// checkAliases bounds the expansion before the walk starts.
type decoder struct {
	errs []error
	// lines maps a field path to the line of its key (or list item), so
	// that Validate's errors can name lines too.
	lines map[string]int
	// stopped is set once the walk gave up after maxErrors problems;
	// every later error is dropped.
	stopped bool
}

// Limits of the walk.
const (
	// maxAliasNodes bounds the nodes aliases add to a document. Reusing
	// a block for a few hundred endpoints adds thousands; a billion
	// laughs, billions.
	maxAliasNodes = 100_000
	// maxErrors bounds the problems reported: past it the file is
	// broken enough, and an aliased mistake would repeat endlessly.
	maxErrors = 100
)

func (d *decoder) errorf(n *yaml.Node, path, format string, a ...any) {
	if d.stopped {
		return
	}
	line := 0
	if n != nil {
		line = n.Line
	}
	if len(d.errs) == maxErrors {
		d.errs = append(d.errs, &FieldError{Line: line, Path: path, Msg: "too many errors; stopping here"})
		d.stopped = true
		return
	}
	d.errs = append(d.errs, &FieldError{Line: line, Path: path, Msg: fmt.Sprintf(format, a...)})
}

// checkAliases refuses a document whose aliases expand to more than
// maxAliasNodes nodes in all: a few kilobytes of anchors and aliases (a
// "billion laughs") expand to billions. The document's own nodes are
// bounded by MaxFileSize; this bounds what aliases add, so that the walk
// (and yaml.v3 under it) visits at most both. It takes one pass over the
// document, remembering each anchored node's expanded size. The error
// names the alias where the total ran over.
func checkAliases(doc *yaml.Node) error {
	sizes := map[*yaml.Node]int{}
	total := 0
	var walk func(n *yaml.Node) *yaml.Node
	walk = func(n *yaml.Node) *yaml.Node {
		if n.Kind == yaml.AliasNode {
			total += expandedSize(n.Alias, sizes)
			if total > maxAliasNodes {
				return n
			}
			return nil
		}
		for _, c := range n.Content {
			if bad := walk(c); bad != nil {
				return bad
			}
		}
		return nil
	}
	if bad := walk(doc); bad != nil {
		return &FieldError{Line: bad.Line, Msg: fmt.Sprintf("alias *%s: aliases expand to more than %d values in all; "+
			"refusing the file (excessive aliasing, a \"billion laughs\"?)", bad.Value, maxAliasNodes)}
	}
	return nil
}

// expandedSize is the number of nodes n stands for with its aliases
// expanded, saturating just above maxAliasNodes. sizes memoizes it; a
// node found there as -1 is being sized, so an alias of it is a cycle
// and counts as too many.
func expandedSize(n *yaml.Node, sizes map[*yaml.Node]int) int {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if s, ok := sizes[n]; ok {
		if s < 0 {
			return maxAliasNodes + 1
		}
		return s
	}
	sizes[n] = -1
	s := 1
	for _, c := range n.Content {
		s = min(s+expandedSize(c, sizes), maxAliasNodes+1)
	}
	sizes[n] = s
	return s
}

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

// decode fills v (addressable) from n.
func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if d.stopped {
		return
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return // "key:" with no value keeps the zero value
	}
	// Types with their own UnmarshalYAML (Duration, Size) and plain
	// scalars are decoded by yaml.v3 itself; their errors get our path.
	if v.CanAddr() && v.Addr().Type().Implements(unmarshalerType) {
		d.leaf(n, v, path)
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.decode(n, v.Elem(), path)
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			d.errorf(n, path, "want a mapping (key: value lines), got %s", kindName(n))
			return
		}
		fields := map[string]reflect.Value{}
		collectFields(v, fields)
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			p := join(path, k.Value)
			f, ok := fields[k.Value]
			switch {
			case !ok:
				d.errorf(k, p, "unknown field")
				continue
			case seen[k.Value]:
				d.errorf(k, p, "field given twice")
				continue
			}
			seen[k.Value] = true
			d.lines[p] = k.Line
			d.decode(val, f, p)
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 || n.Kind != yaml.SequenceNode {
			if n.Kind == yaml.SequenceNode || n.Kind == yaml.ScalarNode {
				d.leaf(n, v, path)
				return
			}
			d.errorf(n, path, "want a list, got %s", kindName(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, item := range n.Content {
			p := path + "[" + strconv.Itoa(i) + "]"
			d.lines[p] = item.Line
			d.decode(item, s.Index(i), p)
		}
		v.Set(s)
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			d.errorf(n, path, "want a mapping, got %s", kindName(n))
			return
		}
		d.leaf(n, v, path)
	default:
		d.leaf(n, v, path)
	}
}

// leaf lets yaml.v3 decode one value and rewrites its error with the path.
func (d *decoder) leaf(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind == yaml.MappingNode && v.Kind() != reflect.Map && v.Kind() != reflect.Struct {
		d.errorf(n, path, "want a single value, got a mapping")
		return
	}
	err := n.Decode(v.Addr().Interface())
	if err == nil {
		return
	}
	msg := err.Error()
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg = te.Errors[0]
	}
	// yaml.v3 prefixes "line N: "; we print the line ourselves.
	if strings.HasPrefix(msg, "line ") {
		if _, rest, ok := strings.Cut(msg, ": "); ok {
			msg = rest
		}
	}
	msg = strings.TrimPrefix(msg, "yaml: ")
	d.errorf(n, path, "%s", msg)
}

// collectFields maps the yaml names of v's fields (following ",inline"
// embedded structs) to the fields.
func collectFields(v reflect.Value, out map[string]reflect.Value) {
	t := v.Type()
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		tag := sf.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if strings.Contains(opts, "inline") {
			fv := v.Field(i)
			if fv.Kind() == reflect.Pointer {
				if fv.IsNil() {
					fv.Set(reflect.New(fv.Type().Elem()))
				}
				fv = fv.Elem()
			}
			collectFields(fv, out)
			continue
		}
		if name == "" {
			name = strings.ToLower(sf.Name)
		}
		out[name] = v.Field(i)
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("%q", n.Value)
	}
	return "something else"
}
