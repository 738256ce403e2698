// Command coldfan asks several federators for the same new paths at
// once: for each path, one GET to every federator, sent together, as
// clients behind a load balancer asking for a file just produced would.
// bench/shared.sh runs it and counts, at the storage sites, how many
// times each path was asked of them.
//
//	coldfan -urls http://127.0.0.1:8081,http://127.0.0.1:8082,http://127.0.0.1:8083 \
//	        -pattern /cold/d%03d/f%05d -files 2000 -c 8 -expect 302
//
// Redirects are not followed: the answer is the federator's. It prints
// one line of key=value pairs: paths, requests, bad (answers other than
// -expect), errors, rate (paths/s), p50_ms and p99_ms (each request's).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "coldfan:", err)
		os.Exit(1)
	}
}

func run() error {
	urls := flag.String("urls", "", "comma-separated base URLs of the federators (required)")
	pattern := flag.String("pattern", "/cold/d%03d/f%05d", "path pattern, given (index/per, index)")
	per := flag.Int("per", 100, "files per directory")
	first := flag.Int("first", 0, "first file index")
	files := flag.Int("files", 1000, "number of paths, from -first")
	conns := flag.Int("c", 8, "paths asked at once")
	expect := flag.Int("expect", http.StatusFound, "status every answer should have; others are counted as bad")
	timeout := flag.Duration("timeout", 30*time.Second, "per-request timeout")
	flag.Parse()
	bases := strings.Split(*urls, ",")
	if *urls == "" || *files <= 0 || *conns <= 0 {
		return errors.New("give -urls, and positive -files and -c")
	}
	client := &http.Client{
		Timeout:       *timeout,
		Transport:     &http.Transport{MaxIdleConnsPerHost: *conns * 2},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	var next atomic.Int64
	var bad, errs atomic.Int64
	lat := make([][]time.Duration, *conns)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range *conns {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= *files {
					return
				}
				k := *first + i
				p := fmt.Sprintf(*pattern, k / *per, k)
				lat[w] = append(lat[w], askAll(client, bases, p, *expect, &bad, &errs)...)
			}
		})
	}
	wg.Wait()
	el := time.Since(start)
	all := slices.Concat(lat...)
	slices.Sort(all)
	q := func(f float64) float64 {
		if len(all) == 0 {
			return 0
		}
		return float64(all[min(len(all)-1, int(f*float64(len(all))))].Microseconds()) / 1000
	}
	fmt.Printf("paths=%d requests=%d bad=%d errors=%d rate=%.0f p50_ms=%.2f p99_ms=%.2f\n",
		*files, len(all), bad.Load(), errs.Load(), float64(*files)/el.Seconds(), q(0.5), q(0.99))
	return nil
}

// askAll sends GET p to every base at once and returns each latency.
func askAll(client *http.Client, bases []string, p string, expect int, bad, errs *atomic.Int64) []time.Duration {
	out := make([]time.Duration, len(bases))
	var wg sync.WaitGroup
	for j, b := range bases {
		wg.Go(func() {
			t := time.Now()
			resp, err := client.Get(b + p)
			if err != nil {
				errs.Add(1)
				out[j] = time.Since(t)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			out[j] = time.Since(t)
			if resp.StatusCode != expect {
				bad.Add(1)
			}
		})
	}
	wg.Wait()
	return out
}
