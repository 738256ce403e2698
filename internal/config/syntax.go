package config

import (
	"bytes"
	"fmt"
	"regexp"
	"sort"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// yamlErrRE splits yaml.v3's "yaml: line N: message".
var yamlErrRE = regexp.MustCompile(`^yaml: line ([0-9]+): (.*)$`)

// syntaxError turns a yaml.v3 syntax error in data into a *FieldError at
// the line that is wrong. yaml.v3 reports a parser error at its context
// mark, the line where the enclosing block began, when it has one: a key
// indented one space short inside a list item is reported at the
// "endpoints:" line above, however far up it is. The wrong line is the
// first whose inclusion makes the text fail to parse: a prefix of a YAML
// document that ends before a mistake parses, as every open block closes
// at the end of the text. It is found by bisection, in O(log lines)
// parses.
func syntaxError(data []byte, err error) error {
	m := yamlErrRE.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	reported, _ := strconv.Atoi(m[1])
	msg := m[2]
	ends := lineEnds(data)
	// The first prefix of k lines that fails; the whole text fails.
	k := sort.Search(len(ends), func(i int) bool {
		var n yaml.Node
		return yaml.Unmarshal(data[:ends[i]], &n) != nil
	}) + 1
	if k > len(ends) || k == reported {
		return &FieldError{Line: reported, Msg: msg}
	}
	if k > reported {
		msg += fmt.Sprintf(" (in the block that starts at line %d: check this line's indentation)", reported)
	}
	return &FieldError{Line: k, Msg: msg}
}

// lineEnds returns the offset just past each line of data.
func lineEnds(data []byte) []int {
	var ends []int
	for off := 0; off < len(data); {
		i := bytes.IndexByte(data[off:], '\n')
		if i < 0 {
			ends = append(ends, len(data))
			break
		}
		off += i + 1
		ends = append(ends, off)
	}
	return ends
}
