package federation

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/lakefed/lakefed/internal/auth"
	"github.com/lakefed/lakefed/internal/config"
)

const reloadYAML = "federation:\n  endpoints: [{name: site-a, url: 'http://site-a.example/'}]\n"

// startReloadFed serves a federator whose reloads re-apply cfg (with
// restart the settings a reload reports as needing a restart) and count
// in calls.
func startReloadFed(t *testing.T, yamlText string, restart []string, calls *atomic.Int32) *testFed {
	t.Helper()
	tf := startFed(t, yamlText, newFake("site-a", true))
	cfg, err := config.Parse([]byte(yamlText))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Federation.RestartNeeded = restart
	tf.opts.Reload = func(context.Context) (*config.Federation, error) {
		calls.Add(1)
		return cfg.Federation, nil
	}
	return tf
}

// TestReloadRefusesCrossSite: POST /api/reload is refused when a web
// page could have forged it: another Origin (or Referer), a content type
// a form or a simple fetch can send. A same-host request with the JSON
// content type (curl -H 'Content-Type: application/json') goes through.
func TestReloadRefusesCrossSite(t *testing.T) {
	var calls atomic.Int32
	tf := startReloadFed(t, reloadYAML, nil, &calls)
	self := tf.srv.URL // http://127.0.0.1:PORT
	tests := []struct {
		name string
		hdr  map[string]string
		want int
	}{
		{"curl with json", map[string]string{"Content-Type": "application/json"}, 200},
		{"same origin json", map[string]string{"Origin": self, "Content-Type": "application/json; charset=utf-8"}, 200},
		{"same referer json", map[string]string{"Referer": self + "/ui/", "Content-Type": "application/json"}, 200},
		{"evil origin text/plain", map[string]string{"Origin": "http://evil.example", "Content-Type": "text/plain"}, 403},
		{"evil origin json", map[string]string{"Origin": "http://evil.example", "Content-Type": "application/json"}, 403},
		{"evil origin same port other host", map[string]string{"Origin": strings.Replace(self, "127.0.0.1", "localhost.evil.example", 1), "Content-Type": "application/json"}, 403},
		{"null origin", map[string]string{"Origin": "null", "Content-Type": "application/json"}, 403},
		{"evil referer", map[string]string{"Referer": "http://evil.example/page", "Content-Type": "application/json"}, 403},
		{"same origin text/plain", map[string]string{"Origin": self, "Content-Type": "text/plain"}, 415},
		{"form post", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 415},
		{"no content type", nil, 415},
		{"rebound name", map[string]string{"Host": "evil.example", "Origin": "http://evil.example", "Content-Type": "application/json"}, 403},
		{"localhost", map[string]string{"Host": "localhost", "Origin": "http://localhost", "Content-Type": "application/json"}, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := calls.Load()
			code, body := postReload(t, tf.srv.URL, tt.hdr)
			if code != tt.want {
				t.Fatalf("POST /api/reload %v = %d %s, want %d", tt.hdr, code, body, tt.want)
			}
			if reloaded := calls.Load() != before; reloaded != (tt.want == 200) {
				t.Errorf("POST /api/reload %v: config re-read = %v, want %v", tt.hdr, reloaded, tt.want == 200)
			}
		})
	}
}

// postReload posts "{}" to base/api/reload with the headers hdr ("Host"
// sets the request's Host) and returns the status and body.
func postReload(t *testing.T, base string, hdr map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("POST", base+"/api/reload", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestReloadRemoteClient: a client on another host may reload only as
// an admin (a token with the admin scope, or an identity
// federation.admin names); a loopback client may without credentials
// unless federation.admin.allow_loopback is false; a read-only token is
// no admin.
func TestReloadRemoteClient(t *testing.T) {
	adminTok := &auth.Identity{Kind: auth.Token, Name: "https://iss/ops", Others: []string{"openid", "lakefed.admin"}}
	readTok := &auth.Identity{Kind: auth.Token, Name: "https://iss/reader", Others: []string{"openid"}}
	namedDN := &auth.Identity{Kind: auth.X509, Name: "/O=lakefed test/CN=Ops"}
	tests := []struct {
		name   string
		yaml   string
		remote string
		id     *auth.Identity
		want   int
	}{
		{"loopback v4", reloadYAML, "127.0.0.1:40000", nil, 200},
		{"loopback v6", reloadYAML, "[::1]:40000", nil, 200},
		{"remote refused by default", reloadYAML, "192.0.2.7:40000", nil, 403},
		{"remote with the admin scope", reloadYAML, "192.0.2.7:40000", adminTok, 200},
		{"remote with a read-only token", reloadYAML, "192.0.2.7:40000", readTok, 403},
		{"remote admin DN", reloadYAML + "  admin: {identities: [\"/O=lakefed test/CN=Ops\"]}\nauth: {rules: [{prefix: /pub, anonymous: [read]}]}\n", "192.0.2.7:40000", namedDN, 200},
		{"remote DN not listed", reloadYAML, "192.0.2.7:40000", namedDN, 403},
		{"loopback without credentials, loopback not allowed", reloadYAML + "  admin: {allow_loopback: false}\n", "127.0.0.1:40000", nil, 403},
		{"loopback admin, loopback not allowed", reloadYAML + "  admin: {allow_loopback: false}\n", "127.0.0.1:40000", adminTok, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int32
			tf := startReloadFed(t, tt.yaml, nil, &calls)
			req := httptest.NewRequest("POST", "http://127.0.0.1:8080/api/reload", strings.NewReader("{}"))
			req.Header.Set("Content-Type", "application/json")
			req.RemoteAddr = tt.remote
			if tt.id != nil {
				req = req.WithContext(auth.WithIdentity(req.Context(), *tt.id))
			}
			rec := httptest.NewRecorder()
			tf.Handler().ServeHTTP(rec, req)
			if rec.Code != tt.want {
				t.Errorf("POST /api/reload from %s = %d %s, want %d", tt.remote, rec.Code, rec.Body, tt.want)
			}
			if got, want := calls.Load(), int32(0); tt.want != 200 && got != want {
				t.Errorf("refused reload re-read the config %d times", got)
			}
		})
	}
}

// TestReloadReportsRestartNeeded: a reload whose file changed settings
// read only at start applies the rest and says which need a restart.
func TestReloadReportsRestartNeeded(t *testing.T) {
	tests := []struct {
		name    string
		restart []string
		status  string
	}{
		{"nothing", nil, "reloaded"},
		{"listen", []string{"listen changed from 127.0.0.1:8080 to 127.0.0.1:9090"},
			"reloaded; listen changed from 127.0.0.1:8080 to 127.0.0.1:9090: takes effect on restart"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int32
			tf := startReloadFed(t, reloadYAML, tt.restart, &calls)
			resp, body := tf.do(t, "POST", "/api/reload", http.Header{"Content-Type": {"application/json"}}, nil)
			if resp.StatusCode != 200 {
				t.Fatalf("POST /api/reload = %d %s", resp.StatusCode, body)
			}
			var ans ReloadAnswer
			if err := json.Unmarshal([]byte(body), &ans); err != nil {
				t.Fatalf("reload answer %q: %v", body, err)
			}
			if ans.Status != tt.status || len(ans.RestartNeeded) != len(tt.restart) || len(ans.Endpoints) != 1 {
				t.Errorf("reload answer = %+v, want status %q, %d restart items and 1 endpoint", ans, tt.status, len(tt.restart))
			}
		})
	}
}
