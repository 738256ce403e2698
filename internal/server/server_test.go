package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/config"
)

var quiet = slog.New(slog.DiscardHandler)

// TestStorageConfigFields: every field of the YAML shape reaches the
// storage role, and every field of the role has a YAML key, so that a
// field added on one side only fails here rather than being ignored.
func TestStorageConfigFields(t *testing.T) {
	var c config.Storage
	v := reflect.ValueOf(&c).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString("x")
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Int, reflect.Int64:
			f.SetInt(7)
		default:
			t.Fatalf("config.Storage.%s: kind %s not handled by this test", v.Type().Field(i).Name, f.Kind())
		}
	}
	sc := reflect.ValueOf(storageConfig(c))
	for i := range sc.NumField() {
		name := sc.Type().Field(i).Name
		if sc.Field(i).IsZero() {
			t.Errorf("storage.Config.%s is not set from config.Storage", name)
		}
		if _, ok := v.Type().FieldByName(name); !ok {
			t.Errorf("storage.Config.%s has no field in config.Storage (no YAML key)", name)
		}
	}
	// Fields Site applies itself before the role starts.
	siteOnly := map[string]bool{"CreateRoot": true}
	n := 0
	for i := range v.NumField() {
		if name := v.Type().Field(i).Name; !siteOnly[name] {
			n++
		} else if _, ok := sc.Type().FieldByName(name); ok {
			t.Errorf("config.Storage.%s is both Site's and storage.Config's", name)
		}
	}
	if n != sc.NumField() {
		t.Errorf("config.Storage has %d fields for the role, storage.Config %d", n, sc.NumField())
	}
}

// writeConfig writes a config file with a federator on a free port in
// front of the given endpoint lines.
func writeConfig(t *testing.T, path, listen, endpoints string) {
	t.Helper()
	y := "listen: " + listen + "\nfederation:\n  health: {interval: 1h}\n  endpoints:\n" + endpoints
	if err := os.WriteFile(path, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestReload: Reload applies a changed endpoint list to the running
// federator and names the settings that take effect only on restart; the
// old listener keeps serving.
func TestReload(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "lakefed.yaml")
	const a = "    - {name: a, url: 'http://127.0.0.1:1/'}\n"
	writeConfig(t, path, "127.0.0.1:0", a)
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	srv, err := Start(t.Context(), cfg, Options{ConfigPath: path, ResultsPath: filepath.Join(dir, "r.db"), Log: quiet, Out: &out})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if !strings.HasPrefix(out.String(), "federator "+srv.FederatorURL()+"/ over 1 endpoints") {
		t.Errorf("Out = %q, want the federator line", out.String())
	}
	writeConfig(t, path, "127.0.0.1:1", a+"    - {name: b, url: 'http://127.0.0.1:2/'}\n")
	restart, err := srv.Reload(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(restart) != 1 || restart[0] != "listen changed from 127.0.0.1:0 to 127.0.0.1:1" {
		t.Errorf("Reload = %q, want the listen change", restart)
	}
	if eps := srv.Federator().Endpoints(); len(eps) != 2 {
		t.Errorf("after Reload %d endpoints, want 2", len(eps))
	}
	resp, err := http.Get(srv.FederatorURL() + "/api/endpoints")
	if err != nil {
		t.Fatalf("the old listener stopped serving: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `"name": "b"`) {
		t.Errorf("/api/endpoints = %s, want b", b)
	}

	if err := os.WriteFile(path, []byte("storage: [{listen: '127.0.0.1:0', root: '"+dir+"'}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Reload(t.Context()); err == nil || !strings.Contains(err.Error(), "federation section is gone") {
		t.Errorf("Reload into no federation = %v, want an error", err)
	}
	if eps := srv.Federator().Endpoints(); len(eps) != 2 {
		t.Errorf("after a failed Reload %d endpoints, want the 2 kept", len(eps))
	}
}

// TestStorageOnly: a config of storage servers only runs them, prints
// their lines, has nothing to reload, and Close frees their ports.
func TestStorageOnly(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "f"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := &config.Config{Storage: []config.Storage{{Listen: "127.0.0.1:0", Root: root}}}
	var out strings.Builder
	srv, err := Start(t.Context(), cfg, Options{Log: quiet, Out: &out})
	if err != nil {
		t.Fatal(err)
	}
	site := srv.Sites()[0]
	if want := "storage " + site.URL + " serving " + root + "\n"; out.String() != want {
		t.Errorf("Out = %q, want %q", out.String(), want)
	}
	if srv.Federator() != nil || srv.Store() != nil || srv.FederatorURL() != "" {
		t.Errorf("a storage-only config started a federator or a store")
	}
	if _, err := srv.Reload(t.Context()); !errors.Is(err, ErrNoFederator) {
		t.Errorf("Reload = %v, want ErrNoFederator", err)
	}
	resp, err := http.Get(site.URL + "f")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "hello" {
		t.Errorf("GET f = %q", b)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	if c, err := net.DialTimeout("tcp", strings.TrimSuffix(strings.TrimPrefix(site.URL, "http://"), "/"), time.Second); err == nil {
		c.Close()
		t.Errorf("the storage port still accepts after Close")
	}
}

// TestStartFailureLeavesNothing: when a later role fails to start, the
// roles already started are stopped and every handed-over listener is
// closed, taken or not.
func TestStartFailureLeavesNothing(t *testing.T) {
	good, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	spare, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := &config.Config{Storage: []config.Storage{
		{Listen: good.Addr().String(), Root: t.TempDir()},
		{Listen: "127.0.0.1:0", Root: filepath.Join(t.TempDir(), "missing")},
	}}
	_, err = Start(t.Context(), cfg, Options{Log: quiet, Listeners: map[string]net.Listener{
		good.Addr().String(): good, spare.Addr().String(): spare}})
	if err == nil || !strings.Contains(err.Error(), "root") {
		t.Fatalf("Start with a missing root = %v, want the root error", err)
	}
	for _, ln := range []net.Listener{good, spare} {
		if c, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
			c.Close()
			t.Errorf("%s still accepts after a failed Start", ln.Addr())
		}
	}
}

// TestStartCancelled: a context cancelled before Start starts nothing.
func TestStartCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	cfg := &config.Config{Storage: []config.Storage{{Listen: "127.0.0.1:0", Root: t.TempDir()}}}
	if _, err := Start(ctx, cfg, Options{Log: quiet}); !errors.Is(err, context.Canceled) {
		t.Errorf("Start = %v, want context.Canceled", err)
	}
}

// TestStartCreateRoot: a storage entry with create_root makes its missing
// root (and parents) on start; without it a missing root is still an
// error.
func TestStartCreateRoot(t *testing.T) {
	tests := []struct {
		name    string
		create  bool
		wantErr bool
	}{
		{"create_root", true, false},
		{"without create_root", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "a", "site")
			cfg := &config.Config{Storage: []config.Storage{{Listen: "127.0.0.1:0", Root: root, CreateRoot: tt.create}}}
			srv, err := Start(t.Context(), cfg, Options{Log: quiet})
			if (err != nil) != tt.wantErr {
				t.Fatalf("Start = %v, want error %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			defer srv.Close()
			if st, err := os.Stat(root); err != nil || !st.IsDir() {
				t.Fatalf("root after Start: %v", err)
			}
		})
	}
}
