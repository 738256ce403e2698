package auth_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"

	"github.com/lakefed/lakefed/internal/auth"
)

// A storage role behind the middleware: /public is open for reading,
// everything else needs a credential.
func ExampleAuthorizer_Middleware() {
	a, err := auth.New(context.Background(), auth.Config{
		Rules: []auth.Rule{
			{Prefix: "/public", Anonymous: []auth.Action{auth.Read, auth.List}},
			{Prefix: "/store/user", Groups: []string{"/cms"}, Allow: []auth.Action{auth.Read, auth.List, auth.Create}},
		},
	}, auth.Options{Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.Close()
	files := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, _ := auth.IdentityFrom(r.Context())
		fmt.Fprintf(w, "hello %s", id)
	})
	h := a.Middleware(files, nil)
	for _, p := range []string{"/public/readme", "/store/user/f"} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", p, nil))
		fmt.Printf("%s %d %q\n", p, w.Code, w.Header().Get("WWW-Authenticate"))
	}
	cms := auth.Identity{Kind: auth.Token, Name: "https://cms-auth.example/alice", Groups: []string{"/cms"}}
	fmt.Println(a.Allow(context.Background(), cms, auth.Create, "/store/user/alice/f"))
	fmt.Println(a.Allow(context.Background(), cms, auth.Delete, "/store/user/alice/f"))
	// Output:
	// /public/readme 200 ""
	// /store/user/f 401 "Bearer realm=\"lakefed\""
	// <nil>
	// auth: not allowed: token:https://cms-auth.example/alice may not delete /store/user/alice/f
}
