package auth_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/auth"
	"github.com/lakefed/lakefed/internal/auth/authtest"
)

// Identify is Middleware's token check for protocols without headers
// (the root:// door's authz= CGI): "" is anonymous, a valid token its
// holder with its scopes, anything else an error wrapping
// ErrInvalidToken.
func TestIdentify(t *testing.T) {
	is := authtest.NewIssuer(t)
	a, err := auth.New(context.Background(), auth.Config{Issuers: []auth.Issuer{{URL: is.URL}}},
		auth.Options{Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx := context.Background()

	id, err := a.Identify(ctx, "")
	if err != nil || id.Kind != auth.Anonymous {
		t.Errorf("Identify(\"\") = %v, %v; want anonymous", id, err)
	}
	tok := is.Token(t, "storage.read:/data", time.Hour)
	id, err = a.Identify(ctx, tok)
	if err != nil || id.Kind != auth.Token || id.Name != is.URL+"/"+is.Subject || id.Token != tok {
		t.Fatalf("Identify(valid) = %+v, %v", id, err)
	}
	if a.Allow(ctx, id, auth.Read, "/data/f") != nil || a.Allow(ctx, id, auth.Read, "/other") == nil {
		t.Error("the identity's scopes are not storage.read:/data")
	}
	for name, bad := range map[string]string{
		"expired":  is.Token(t, "storage.read:/data", -time.Hour),
		"garbage":  "not a token",
		"tampered": tok[:len(tok)-6] + "AAAAAA",
		"too long": strings.Repeat("a", 17<<10),
	} {
		if id, err := a.Identify(ctx, bad); !errors.Is(err, auth.ErrInvalidToken) || id.Kind != auth.Anonymous || id.Name != "" {
			t.Errorf("Identify(%s) = %+v, %v; want ErrInvalidToken", name, id, err)
		}
	}
}
