package web

import (
	"net/http"
	"strings"
)

// Front is what a federator's listener serves: ui at /ui and below it,
// namespace everywhere else (so a file named /ui in the federated
// namespace is shadowed). ui nil: namespace gets every path.
//
// It is a prefix test, not an http.ServeMux: the namespace keeps its own
// path handling (a ServeMux would answer "/a/../b" or "//a" with a redirect
// before the federator could refuse or clean it), and the test costs
// nothing on the redirect path, where the mux's matching was a few percent
// of the CPU.
func Front(namespace, ui http.Handler) http.Handler {
	if ui == nil {
		return namespace
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if IsUIPath(r.URL.Path) {
			ui.ServeHTTP(w, r)
			return
		}
		namespace.ServeHTTP(w, r)
	})
}

// IsUIPath reports whether Front gives p to the dashboard (when there is
// one) rather than to the namespace.
func IsUIPath(p string) bool { return p == "/ui" || strings.HasPrefix(p, "/ui/") }
