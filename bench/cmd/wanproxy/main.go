// Command wanproxy puts a wide-area link on loopback: a TCP proxy that
// delays and throttles what passes through it, so a benchmark can show
// what a cache or a write buffer saves when its origin is far away
// (bench/cache.sh: 5 ms between the cache and its origin; bench/buffer.sh:
// 20 ms and 50 MB/s both ways, for uploads).
//
//	wanproxy -upstream 127.0.0.1:9001 -latency 5ms
//	wanproxy -upstream 127.0.0.1:9001 -latency 20ms -bandwidth 50 -up-bandwidth 50
//
// It is toxiproxy (github.com/Shopify/toxiproxy/v2) used as a library,
// without its HTTP API: one proxy, with a latency toxic and optionally a
// bandwidth toxic on the downstream direction (upstream → client). The
// latency toxic holds every chunk until it is -latency old, so a request
// and its answer take -latency longer (the round trip grows by
// -latency), while a stream still flows at full rate once it is going,
// as on a real long fat link. -up-latency adds delay to the client →
// upstream direction too, for a symmetric split of the round trip, and
// -up-bandwidth throttles that direction, which is the one an upload
// (a PUT's body) takes. Both bandwidth toxics act per TCP connection, as
// toxiproxy's do: n parallel streams get n times the rate.
//
// It prints "listening ADDR" once it accepts connections and runs until
// SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// errUsage marks a bad flag: exit status 2, as the flag package uses.
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "wanproxy:", err)
		if errors.Is(err, errUsage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("wanproxy", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:0", "host:port to listen on")
	upstream := fs.String("upstream", "", "host:port to forward to (required)")
	latency := fs.Duration("latency", 0, "delay added to the upstream → client direction (the round trip grows by this much)")
	upLatency := fs.Duration("up-latency", 0, "delay added to the client → upstream direction")
	jitter := fs.Duration("jitter", 0, "± random variation of -latency")
	bandwidth := fs.Float64("bandwidth", 0, "upstream → client rate limit in MB/s (10^6 bytes; 0: none)")
	upBandwidth := fs.Float64("up-bandwidth", 0, "client → upstream rate limit in MB/s, what uploads see (10^6 bytes; 0: none)")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if *upstream == "" || fs.NArg() > 0 {
		return fmt.Errorf("%w: -upstream host:port is required and there are no arguments", errUsage)
	}
	if *latency < 0 || *upLatency < 0 || *jitter < 0 || *bandwidth < 0 || *upBandwidth < 0 {
		return fmt.Errorf("%w: negative -latency, -up-latency, -jitter, -bandwidth or -up-bandwidth", errUsage)
	}
	// toxiproxy's toxics count in whole milliseconds and KB/s.
	if ms := func(d time.Duration) bool { return d%time.Millisecond != 0 }; ms(*latency) || ms(*upLatency) || ms(*jitter) {
		return fmt.Errorf("%w: delays are whole milliseconds in toxiproxy", errUsage)
	}

	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, "wan", *listen, *upstream)
	if err := p.Start(); err != nil {
		return fmt.Errorf("listen %s: %w", *listen, err)
	}
	defer p.Stop()
	var toxics []string
	if *latency > 0 || *jitter > 0 {
		toxics = append(toxics, fmt.Sprintf(`{"name":"down_latency","type":"latency","stream":"downstream","attributes":{"latency":%d,"jitter":%d}}`,
			latency.Milliseconds(), jitter.Milliseconds()))
	}
	if *upLatency > 0 {
		toxics = append(toxics, fmt.Sprintf(`{"name":"up_latency","type":"latency","stream":"upstream","attributes":{"latency":%d}}`,
			upLatency.Milliseconds()))
	}
	if *bandwidth > 0 {
		// The bandwidth toxic's rate is in KB/s (10^3 bytes per second:
		// it sleeps len/rate milliseconds per chunk).
		rate := max(int64(*bandwidth*1000), 1)
		toxics = append(toxics, fmt.Sprintf(`{"name":"down_bandwidth","type":"bandwidth","stream":"downstream","attributes":{"rate":%d}}`, rate))
	}
	if *upBandwidth > 0 {
		rate := max(int64(*upBandwidth*1000), 1)
		toxics = append(toxics, fmt.Sprintf(`{"name":"up_bandwidth","type":"bandwidth","stream":"upstream","attributes":{"rate":%d}}`, rate))
	}
	for _, t := range toxics {
		if _, err := p.Toxics.AddToxicJson(strings.NewReader(t)); err != nil {
			return fmt.Errorf("add toxic %s: %w", t, err)
		}
	}
	fmt.Printf("listening %s\n", p.Listen)
	<-ctx.Done()
	return nil
}
