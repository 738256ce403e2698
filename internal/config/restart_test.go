package config

import (
	"slices"
	"testing"
)

// TestRestartChanges: the settings lakefed serve reads only at start are
// named when a reloaded file changes them; federation settings, which a
// reload applies, are not.
func TestRestartChanges(t *testing.T) {
	const base = "listen: 127.0.0.1:8080\nstorage:\n  - {listen: '127.0.0.1:9001', root: /srv/a}\n" +
		"federation:\n  endpoints: [{name: a, url: 'http://127.0.0.1:9001/'}]\n"
	tests := []struct {
		name string
		new  string
		want []string
	}{
		{"same", base, nil},
		{"federation only", "listen: 127.0.0.1:8080\nstorage:\n  - {listen: '127.0.0.1:9001', root: /srv/a}\n" +
			"federation:\n  mode: proxy\n  endpoints: [{name: b, url: 'http://127.0.0.1:9002/'}]\n", nil},
		{"listen", "listen: 127.0.0.1:9090\nstorage:\n  - {listen: '127.0.0.1:9001', root: /srv/a}\n" +
			"federation:\n  endpoints: [{name: a, url: 'http://127.0.0.1:9001/'}]\n",
			[]string{"listen changed from 127.0.0.1:8080 to 127.0.0.1:9090"}},
		{"storage root and tls", "listen: 127.0.0.1:8080\nstorage:\n  - {listen: '127.0.0.1:9001', root: /srv/b, tls_cert: c.pem, tls_key: k.pem}\n" +
			"federation:\n  endpoints: [{name: a, url: 'http://127.0.0.1:9001/'}]\n",
			[]string{"storage[0].root changed from /srv/a to /srv/b", `storage[0].tls_cert changed from "" to c.pem`,
				`storage[0].tls_key changed from "" to k.pem`}},
		{"log format and access log", "log_format: json\naccess_log: true\n" + base,
			[]string{"log_format changed from text to json", "access_log changed from false to true"}},
		{"storage added and tests added", "listen: 127.0.0.1:8080\nstorage:\n  - {listen: '127.0.0.1:9001', root: /srv/a}\n" +
			"  - {listen: '127.0.0.1:9002', root: /srv/c}\n" +
			"federation:\n  endpoints: [{name: a, url: 'http://127.0.0.1:9001/'}]\ntests: {interval: 30s}\n",
			[]string{"storage changed from 1 servers to 2", "tests section added"}},
	}
	old, err := Parse([]byte(base))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.new))
			if err != nil {
				t.Fatal(err)
			}
			if got := RestartChanges(old, c); !slices.Equal(got, tt.want) {
				t.Errorf("RestartChanges = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestReloadStatus(t *testing.T) {
	tests := []struct {
		in   []string
		want string
	}{
		{nil, "reloaded"},
		{[]string{"listen changed from a to b"}, "reloaded; listen changed from a to b: takes effect on restart"},
		{[]string{"x", "y"}, "reloaded; x: takes effect on restart; y: takes effect on restart"},
	}
	for _, tt := range tests {
		if got := ReloadStatus(tt.in); got != tt.want {
			t.Errorf("ReloadStatus(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
