package buffer_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"time"

	"github.com/lakefed/lakefed/internal/buffer"
	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/endpoint/posix"
	"github.com/lakefed/lakefed/internal/testenv"
)

// A PUT under a buffered prefix is acknowledged once it is on the
// buffer's disk and journaled; the mover then copies it to the target
// and verifies it there.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	spool, _ := os.MkdirTemp("", "spool")
	remote, _ := os.MkdirTemp("", "remote")
	defer os.RemoveAll(spool)
	defer os.RemoveAll(remote)
	log := slog.New(slog.DiscardHandler)

	site, _ := posix.New(ctx, endpoint.Config{Name: "site-a", URL: "file://" + remote}, log)
	b, err := buffer.New(ctx, buffer.Config{Dir: spool,
		Prefixes: []buffer.Prefix{{Prefix: "/store/user", Targets: []endpoint.Endpoint{site}}}},
		buffer.Options{Log: log})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()
	srv := httptest.NewServer(b.Wrap(http.NotFoundHandler()))
	defer srv.Close()

	req, _ := http.NewRequest(http.MethodPut, srv.URL+"/store/user/out.root", bytes.NewReader([]byte("event data")))
	resp, _ := http.DefaultClient.Do(req)
	resp.Body.Close()
	fmt.Println(resp.Status, resp.Header.Get("Digest"))

	go b.Run(ctx)
	testenv.Within(10*time.Second, func() bool { return b.Status().PendingFiles == 0 })
	data, _ := os.ReadFile(remote + "/store/user/out.root")
	fmt.Printf("on site-a: %s\n", data)
	// Output:
	// 201 Created adler32=15a003dd
	// on site-a: event data
}
