package config

import (
	"errors"
	"strings"
	"testing"
)

// TestSyntaxErrorLine: a YAML syntax error names the line that is wrong.
// yaml.v3 reports the line where the enclosing block started (its
// "context mark"), which for an indentation slip inside an endpoint is
// the "endpoints:" line, far from the mistake.
func TestSyntaxErrorLine(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		line int
	}{
		{"key one space short in a list item", `federation:
  endpoints:
    - name: a
      url: http://h/
     priority: 2
`, 5},
		{"second key one space short", `federation:
  endpoints:
    - name: a
     url: http://h/
`, 4},
		{"list item one space too far", `federation:
  endpoints:
   - name: a
     url: http://h/
    - name: b
`, 5},
		{"key after a comment", `federation:
  endpoints:
    - name: a
      url: http://h/
  # the next key is mis-indented
       priority: 2
`, 6},
		{"key one space too far", `federation:
  endpoints:
    - name: a
       url: http://h/
`, 4},
		{"tab", "federation:\n  endpoints:\n    - name: a\n\turl: http://h/\n", 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml))
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Parse = %v, want a *FieldError", err)
			}
			if fe.Line != tt.line {
				t.Errorf("Parse error %q is at line %d, want line %d", err, fe.Line, tt.line)
			}
			if !strings.HasPrefix(err.Error(), "line ") {
				t.Errorf("Parse error %q does not start with its line", err)
			}
		})
	}
}
