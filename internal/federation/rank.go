package federation

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/lakefed/lakefed/internal/config"
)

// ranked is one replica with what ranking weighed.
type ranked struct {
	r    *replica
	dist float64 // km from the client; +Inf when either end is unknown
	lat  time.Duration
}

// clientNet places the clients of one address range.
type clientNet struct {
	prefix   netip.Prefix
	lat, lon float64
}

func parseNets(cns []config.ClientNetwork) ([]clientNet, error) {
	var out []clientNet
	for _, cn := range cns {
		if !cn.Location.Known() {
			return nil, fmt.Errorf("federation: client network %v has no location", cn.Networks)
		}
		for _, n := range cn.Networks {
			p, err := netip.ParsePrefix(n)
			if err != nil {
				return nil, fmt.Errorf("federation: client network: %w", err)
			}
			out = append(out, clientNet{p.Masked(), cn.Location[0], cn.Location[1]})
		}
	}
	return out, nil
}

// locateClient returns the client's position: the GeoIP database first,
// then the most specific configured network.
func (s *snapshot) locateClient(addr netip.Addr) (lat, lon float64, ok bool) {
	if !addr.IsValid() {
		return 0, 0, false
	}
	addr = addr.Unmap()
	if s.geo != nil {
		if c, err := s.geo.City(addr); err == nil && c.Location.HasCoordinates() {
			return *c.Location.Latitude, *c.Location.Longitude, true
		}
	}
	best := -1
	for i, n := range s.nets {
		if n.prefix.Contains(addr) && (best < 0 || n.prefix.Bits() > s.nets[best].prefix.Bits()) {
			best = i
		}
	}
	if best < 0 {
		return 0, 0, false
	}
	return s.nets[best].lat, s.nets[best].lon, true
}

// greatCircleKM is the haversine distance between two points in km.
func greatCircleKM(lat1, lon1, lat2, lon2 float64) float64 {
	const r = 6371.0
	rad := math.Pi / 180
	dlat, dlon := (lat2-lat1)*rad, (lon2-lon1)*rad
	a := math.Sin(dlat/2)*math.Sin(dlat/2) + math.Cos(lat1*rad)*math.Cos(lat2*rad)*math.Sin(dlon/2)*math.Sin(dlon/2)
	return 2 * r * math.Asin(math.Min(1, math.Sqrt(a)))
}

// rank orders the usable replicas of e for a client: down endpoints and
// those the client tried are left out; then priority (lower first), then
// distance from the client, then recent latency. Replicas within
// FuzzKM and FuzzLatency of the best of their group are shuffled, so that
// near-equal sites share the load (as Dynafed does). buf is reused.
func (f *Federator) rank(s *snapshot, e *entry, client netip.Addr, tried []string, buf []ranked) []ranked {
	out := buf[:0]
	anyLocated := false
	for _, r := range e.replicas {
		if !r.m.h.Up() || slices.Contains(tried, r.m.name) {
			continue
		}
		out = append(out, ranked{r: r, dist: math.Inf(1), lat: r.m.h.Latency()})
		anyLocated = anyLocated || r.m.located
	}
	if len(out) < 2 {
		return out
	}
	if anyLocated {
		if clat, clon, ok := s.locateClient(client); ok {
			for i := range out {
				if m := out[i].r.m; m.located {
					out[i].dist = greatCircleKM(clat, clon, m.lat, m.lon)
				}
			}
		}
	}
	// Insertion sort: a handful of replicas, stable, no allocation.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && less(&out[j], &out[j-1]); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	fuzzKM, fuzzLat := s.cfg.FuzzKM, s.cfg.FuzzLatency.D()
	if fuzzKM < 0 {
		return out
	}
	for i := 0; i < len(out); {
		head := out[i]
		j := i + 1
		for j < len(out) && out[j].r.m.priority == head.r.m.priority &&
			(out[j].dist == head.dist || out[j].dist-head.dist <= fuzzKM) &&
			out[j].lat-head.lat <= fuzzLat {
			j++
		}
		for k := j - 1; k > i; k-- { // Fisher-Yates over out[i:j]
			r := i + rand.IntN(k-i+1)
			out[k], out[r] = out[r], out[k]
		}
		i = j
	}
	return out
}

func less(a, b *ranked) bool {
	if c := cmp.Compare(a.r.m.priority, b.r.m.priority); c != 0 {
		return c < 0
	}
	if c := cmp.Compare(a.dist, b.dist); c != 0 {
		return c < 0
	}
	return a.lat < b.lat
}

// describe says why the replicas were ranked as they were, for the
// X-Lakefed-Debug answer header.
func describe(rk []ranked) string {
	var b strings.Builder
	for i, x := range rk {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%d %s priority=%d", i+1, x.r.m.name, x.r.m.priority)
		if !math.IsInf(x.dist, 1) {
			fmt.Fprintf(&b, " km=%.0f", x.dist)
		}
		fmt.Fprintf(&b, " latency=%s", x.lat.Round(10*time.Microsecond))
		if x.r.url == "" {
			b.WriteString(" proxied")
		}
	}
	return b.String()
}
