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
	prefix netip.Prefix
	loc    *clientLoc
}

// clientLoc is one client position with its distance to every located
// endpoint, computed once (per configured network when the snapshot is
// built, per GeoIP position on first use) rather than per request: the
// trigonometry was a sixth of the redirect handler's time.
type clientLoc struct {
	lat, lon float64
	// dist is keyed by member; members survive reloads, so a position
	// computed under one snapshot is never consulted by another (each
	// snapshot has its own).
	dist map[*member]float64
}

// newClientLoc places a client at lat, lon and measures its distance to
// every located member.
func newClientLoc(lat, lon float64, members []*member) *clientLoc {
	l := &clientLoc{lat: lat, lon: lon, dist: make(map[*member]float64, len(members))}
	for _, m := range members {
		if m.located {
			l.dist[m] = greatCircleKM(lat, lon, m.lat, m.lon)
		}
	}
	return l
}

// distTo is the client's distance to m, +Inf when m has no location.
func (l *clientLoc) distTo(m *member) float64 {
	if d, ok := l.dist[m]; ok {
		return d
	}
	return math.Inf(1)
}

// maxGeoLocs bounds the GeoIP positions a snapshot remembers (a city
// database has some 10^5; beyond the bound distances are computed per
// request, as before).
const maxGeoLocs = 16384

func parseNets(cns []config.ClientNetwork, members []*member) ([]clientNet, error) {
	var out []clientNet
	for _, cn := range cns {
		if !cn.Location.Known() {
			return nil, fmt.Errorf("federation: client network %v has no location", cn.Networks)
		}
		loc := newClientLoc(cn.Location[0], cn.Location[1], members)
		for _, n := range cn.Networks {
			p, err := netip.ParsePrefix(n)
			if err != nil {
				return nil, fmt.Errorf("federation: client network: %w", err)
			}
			out = append(out, clientNet{p.Masked(), loc})
		}
	}
	// Most specific first, so that the first match is the best.
	slices.SortStableFunc(out, func(a, b clientNet) int { return cmp.Compare(b.prefix.Bits(), a.prefix.Bits()) })
	return out, nil
}

// locateClient returns the client's position: the GeoIP database first,
// then the most specific configured network; nil when unknown.
func (s *snapshot) locateClient(addr netip.Addr) *clientLoc {
	if !addr.IsValid() {
		return nil
	}
	addr = addr.Unmap()
	if s.geo != nil {
		if c, err := s.geo.City(addr); err == nil && c.Location.HasCoordinates() {
			return s.geoLoc(*c.Location.Latitude, *c.Location.Longitude)
		}
	}
	for i := range s.nets {
		if s.nets[i].prefix.Contains(addr) {
			return s.nets[i].loc
		}
	}
	return nil
}

// geoLoc returns the remembered position lat, lon, making it on first use.
func (s *snapshot) geoLoc(lat, lon float64) *clientLoc {
	key := [2]float64{lat, lon}
	if v, ok := s.geoLocs.Load(key); ok {
		return v.(*clientLoc)
	}
	l := newClientLoc(lat, lon, s.members)
	if s.nGeoLocs.Load() < maxGeoLocs {
		if _, loaded := s.geoLocs.LoadOrStore(key, l); !loaded {
			s.nGeoLocs.Add(1)
		}
	}
	return l
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
		if loc := s.locateClient(client); loc != nil {
			for i := range out {
				out[i].dist = loc.distTo(out[i].r.m)
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
		if !x.r.redirectable() {
			b.WriteString(" proxied")
		}
	}
	return b.String()
}
