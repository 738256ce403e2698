// Command redisclients compares the two Go Redis clients for what the
// federators ask of Redis, against one redis-server (bench/shared.sh
// starts it): go-redis v9, which lakefed uses (invalidations by
// publish/subscribe), and rueidis, whose server-assisted client-side
// caching (RESP3 CLIENT TRACKING) keeps read keys in the client and has
// Redis push their invalidations.
//
//	redisclients -addr 127.0.0.1:6379 -d 3s -c 64
//
// Figures, each for -d:
//
//	get          GET of a metadata key (-size bytes, -keys of them), by one
//	             caller (_c1: latency) and by -c at once (_cN: rate):
//	             go-redis; rueidis without its cache (auto-pipelined);
//	             rueidis with its cache (DoCache: after the first, local)
//	inval        one round at a time: a writer sets a key and another
//	             client sees it: go-redis SET + PUBLISH received by a
//	             subscriber; rueidis SET by a writer, the tracking
//	             invalidation received by the client that cached the key
//	             (which caches it again before the next round)
//
// It prints one line per figure: name, rate (ops or rounds per second),
// p50_us, p99_us. It lives in a module of its own so that rueidis never
// enters the product's go.mod.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "redisclients:", err)
		os.Exit(1)
	}
}

type opts struct {
	addr  string
	dur   time.Duration
	conns int
	keys  int
	size  int
}

func run() error {
	var o opts
	flag.StringVar(&o.addr, "addr", "127.0.0.1:6379", "redis host:port")
	flag.DurationVar(&o.dur, "d", 3*time.Second, "duration of each figure")
	flag.IntVar(&o.conns, "c", 64, "concurrent callers for the GET figures")
	flag.IntVar(&o.keys, "keys", 1000, "metadata keys the GETs cycle over")
	flag.IntVar(&o.size, "size", 300, "bytes of each metadata value")
	flag.Parse()
	ctx := context.Background()
	gr := redis.NewClient(&redis.Options{Addr: o.addr, PoolSize: o.conns})
	defer gr.Close()
	ru, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{o.addr}})
	if err != nil {
		return fmt.Errorf("rueidis: %w", err)
	}
	defer ru.Close()

	value := strings.Repeat("x", o.size)
	key := func(i int) string { return "lakefed:bench:md:/data/d" + strconv.Itoa(i/100) + "/f" + strconv.Itoa(i) }
	for i := range o.keys {
		if err := gr.Set(ctx, key(i), value, time.Hour).Err(); err != nil {
			return err
		}
	}
	figures := []struct {
		name string
		get  func(ctx context.Context, k string) error
	}{
		{"goredis_get", func(ctx context.Context, k string) error { return gr.Get(ctx, k).Err() }},
		{"rueidis_get", func(ctx context.Context, k string) error {
			return ru.Do(ctx, ru.B().Get().Key(k).Build()).Error()
		}},
		{"rueidis_cached_get", func(ctx context.Context, k string) error {
			return ru.DoCache(ctx, ru.B().Get().Key(k).Cache(), time.Hour).Error()
		}},
	}
	for _, c := range []int{1, o.conns} {
		for _, f := range figures {
			lat, el, err := closedLoop(ctx, o.dur, c, func(ctx context.Context, i int) error { return f.get(ctx, key(i%o.keys)) })
			if err != nil {
				return fmt.Errorf("%s: %w", f.name, err)
			}
			report(f.name+"_c"+strconv.Itoa(c), lat, el)
		}
	}
	lat, el, err := goredisInval(ctx, o, gr)
	if err != nil {
		return fmt.Errorf("goredis_inval: %w", err)
	}
	report("goredis_inval", lat, el)
	lat, el, err = rueidisInval(ctx, o, ru)
	if err != nil {
		return fmt.Errorf("rueidis_inval: %w", err)
	}
	report("rueidis_inval", lat, el)
	return nil
}

// closedLoop runs op from conns goroutines for dur and returns every
// call's latency and the time taken.
func closedLoop(ctx context.Context, dur time.Duration, conns int, op func(ctx context.Context, i int) error) ([]time.Duration, time.Duration, error) {
	var stop atomic.Bool
	var firstErr atomic.Pointer[error]
	lat := make([][]time.Duration, conns)
	start := time.Now()
	time.AfterFunc(dur, func() { stop.Store(true) })
	var wg sync.WaitGroup
	for w := range conns {
		wg.Go(func() {
			for i := w; !stop.Load(); i += conns {
				t := time.Now()
				if err := op(ctx, i); err != nil {
					firstErr.CompareAndSwap(nil, &err)
					return
				}
				lat[w] = append(lat[w], time.Since(t))
			}
		})
	}
	wg.Wait()
	if e := firstErr.Load(); e != nil {
		return nil, 0, *e
	}
	return slices.Concat(lat...), time.Since(start), nil
}

// goredisInval: a writer SETs a key and PUBLISHes its name; the round
// ends when a subscriber on another connection receives it.
func goredisInval(ctx context.Context, o opts, gr *redis.Client) ([]time.Duration, time.Duration, error) {
	const ch = "lakefed:bench:inval"
	ps := gr.Subscribe(ctx, ch)
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil { // the subscription's confirmation
		return nil, 0, err
	}
	msgs := ps.Channel()
	var lat []time.Duration
	start := time.Now()
	for i := 0; time.Since(start) < o.dur; i++ {
		k := "lakefed:bench:inval:" + strconv.Itoa(i%o.keys)
		t := time.Now()
		pipe := gr.Pipeline()
		pipe.Set(ctx, k, strconv.Itoa(i), time.Hour)
		pipe.Publish(ctx, ch, k)
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, 0, err
		}
		if err := waitFor(msgs, k); err != nil {
			return nil, 0, err
		}
		lat = append(lat, time.Since(t))
	}
	return lat, time.Since(start), nil
}

func waitFor(msgs <-chan *redis.Message, k string) error {
	timeout := time.NewTimer(5 * time.Second)
	defer timeout.Stop()
	for {
		select {
		case m := <-msgs:
			if m.Payload == k {
				return nil
			}
		case <-timeout.C:
			return errors.New("no message within 5 s")
		}
	}
}

// rueidisInval: a reader has the key in its client-side cache; a writer
// (another client) SETs it; the round ends when Redis's tracking
// invalidation of the key reaches the reader. The reader then caches
// the key again, outside the round's latency but inside its rate.
func rueidisInval(ctx context.Context, o opts, writer rueidis.Client) ([]time.Duration, time.Duration, error) {
	seen := make(chan string, 16)
	reader, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{o.addr},
		OnInvalidations: func(ms []rueidis.RedisMessage) {
			for _, m := range ms {
				if k, err := m.ToString(); err == nil {
					select {
					case seen <- k:
					default: // never blocks the client's reader
					}
				}
			}
		}})
	if err != nil {
		return nil, 0, err
	}
	defer reader.Close()
	var lat []time.Duration
	start := time.Now()
	for i := 0; time.Since(start) < o.dur; i++ {
		k := "lakefed:bench:track:" + strconv.Itoa(i%o.keys)
		if err := writer.Do(ctx, writer.B().Set().Key(k).Value("0").Build()).Error(); err != nil {
			return nil, 0, err
		}
		if err := reader.DoCache(ctx, reader.B().Get().Key(k).Cache(), time.Hour).Error(); err != nil {
			return nil, 0, err
		}
		t := time.Now()
		if err := writer.Do(ctx, writer.B().Set().Key(k).Value(strconv.Itoa(i)).Build()).Error(); err != nil {
			return nil, 0, err
		}
		if err := waitKey(seen, k); err != nil {
			return nil, 0, err
		}
		lat = append(lat, time.Since(t))
	}
	return lat, time.Since(start), nil
}

func waitKey(seen <-chan string, k string) error {
	timeout := time.NewTimer(5 * time.Second)
	defer timeout.Stop()
	for {
		select {
		case got := <-seen:
			if got == k {
				return nil
			}
		case <-timeout.C:
			return errors.New("no invalidation within 5 s")
		}
	}
}

func report(name string, lat []time.Duration, el time.Duration) {
	slices.Sort(lat)
	q := func(f float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return float64(lat[min(len(lat)-1, int(f*float64(len(lat))))].Nanoseconds()) / 1000
	}
	fmt.Printf("name=%s rate=%.0f p50_us=%.1f p99_us=%.1f n=%d\n", name, float64(len(lat))/el.Seconds(), q(0.5), q(0.99), len(lat))
}
