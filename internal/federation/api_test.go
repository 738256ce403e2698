package federation

import (
	"encoding/json"
	"testing"
)

// TestAPIEndpointKind: /api/endpoints reports each endpoint's kind from
// the scheme table (http, s3, xroot, posix, upstream), not "local" for
// every endpoint that is not an upstream.
func TestAPIEndpointKind(t *testing.T) {
	cases := []struct {
		name, url, extra, want string
	}{
		{"web", "http://web.example/", "", "http"},
		{"dav", "davs://dav.example/", "", "http"},
		{"cloud", "s3://bucket/data", "s3: {region: us-east-1, endpoint: 'http://127.0.0.1:9'}", "s3"},
		{"xrd", "root://xrd.example:1094//data", "", "xroot"},
		{"disk", "file:///srv/data", "", "posix"},
		{"up", "lakefed://up.example/", "", "upstream"},
		{"up-http", "http://up2.example/", "kind: upstream", "upstream"},
	}
	var eps []string
	var fakes []*fakeEP
	for _, c := range cases {
		eps = append(eps, "name: "+c.name+"\nurl: "+c.url+"\nmode: proxy\n"+c.extra)
		fakes = append(fakes, newFake(c.name, false))
	}
	tf := startFed(t, cfgYAML(slowHealth, eps...), fakes...)
	resp, body := tf.do(t, "GET", "/api/endpoints", nil, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("GET /api/endpoints = %d %s", resp.StatusCode, body)
	}
	var got []EndpointStatus
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatalf("GET /api/endpoints: %v in %s", err, body)
	}
	kinds := map[string]string{}
	for _, e := range got {
		kinds[e.Name] = e.Kind
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if kinds[c.name] != c.want {
				t.Errorf("/api/endpoints kind of %s (%s) = %q, want %q", c.name, c.url, kinds[c.name], c.want)
			}
		})
	}
}
