// Command go302 is the floor bench/federation.sh measures the federator
// against: a net/http server whose handler answers every request with a
// fixed 302, so the gap between it and the federator is the federator's
// own work (lookup, ranking, headers), and the gap between it and nginx
// is Go's HTTP server.
//
//	go302 -listen 127.0.0.1:0 -location http://127.0.0.1:9001
//
// It prints "listening ADDR" once it accepts connections.
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "host:port to listen on")
	loc := flag.String("location", "http://127.0.0.1:1", "Location prefix; the request path is appended")
	flag.Parse()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "go302:", err)
		os.Exit(1)
	}
	fmt.Println("listening", ln.Addr())
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Location"] = []string{*loc + r.URL.Path}
		w.WriteHeader(http.StatusFound)
	})
	if err := http.Serve(ln, h); err != nil {
		fmt.Fprintln(os.Stderr, "go302:", err)
		os.Exit(1)
	}
}
