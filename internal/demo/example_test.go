package demo_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/lakefed/lakefed/internal/demo"
)

// ExampleStart runs the demo on a free port and reads a replicated file
// through the federator: a 302 to the best site, then the bytes from it.
func ExampleStart() {
	d, err := demo.Start(context.Background(), demo.Options{Listen: "127.0.0.1:0", Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Stop()

	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(d.FederatorURL + "/demo/README.txt")
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	loc := resp.Header.Get("Location")
	fmt.Println(resp.Status, "to site-a:", loc == d.SiteURLs()["site-a"]+"demo/README.txt")

	resp, err = http.Get(loc)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(strings.SplitN(string(body), "\n", 2)[0])
	// Output:
	// 302 Found to site-a: true
	// This file is served by lakefed demo: a federator in front of three storage
}
