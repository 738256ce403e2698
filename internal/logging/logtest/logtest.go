// Package logtest reads back the log lines logging.New writes, in either
// format, so that tests can check a line's keys without caring which
// format wrote it.
//
//	var buf bytes.Buffer
//	log, _ := logging.New(&buf, format, nil)
//	// ... serve a request ...
//	line, ok := logtest.Find(buf.String(), "request_id", id)
//	if !ok || line["msg"] != "request" { t.Errorf(...) }
package logtest

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Line is one log line, its values as strings (JSON numbers and booleans
// as they were written), keyed as written: nested groups are not split.
type Line map[string]string

// Parse reads every line of log: JSON objects or slog's key=value text.
// A line of neither shape is an error, so that a test notices a line that
// is not what a log collector could read.
func Parse(log string) ([]Line, error) {
	var out []Line
	for _, l := range strings.Split(strings.TrimSuffix(log, "\n"), "\n") {
		if l == "" {
			continue
		}
		var line Line
		var err error
		if strings.HasPrefix(l, "{") {
			line, err = parseJSON(l)
		} else {
			line, err = parseText(l)
		}
		if err != nil {
			return nil, fmt.Errorf("log line %q: %w", l, err)
		}
		out = append(out, line)
	}
	return out, nil
}

// Find returns the first line of log whose key has value. It skips lines
// it cannot parse: Parse says whether there were any.
func Find(log, key, value string) (Line, bool) {
	for _, l := range strings.Split(log, "\n") {
		lines, err := Parse(l)
		if err == nil && len(lines) == 1 && lines[0][key] == value {
			return lines[0], true
		}
	}
	return nil, false
}

func parseJSON(l string) (Line, error) {
	var m map[string]any
	if err := json.Unmarshal([]byte(l), &m); err != nil {
		return nil, err
	}
	line := Line{}
	for k, v := range m {
		if s, ok := v.(string); ok {
			line[k] = s
		} else {
			b, _ := json.Marshal(v)
			line[k] = string(b)
		}
	}
	return line, nil
}

// parseText reads slog.TextHandler's key=value pairs, a value quoted (Go
// syntax) when it holds spaces, quotes or other special characters.
func parseText(l string) (Line, error) {
	line := Line{}
	for l = strings.TrimLeft(l, " "); l != ""; l = strings.TrimLeft(l, " ") {
		k, rest, ok := strings.Cut(l, "=")
		if !ok || k == "" || strings.ContainsAny(k, " \"") {
			return nil, fmt.Errorf("want key=value at %q", l)
		}
		var v string
		if strings.HasPrefix(rest, `"`) {
			q, err := strconv.QuotedPrefix(rest)
			if err != nil {
				return nil, fmt.Errorf("key %s: %w", k, err)
			}
			v, _ = strconv.Unquote(q)
			rest = rest[len(q):]
		} else {
			v, rest, _ = strings.Cut(rest, " ")
			rest = " " + rest
		}
		line[k] = v
		l = rest
	}
	return line, nil
}
