package config

import (
	"fmt"
	"reflect"
	"strings"
)

// RestartChanges returns the settings that differ between the running
// config old and a reloaded config new but are read only when lakefed
// serve starts: the federator's listen address, the log's format, the
// access log of the federator's listener, every storage server
// (listen, root, TLS files, ...: storage servers are not restarted by a
// reload) and the tests section (the scheduler and its database are built
// once). Each is one phrase, "listen changed from A to B". Nil: none.
// The federation section is reloaded and is not compared.
func RestartChanges(old, new *Config) []string {
	var out []string
	if old.Listen != new.Listen {
		out = append(out, fmt.Sprintf("listen changed from %s to %s", show(old.Listen), show(new.Listen)))
	}
	if old.LogFormat != new.LogFormat {
		out = append(out, fmt.Sprintf("log_format changed from %s to %s", show(old.LogFormat), show(new.LogFormat)))
	}
	if old.AccessLog != new.AccessLog {
		out = append(out, fmt.Sprintf("access_log changed from %v to %v", old.AccessLog, new.AccessLog))
	}
	if len(old.Storage) != len(new.Storage) {
		out = append(out, fmt.Sprintf("storage changed from %d servers to %d", len(old.Storage), len(new.Storage)))
	}
	for i := range min(len(old.Storage), len(new.Storage)) {
		out = diffFields(out, fmt.Sprintf("storage[%d]", i), reflect.ValueOf(old.Storage[i]), reflect.ValueOf(new.Storage[i]))
	}
	switch {
	case old.Tests == nil && new.Tests != nil:
		out = append(out, "tests section added")
	case old.Tests != nil && new.Tests == nil:
		out = append(out, "tests section removed")
	case old.Tests != nil:
		out = diffFields(out, "tests", reflect.ValueOf(*old.Tests), reflect.ValueOf(*new.Tests))
	}
	return out
}

// ReloadStatus is the one-line outcome of a reload that applied, naming
// each change that takes effect only on restart: "reloaded", or
// "reloaded; listen changed from A to B: takes effect on restart".
func ReloadStatus(restart []string) string {
	var b strings.Builder
	b.WriteString("reloaded")
	for _, c := range restart {
		b.WriteString("; ")
		b.WriteString(c)
		b.WriteString(": takes effect on restart")
	}
	return b.String()
}

// diffFields appends "path.field changed from A to B" for every
// yaml-named field of the structs a and b (of one type) that differs.
// Nested structs, slices and maps are compared whole.
func diffFields(out []string, path string, a, b reflect.Value) []string {
	t := a.Type()
	for i := range t.NumField() {
		sf := t.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
		if !sf.IsExported() || name == "" || name == "-" {
			continue
		}
		x, y := a.Field(i).Interface(), b.Field(i).Interface()
		if !reflect.DeepEqual(x, y) {
			out = append(out, fmt.Sprintf("%s.%s changed from %s to %s", path, name, show(x), show(y)))
		}
	}
	return out
}

func show(v any) string {
	s := fmt.Sprint(v)
	if s == "" {
		return `""`
	}
	return s
}
