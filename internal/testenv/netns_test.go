package testenv_test

import (
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/testenv"
)

// TestNetNSCutAnswersNothing: a server in the namespace, on a port below
// the ephemeral range (as FreePort gives), is reached over the link;
// while the link is cut a connection to it is neither made nor answered
// by anyone else (the host's default route would have taken it
// elsewhere); after Heal it is reached again.
func TestNetNSCutAnswersNothing(t *testing.T) {
	ns := testenv.NewNetNS(t)
	port := testenv.FreePort(t)
	if port >= 32768 {
		t.Fatalf("FreePort = %d, want a port below the ephemeral range", port)
	}
	srv := ns.Command("python3", "-m", "http.server", "--bind", ns.Inner, strconv.Itoa(port))
	if err := srv.Start(); err != nil {
		testenv.Missing(t, "python3: "+err.Error())
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	url := "http://" + net.JoinHostPort(ns.Inner, strconv.Itoa(port)) + "/"
	client := &http.Client{Timeout: 500 * time.Millisecond}
	reached := func() bool {
		resp, err := client.Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	testenv.Eventually(t, 10*time.Second, "the server in the namespace answers over the link", reached)

	ns.Cut(t)
	c, err := net.DialTimeout("tcp", net.JoinHostPort(ns.Inner, strconv.Itoa(port)), time.Second)
	if err == nil {
		c.Close()
		t.Fatalf("a connection to %s was made with the link cut", url)
	}
	if resp, err := client.Get(url); err == nil {
		resp.Body.Close()
		t.Fatalf("GET %s with the link cut = %d, want no answer", url, resp.StatusCode)
	}

	ns.Heal(t)
	testenv.Eventually(t, 10*time.Second, "the server in the namespace answers again after Heal", reached)
}
