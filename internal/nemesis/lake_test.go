//go:build nemesis

package nemesis

import (
	"fmt"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/lakefed/lakefed/internal/testenv"
)

// lake is the whole lake of a run, each role its own process: Redis,
// three sites (the
// lakefed storage role, s3proxy, XRootD), three federators sharing
// Redis (fed-2 inside a network namespace of its own), fed-0 with the
// root:// door and the write buffer, fed-0 and fed-1 with a cache each
// (one group through Redis).
//
// Every process the namespace's federator reaches listens on the host
// end of the namespace's link (host), an address of this machine, so
// the clients on the host reach them as they reach loopback.
type lake struct {
	t   *testing.T
	bin string
	out string // the run's directory: history, summary, logs

	ns         *testenv.NetNS // fed-2 runs in it; a partition cuts its link
	host, inNS string         // the addresses at the link's two ends

	redis *testenv.Redis
	siteA *testenv.Proc
	s3    *testenv.S3Server
	xrd   *testenv.Server
	feds  []*testenv.Proc

	dirs      map[string]string // a site's directory: site-a, site-c
	disks     map[string]string // the tmpfs a full-disk fault fills: site-a, cache-0, buffer
	bufDir    string
	cacheDirs []string

	nodes []Node
}

// bufPrefix is the write buffer's prefix: its files go to site-a and
// site-c.
const bufPrefix = "/buf"

// startLake starts every process of the lake.
func startLake(t *testing.T, out string) *lake {
	l := &lake{t: t, out: out, dirs: map[string]string{}, disks: map[string]string{}}
	testenv.Require(t, "ip")
	l.bin = testenv.LakefedBinary(t)
	l.netns()
	l.redis = testenv.StartRedisWith(t, testenv.RedisOptions{Bind: l.host})

	// The disks a full-disk fault fills, mounted before the processes
	// that hold files in them (so unmounted after they stop).
	l.disks["site-a"] = testenv.Tmpfs(t, "size=256m")
	l.disks["buffer"] = testenv.Tmpfs(t, "size=96m")
	l.disks["cache-0"] = testenv.Tmpfs(t, "size=96m")
	l.dirs["site-a"] = l.disks["site-a"]
	l.bufDir = filepath.Join(l.disks["buffer"], "spool")
	l.cacheDirs = []string{filepath.Join(l.disks["cache-0"], "cache"), filepath.Join(t.TempDir(), "cache")}

	pa := testenv.FreePort(t)
	l.siteA = &testenv.Proc{Bin: l.bin, Host: l.host, Port: pa, Log: filepath.Join(out, "site-a.log"),
		Args: []string{"storage", "--root", l.dirs["site-a"], "--listen", hostPort(l.host, pa)}}
	l.siteA.Start(t)
	t.Cleanup(l.siteA.Kill)
	l.s3 = testenv.StartS3On(t, l.host)
	l.xrd = testenv.StartXRootD(t)
	l.dirs["site-c"] = l.xrd.Dir
	xport := strings.TrimSuffix(strings.TrimPrefix(l.xrd.RootURL, "root://127.0.0.1:"), "/")

	endpoints := fmt.Sprintf(`  endpoints:
    - {name: site-a, url: "http://%[1]s/", writable: true, timeout: 10s}
    - {name: site-b, url: "s3://%[2]s/", writable: true, timeout: 10s, s3: {endpoint: %[3]q, region: %[4]s, access_key: %[5]s, secret_key: %[6]s, path_style: true}}
    - {name: site-c, url: "root://%[7]s//", writable: true, timeout: 10s}
`, hostPort(l.host, pa), l.s3.Bucket, l.s3.URL, l.s3.Region, l.s3.AccessKey, l.s3.SecretKey, hostPort(l.host, mustAtoi(t, xport)))
	for i := range 3 {
		addr := l.host
		if i == 2 {
			addr = l.inNS
		}
		port := testenv.FreePort(t)
		// The runner reads /api/endpoints and /api/buffer over the
		// namespace's link (10.x), not the loopback. The federators
		// answer look-ups from directory listings (list_after, as by
		// default), so that the faults reach those answers too.
		cfg := fmt.Sprintf(`listen: %s
shared: {redis: %q, lease: 2s, node: fed-%d}
operator: {anonymous: [127.0.0.0/8, 10.0.0.0/8]}
federation:
  placement: spread
  retry_after: 1s
  metadata_cache: {ttl: 10s, negative_ttl: 2s, list_after: 2}
  health: {interval: 500ms, timeout: 3s, fail_after: 3, recover_after: 1}
%s`, hostPort(addr, port), l.redis.URL, i, endpoints)
		node := Node{Name: fmt.Sprintf("fed-%d", i), URL: "http://" + hostPort(addr, port), Writes: true}
		if i == 0 {
			door := testenv.FreePort(t)
			cfg += fmt.Sprintf(`listen_xroot: %s
xroot_outage_wait: 5s
buffer:
  dir: %s
  keep_after_migration: 1s
  retry: {initial: 200ms, max: 2s}
  prefixes: [{prefix: %s, targets: [site-a, site-c]}]
`, hostPort(l.host, door), l.bufDir, bufPrefix)
			node.Buffered = true
			l.nodes = append(l.nodes, Node{Name: "door", RootURL: "root://" + hostPort(l.host, door), Writes: true, Buffered: true})
		}
		if i < 2 {
			cport := testenv.FreePort(t)
			cfg += fmt.Sprintf(`cache:
  listen: %s
  dir: %s
  origin: federation
  block_size: 64KiB
  group: [shared]
`, hostPort(l.host, cport), l.cacheDirs[i])
			l.nodes = append(l.nodes, Node{Name: fmt.Sprintf("cache-%d", i), URL: "http://" + hostPort(l.host, cport)})
		}
		l.nodes = append(l.nodes, node)
		f := filepath.Join(out, fmt.Sprintf("fed-%d.yaml", i))
		if err := os.WriteFile(f, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		p := &testenv.Proc{Bin: l.bin, Host: addr, Port: port, Log: filepath.Join(out, fmt.Sprintf("fed-%d.log", i)),
			Args: []string{"serve", f}, Env: []string{"GOTRACEBACK=all"}}
		if i == 2 {
			p.Wrap = []string{"ip", "netns", "exec", l.ns.Name}
		}
		p.Start(t)
		t.Cleanup(p.Kill)
		l.feds = append(l.feds, p)
	}
	return l
}

// netns makes the namespace and its link, removed when the test ends.
func (l *lake) netns() {
	l.ns = testenv.NewNetNS(l.t)
	l.host, l.inNS = l.ns.Host, l.ns.Inner
}

// writeSite writes data at p below a site's directory, as the site's
// server would (XRootD's files belong to its user).
func (l *lake) writeSite(site, p string, data []byte) error {
	full := filepath.Join(l.dirs[site], filepath.FromSlash(p))
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		return err
	}
	tmp := full + ".nemesis"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	if site == "site-c" && os.Geteuid() == 0 {
		if u, err := user.Lookup(testenv.XRootDUser); err == nil {
			uid, _ := strconv.Atoi(u.Uid)
			gid, _ := strconv.Atoi(u.Gid)
			for d := filepath.Dir(full); strings.HasPrefix(d, l.dirs[site]); d = filepath.Dir(d) {
				_ = os.Chown(d, uid, gid)
			}
			_ = os.Chown(tmp, uid, gid)
		}
	}
	return os.Rename(tmp, full)
}

// api GETs a JSON page of a federator.
func (l *lake) api(client *http.Client, fed int, page string) (*http.Response, error) {
	return client.Get(l.nodeURL(fmt.Sprintf("fed-%d", fed)) + page)
}

func (l *lake) nodeURL(name string) string {
	for _, n := range l.nodes {
		if n.Name == name {
			return n.URL
		}
	}
	return ""
}

func hostPort(h string, p int) string { return h + ":" + strconv.Itoa(p) }

func mustAtoi(t *testing.T, s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("port %q: %v", s, err)
	}
	return n
}
