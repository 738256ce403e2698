#!/usr/bin/env bash
# Cache-role benchmark: the lakefed cache against reading its
# origin directly and against XCache (XRootD's proxy file cache), all on
# loopback and in one run, so the ratios hold on a shared, noisy machine.
#
#   bench/cache.sh                       # 1 GiB file, 3 rounds
#   SIZE_MB=64 ROUNDS=1 ROOT_EVENTS=200000 GROUP_MB=4 bench/cache.sh   # quick check
#   PROFILE=1 bench/cache.sh             # also CPU profiles of every lakefed cache
#
# (a) warm hits: curl of a SIZE_MB file through the lakefed cache once it
#     holds every block, beside curl of the same file from the lakefed
#     storage role that is the cache's origin (page cache warm). Goal ≥ 0.9×.
# (b) cold misses: a fresh name each round (a hard link of the same file,
#     so the origin reads from the page cache and only the cache is cold),
#     through the cache beside curl from the origin. Goal ≥ 0.8×. Every
#     cold read starts after a sync: without it each read pays for the
#     writeback of the previous ones (on this VM's disk every cache, XCache
#     included, then fills at about 300 MiB/s).
# (b') the cache disk's own write rate, measured in the same rounds,
#     interleaved with the cold reads and after a sync as they are: dd of
#     SIZE_MB to the file system of the cache directories, with
#     oflag=direct (conv=fsync where direct I/O is refused, as on tmpfs),
#     the file removed after. A cache cannot fill faster than its disk
#     takes the blocks for long, so the cold miss is held to 0.8× the
#     smaller of this and the origin read directly.
# (c) the same through XCache (xrootd + libXrdPss + libXrdPfc, configured
#     as ../shared/servers/xcache_start.sh does) in front of a plain
#     XRootD data server exporting the same directory: root:// with xrdcp
#     (XRD_CPUSEPGWRTRD=0, pgread off: about 4× faster than xrdcp's default
#     here, so XCache's best case) and HTTP (XrdHttp) with curl. Goal:
#     faster than XCache on both, ≥ 3× on cold. A lakefed cache whose
#     origin is that same XRootD server (root://) is measured too, so the
#     comparison with the same origin is in the table as well.
# (d) uproot reads one branch (jet_pt) of a ROOT file written by uproot,
#     the origin behind bench/cmd/wanproxy adding LATENCY (5 ms) to every
#     answer: through a warm lakefed cache in front of the proxy, beside
#     reading through the proxy directly. Goal ≥ 3× faster.
# (e) a cache group of 3 nodes (--group/--self): GROUP_CLIENTS clients
#     each read GROUP_FILES files, every file through a node picked at
#     random; the origin's own byte counter (lakefed_storage_sent_bytes_total,
#     less the metrics page that was read before) divided by the bytes of
#     the files. Goal 1.0: the group fetched every file once.
#
# Trust: every server reads the file once before the rounds (page cache,
# lazy init); each measurement is repeated ROUNDS times with the servers
# interleaved, every round is printed and the table holds the medians.
# The clients (curl, xrdcp, python) share the 2 cores with the servers.
# The table is printed and written as markdown to OUT (default
# bench/results/cache.md).
#
# Profiles (bench/lib.sh): after the table, reads run again and again for
# PROFILE_SECONDS (10) under a CPU profile of the cache that serves them,
# each a .pprof and a flame graph .svg in PROFILE_DIR
# (bench/results/profiles): cache-warm and cache-cold (the cache of (a) and
# (b); the top of each is printed and written beside OUT as
# cache-pprof-warm.txt and cache-pprof-cold.txt), cache-root-warm and
# cache-root-cold (the cache with XCache's origin, (c)), and cache-uproot
# (the cache of (d), uproot reading). With PROFILE=1 the group's three
# nodes are profiled during (e) as well (cache-group-0, -1, -2). The
# default, PROFILE=auto, takes the profiles after the table only when goal
# (a) or (b') is missed; PROFILE=0 takes none and opens no pprof listener.
#
# The disk: the caches write what they fetch. On the VM this was written
# on, writes slow down after the first GiB or two even with a sync
# between them (dd of 1 GiB files: 3.9, 3.4, 0.63, 0.36, 0.29 GB/s), so
# cold misses, XCache's included, vary the most from run to run; (b')
# measures that rate beside them.
# CACHE_ROOT=/dev/shm puts every cache directory on tmpfs instead, to
# measure the caches rather than the disk; it holds about
# (3 + 4 × ROUNDS) × SIZE_MB of RAM until the script ends, more with a
# profile (every cold read in it is a fresh file).
# Needs: go, curl, xrootd + xrdcp (xrootd-server, xrootd-client), python3
# with uproot and aiohttp (scripts/install-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
SIZE_MB=${SIZE_MB:-1024}
ROUNDS=${ROUNDS:-3}
LATENCY=${LATENCY:-5ms}
ROOT_EVENTS=${ROOT_EVENTS:-2000000}
GROUP_NODES=3
GROUP_CLIENTS=${GROUP_CLIENTS:-30}
GROUP_FILES=${GROUP_FILES:-10}
GROUP_MB=${GROUP_MB:-16}
PROFILE=${PROFILE:-auto}
CACHE_ROOT=${CACHE_ROOT:-}
OUT=${OUT:-bench/results/cache.md}
for t in curl xrootd xrdcp python3 go; do command -v $t >/dev/null || { echo "missing $t: run scripts/install-deps.sh" >&2; exit 1; }; done
python3 -c 'import uproot, aiohttp' 2>/dev/null || { echo "missing python uproot/aiohttp: run scripts/install-deps.sh" >&2; exit 1; }
export XRD_CPUSEPGWRTRD=0

new_workdir lakefed-cache-bench
# XRootD leaves /tmp/xrootd.<instance>.env behind; drop the ones of our
# processes with the rest.
cleanup() {
  local p f
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  for p in "${PIDS[@]}"; do
    for f in /tmp/xrootd.*.env; do [ -f "$f" ] && grep -q "^pid=$p&" "$f" 2>/dev/null && rm -f "$f"; done
  done
  rm -rf "$W" "${CD:-$W}"
}
trap cleanup EXIT
# CD holds the caches' directories.
CD=$W
if [ -n "$CACHE_ROOT" ]; then CD=$(mktemp -d "$CACHE_ROOT/lakefed-cache-bench.XXXXXX"); chmod 755 "$CD"; fi
# PROFILE=auto: the caches get their pprof listeners (PROFILE=1 to the
# helpers), and the table decides whether to profile.
PROFILE_ASKED=$PROFILE
if [ "$PROFILE" = auto ]; then PROFILE=1; fi
go build -o "$W/lakefed" ./cmd/lakefed
go build -o "$W/wanproxy" ./bench/cmd/wanproxy

SIZE=$((SIZE_MB << 20))
DATA=$W/data
mkdir -p "$DATA"
head -c "$SIZE" /dev/urandom > "$DATA/big"
# Cold reads use fresh names: hard links, one per round and reader, plus
# spares for the profile.
for r in $(seq "$ROUNDS") p1 p2 p3 p4 p5 p6 p7 p8 p9 p10 p11 p12 p13 p14 p15 p16 p17 p18 p19 p20; do
  for who in lf lr xh xr; do ln "$DATA/big" "$DATA/cold-$r-$who"; done
done

# (d) the ROOT file: a jagged jet_pt and six flat float64 branches,
# baskets of 10,000 events, written by uproot (what the reader is).
cat > "$W/rootw.py" <<'PY'
import sys
import awkward as ak
import numpy as np
import uproot
path, n, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(1)
with uproot.recreate(path) as f:
    for i in range(0, n, per):
        m = min(per, n - i)
        counts = rng.poisson(4, m)
        d = {"jet_pt": ak.unflatten(rng.exponential(30, int(counts.sum())).astype(np.float32), counts)}
        for k in range(6):
            d[f"v{k}"] = rng.normal(size=m)
        if i == 0:
            f["Events"] = d
        else:
            f["Events"].extend(d)
PY
# One timed open + read of a branch, as an analysis job does it; prints
# seconds and the number of entries (checked).
cat > "$W/rootr.py" <<'PY'
import sys
import time
import uproot
url, branch, want = sys.argv[1], sys.argv[2], int(sys.argv[3])
t = time.perf_counter()
with uproot.open(url) as f:
    a = f["Events"][branch].array()
dt = time.perf_counter() - t
if len(a) != want:
    sys.exit(f"{url}: {len(a)} entries, want {want}")
print(f"{dt:.3f}")
PY
python3 "$W/rootw.py" "$DATA/ev.root" "$ROOT_EVENTS" 10000
ROOT_SIZE=$(stat -c %s "$DATA/ev.root")
for r in $(seq "$ROUNDS"); do ln "$DATA/ev.root" "$DATA/evcold-$r.root"; done

# (e) the group's files, served by an origin of their own so its byte
# counter holds the group's traffic only.
GDATA=$W/gdata
mkdir -p "$GDATA"
for i in $(seq -w 1 "$GROUP_FILES"); do head -c $((GROUP_MB << 20)) /dev/urandom > "$GDATA/g$i"; done
chmod -R a+rX "$DATA" "$GDATA"

# start_lakefed NAME ARGS...: a lakefed subcommand in the background,
# its log in $W/NAME.log.
start_lakefed() { local n=$1; shift; "$W/lakefed" "$@" >"$W/$n.log" 2>&1 & PIDS+=($!); }
# start_cache NAME ARGS...: a lakefed cache, with a pprof listener when
# profiles may be taken (pprof_flag NAME).
start_cache() { local n=$1; shift; pprof_flag "$n"; start_lakefed "$n" cache "$@" "${PPROF[@]}"; }

# The origin, and the cache in front of it.
SP=$(free_port); LCP=$(free_port)
start_lakefed origin storage --root "$DATA" --listen 127.0.0.1:$SP
start_cache cache --dir "$CD/lc" --origin http://127.0.0.1:$SP/ --listen 127.0.0.1:$LCP

# XRootD data server on DATA (lib.sh), XCache in front of it.
start_xrootd "$DATA"
XCP=$(free_port); XCHP=$(free_port)
mkdir -p "$CD/xccache" "$W/xc/admin" "$W/xc/run"
cat > "$W/xc/xrootd.cfg" <<CFG
all.export /
ofs.osslib libXrdPss.so
pss.cachelib libXrdPfc.so
pss.origin 127.0.0.1:$XP
oss.localroot $CD/xccache
pfc.ram 1g
pfc.blocksize 1M
pfc.diskusage 0.90 0.95
xrd.port $XCP
xrd.protocol XrdHttp:$XCHP libXrdHttp.so
all.adminpath $W/xc/admin
all.pidpath $W/xc/run
CFG
runas=()
if [ "$(id -u)" = 0 ]; then runas=(-R xrootd); chown -R xrootd: "$W/xc" "$CD/xccache"; fi
xrootd "${runas[@]}" -c "$W/xc/xrootd.cfg" -l "$W/xc/xrootd.log" >/dev/null 2>&1 &
PIDS+=($!)
# A lakefed cache with XCache's origin (root://).
LRP=$(free_port)
wait_port $XP
start_cache cache-root --dir "$CD/lr" --origin root://127.0.0.1:$XP/ --listen 127.0.0.1:$LRP

# (d) the WAN proxy in front of the origin, and a cache behind it.
"$W/wanproxy" -upstream 127.0.0.1:$SP -latency "$LATENCY" >"$W/wanproxy.out" 2>&1 &
PIDS+=($!)
LDP=$(free_port)
for _ in $(seq 100); do grep -q listening "$W/wanproxy.out" 2>/dev/null && break; sleep 0.1; done
WAN=$(awk '/listening/ {print $2}' "$W/wanproxy.out")
[ -n "$WAN" ] || { cat "$W/wanproxy.out" >&2; exit 1; }
start_cache cache-wan --dir "$CD/ld" --origin "http://$WAN/" --listen 127.0.0.1:$LDP

for p in $SP $LCP $XHP $XCP $XCHP $LRP $LDP; do wait_port "$p"; done

now() { date +%s.%N; }
mbps() { awk -v b="$1" -v s="$2" 'BEGIN { printf "%.0f", b / 1048576 / s }'; }
median() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "n/a"; else if (NR % 2) print v[(NR + 1) / 2]; else { m = (v[NR / 2] + v[NR / 2 + 1]) / 2; printf (m >= 100 ? "%.0f" : "%.3f"), m } }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
# get URL: one read of a SIZE byte file to /dev/null, in MiB/s; the
# length is checked. root:// goes through xrdcp, anything else curl.
get() {
  local t0 t1 n
  t0=$(now)
  case $1 in
  root://*)
    xrdcp -f -s "$1" /dev/null || { echo "xrdcp $1 failed" >&2; exit 1; }
    n=$SIZE
    ;;
  *) n=$(curl -sf -o /dev/null -w '%{size_download}' "$1") ;;
  esac
  t1=$(now)
  [ "$n" = "$SIZE" ] || { echo "$1: $n bytes, want $SIZE" >&2; exit 1; }
  mbps "$SIZE" "$(echo "$t1 - $t0" | bc -l)"
}
uproot_read() { python3 "$W/rootr.py" "$1" jet_pt "$ROOT_EVENTS"; }
# disk_write: dd of SIZE_MB to the caches' file system, in MiB/s (b').
DDFLAG=oflag=direct
dd if=/dev/zero of="$CD/dd-probe" bs=1M count=1 oflag=direct 2>/dev/null || DDFLAG=conv=fsync
rm -f "$CD/dd-probe"
disk_write() {
  local t0 t1
  t0=$(now)
  dd if=/dev/zero of="$CD/dd-disk" bs=1M count="$SIZE_MB" "$DDFLAG" 2>/dev/null || { echo "dd to $CD failed" >&2; exit 1; }
  t1=$(now)
  rm -f "$CD/dd-disk"
  mbps "$SIZE" "$(echo "$t1 - $t0" | bc -l)"
}

declare -A WARM COLD UP
WSRC=(origin cache cache-root xcache-http xcache-root)
declare -A WURL=([origin]=http://127.0.0.1:$SP/big [cache]=http://127.0.0.1:$LCP/big
  [cache-root]=http://127.0.0.1:$LRP/big [xcache-http]=http://127.0.0.1:$XCHP/big
  [xcache-root]=root://127.0.0.1:$XCP//big)
# Cold: the origins read directly (their reference), the caches on a
# fresh name (%s: round), and the caches' disk written (disk, no URL).
CSRC=(origin xrootd-root xrdhttp cache cache-root xcache-http xcache-root disk)
declare -A CURL=([origin]=http://127.0.0.1:$SP/big [xrootd-root]=root://127.0.0.1:$XP//big
  [xrdhttp]=http://127.0.0.1:$XHP/big [cache]=http://127.0.0.1:$LCP/cold-%s-lf
  [cache-root]=http://127.0.0.1:$LRP/cold-%s-lr [xcache-http]=http://127.0.0.1:$XCHP/cold-%s-xh
  [xcache-root]=root://127.0.0.1:$XCP//cold-%s-xr)

echo "SIZE_MB=$SIZE_MB ROUNDS=$ROUNDS caches in $CD ($(df --output=fstype "$CD" | tail -1), disk rate by dd $DDFLAG); load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for s in "${WSRC[@]}"; do get "${WURL[$s]}" >/dev/null; get "${WURL[$s]}" >/dev/null; done # fill the caches, warm up
curl -sf -o /dev/null "http://127.0.0.1:$LDP/ev.root" # (d): the warm cache
uproot_read "http://127.0.0.1:$LDP/ev.root" >/dev/null
uproot_read "http://$WAN/ev.root" >/dev/null

for r in $(seq "$ROUNDS"); do
  k=$(((r - 1) % ${#WSRC[@]}))
  order=("${WSRC[@]:$k}" "${WSRC[@]:0:$k}")
  for s in "${order[@]}"; do WARM[$s]+=" $(get "${WURL[$s]}")"; done
  k=$(((r - 1) % ${#CSRC[@]}))
  order=("${CSRC[@]:$k}" "${CSRC[@]:0:$k}")
  # shellcheck disable=SC2059 # the URL holds the %s
  for s in "${order[@]}"; do
    sync # the last cold read's dirty pages go to disk outside the measured time
    if [ "$s" = disk ]; then COLD[$s]+=" $(disk_write)"; continue; fi
    COLD[$s]+=" $(get "$(printf "${CURL[$s]}" "$r")")"
  done
  UP[wan]+=" $(uproot_read "http://$WAN/ev.root")"
  UP[cache]+=" $(uproot_read "http://127.0.0.1:$LDP/ev.root")"
  UP[cold]+=" $(uproot_read "http://127.0.0.1:$LDP/evcold-$r.root")"
  echo "round $r (load $(cut -d' ' -f1 /proc/loadavg)), MiB/s:"
  for s in "${WSRC[@]}"; do set -- ${WARM[$s]}; printf '  warm %-12s %6s\n' "$s" "${!#}"; done
  for s in "${CSRC[@]}"; do set -- ${COLD[$s]}; printf '  %-17s %6s\n' "$([ "$s" = disk ] && echo "disk write" || echo "cold $s")" "${!#}"; done
  for s in wan cache cold; do set -- ${UP[$s]}; printf '  uproot %-10s %6s s\n' "$s" "${!#}"; done
done

# (e) the cache group.
GSP=$(free_port)
start_lakefed gorigin storage --root "$GDATA" --listen 127.0.0.1:$GSP
GP=() GURLS=()
for i in $(seq "$GROUP_NODES"); do GP+=("$(free_port)"); GURLS+=("http://127.0.0.1:${GP[-1]}"); done
members=$(IFS=,; echo "${GURLS[*]}")
for i in $(seq 0 $((GROUP_NODES - 1))); do
  start_cache "group$i" --dir "$CD/g$i" --origin http://127.0.0.1:$GSP/ --listen 127.0.0.1:${GP[$i]} \
    --group "$members" --self "${GURLS[$i]}"
done
wait_port $GSP
for p in "${GP[@]}"; do wait_port "$p"; done
sleep 2.5 # two probes of every member by every member
sent() { curl -sf -H 'Accept-Encoding: identity' "http://127.0.0.1:$GSP/metrics" > "$W/metrics.$1"; awk '$1 == "lakefed_storage_sent_bytes_total" { printf "%.0f", $2 }' "$W/metrics.$1"; }
b0=$(sent 0)
page0=$(stat -c %s "$W/metrics.0")
(cd "$GDATA" && ls) > "$W/gfiles"
if [ "$PROFILE_ASKED" = 1 ]; then
  for i in $(seq 0 $((GROUP_NODES - 1))); do profile_during "cache-group-$i" "group$i"; done
fi
t0=$(now)
cpids=()
for c in $(seq "$GROUP_CLIENTS"); do
  (
    RANDOM=$((c * 7919 + $$))
    for f in $(shuf "$W/gfiles"); do
      curl -sf -o /dev/null "${GURLS[$((RANDOM % GROUP_NODES))]}/$f" || { echo "group read of $f failed" >&2; exit 1; }
    done
  ) &
  cpids+=($!)
done
failed=0
for p in "${cpids[@]}"; do wait "$p" || failed=1; done
t1=$(now)
profile_collect
[ $failed = 0 ] || { echo "a group client failed" >&2; exit 1; }
b1=$(sent 1)
GBYTES=$((GROUP_FILES * (GROUP_MB << 20)))
GORIGIN=$((b1 - b0 - page0))
GRATIO=$(awk -v a="$GORIGIN" -v b="$GBYTES" 'BEGIN { printf "%.3f", a / b }')
GRATE=$(mbps $((GROUP_CLIENTS * GBYTES)) "$(echo "$t1 - $t0" | bc -l)")
echo "group: origin sent $GORIGIN bytes for $GBYTES bytes of files; clients read $GRATE MiB/s together"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

m() { local -n a=$1; echo "${a[$2]}" | median; }
wc_=$(m WARM cache); wo=$(m WARM origin); wr=$(m WARM cache-root); wxh=$(m WARM xcache-http); wxr=$(m WARM xcache-root)
cc=$(m COLD cache); co=$(m COLD origin); cr=$(m COLD cache-root); cxh=$(m COLD xcache-http); cxr=$(m COLD xcache-root)
cxo=$(m COLD xrootd-root); cxho=$(m COLD xrdhttp); cd_=$(m COLD disk)
cmin=$(awk -v a="$co" -v b="$cd_" 'BEGIN { print (a + 0 < b + 0) ? a : b }')
uw=$(m UP wan); uc=$(m UP cache); ucold=$(m UP cold)
goal() { awk -v v="$1" -v g="$2" 'BEGIN { if (v == "n/a") print "n/a"; else if (v + 0 >= g) print "met"; else printf "missed (%.0f%% short)", (1 - v / g) * 100 }'; }
speedup() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }

{
  echo "Cache role, \`bench/cache.sh\` (SIZE_MB=$SIZE_MB, caches on $(df --output=fstype "$CD" | tail -1)$([ -n "$CACHE_ROOT" ] && echo " (CACHE_ROOT=$CACHE_ROOT)"), median of $ROUNDS rounds, curl unless root://, xrdcp with XRD_CPUSEPGWRTRD=0; loopback, $(nproc) cores shared with the clients; $(date -u +%Y-%m-%d))."
  echo
  echo "| measurement | lakefed cache | reference | lakefed / reference | goal |"
  echo "|---|---:|---:|---:|---|"
  echo "| (a) warm hit vs storage role from its disk | $wc_ MiB/s | $wo MiB/s | $(ratio "$wc_" "$wo")× | ≥ 0.9×: $(goal "$(ratio "$wc_" "$wo")" 0.9) |"
  echo "| (b) cold miss vs origin read directly | $cc MiB/s | $co MiB/s | $(ratio "$cc" "$co")× | ≥ 0.8×: $(goal "$(ratio "$cc" "$co")" 0.8) |"
  echo "| (b') cache disk's write rate (dd $DDFLAG of $SIZE_MB MiB) | | $cd_ MiB/s | | |"
  echo "| (b') cold miss vs the smaller of origin read directly and disk write | $cc MiB/s | $cmin MiB/s | $(ratio "$cc" "$cmin")× | ≥ 0.8×: $(goal "$(ratio "$cc" "$cmin")" 0.8) |"
  echo "| (c) warm hit vs XCache, HTTP (curl) | $wc_ MiB/s | $wxh MiB/s | $(ratio "$wc_" "$wxh")× | > 1×: $(goal "$(ratio "$wc_" "$wxh")" 1.0001) |"
  echo "| (c) warm hit vs XCache, root:// (xrdcp) | $wc_ MiB/s | $wxr MiB/s | $(ratio "$wc_" "$wxr")× | > 1×: $(goal "$(ratio "$wc_" "$wxr")" 1.0001) |"
  echo "| (c) cold miss vs XCache, HTTP (curl) | $cc MiB/s | $cxh MiB/s | $(ratio "$cc" "$cxh")× | ≥ 3×: $(goal "$(ratio "$cc" "$cxh")" 3) |"
  echo "| (c) cold miss vs XCache, root:// (xrdcp) | $cc MiB/s | $cxr MiB/s | $(ratio "$cc" "$cxr")× | ≥ 3×: $(goal "$(ratio "$cc" "$cxr")" 3) |"
  echo "| (c) same origin as XCache (root://): warm, vs XCache HTTP | $wr MiB/s | $wxh MiB/s | $(ratio "$wr" "$wxh")× | |"
  echo "| (c) same origin as XCache (root://): cold, vs XCache HTTP | $cr MiB/s | $cxh MiB/s | $(ratio "$cr" "$cxh")× | |"
  echo "| (d) uproot, jet_pt of a $((ROOT_SIZE >> 20)) MiB ROOT file, origin $LATENCY away: warm cache vs origin direct | $uc s | $uw s | $(speedup "$uw" "$uc")× faster | ≥ 3×: $(goal "$(speedup "$uw" "$uc")" 3) |"
  echo "| (d) the same, cold cache (first read) vs origin direct | $ucold s | $uw s | $(speedup "$uw" "$ucold")× faster | |"
  echo "| (e) group of $GROUP_NODES nodes, $GROUP_CLIENTS clients × $GROUP_FILES files of $GROUP_MB MiB: origin bytes / file bytes | $GRATIO | 1.0 | | 1.0: $(awk -v v="$GRATIO" 'BEGIN { print (v <= 1.0005 && v >= 0.9995) ? "met" : "missed" }') |"
  echo
  echo "For reference, XCache against its own origin (XRootD) on a cold miss: root:// $cxr vs $cxo MiB/s ($(ratio "$cxr" "$cxo")×), HTTP $cxh vs $cxho MiB/s ($(ratio "$cxh" "$cxho")×)."
} > "$W/table.md"
echo
cat "$W/table.md"
mkdir -p "$(dirname "$OUT")"
cp "$W/table.md" "$OUT"
echo
echo "written to $OUT"

# The CPU profiles, when a goal of (a) or (b') is missed (or PROFILE=1):
# reads run in a loop for PROFILE_SECONDS while pprof samples.
missed=$(awk -v a="$(ratio "$wc_" "$wo")" -v b="$(ratio "$cc" "$cmin")" 'BEGIN { print (a < 0.9 || b < 0.8) ? 1 : 0 }')
if [ "$PROFILE_ASKED" = 1 ] || { [ "$PROFILE_ASKED" = auto ] && [ "$missed" = 1 ]; }; then
  # cold_read URL: one read of URL with %s the next spare cold name
  # (p1..p20) of this profile; once all are read, a pause.
  cold_read() {
    COLD_I=$((COLD_I + 1))
    # shellcheck disable=SC2059 # the URL holds the %s
    if [ $COLD_I -le 20 ]; then curl -sf -o /dev/null "$(printf "$1" "p$COLD_I")" || true; else sleep 0.2; fi
  }
  top() { # NAME: the top of the profile NAME, printed and kept beside OUT
    echo; echo "CPU profile of the cache, ${1#cache-} reads ($PROFILE_SECONDS s):"
    go tool pprof -top -nodecount=30 "$W/lakefed" "$PROFILE_DIR/$1.pprof" 2>/dev/null | tee "${OUT%.md}-pprof-${1#cache-}.txt"
  }
  profile_loop cache-warm cache curl -sf -o /dev/null "http://127.0.0.1:$LCP/big"
  top cache-warm
  COLD_I=0
  profile_loop cache-cold cache cold_read "http://127.0.0.1:$LCP/cold-%s-lf"
  top cache-cold
  profile_loop cache-root-warm cache-root curl -sf -o /dev/null "http://127.0.0.1:$LRP/big"
  COLD_I=0
  profile_loop cache-root-cold cache-root cold_read "http://127.0.0.1:$LRP/cold-%s-lr"
  profile_loop cache-uproot cache-wan uproot_read "http://127.0.0.1:$LDP/ev.root"
fi
