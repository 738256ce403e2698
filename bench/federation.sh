#!/usr/bin/env bash
# Federator benchmark: the lakefed federator's HEAD (stat) and
# GET-redirect rates with warm metadata, beside nginx answering a fixed 302
# and beside the XRootD redirector (xrootd + cmsd manager, two data
# servers) answering opens of the same files; its p99 at a fixed offered
# load; its rate with cold metadata (every path new) over three sites; and
# the latency of a missing file. One run, one table, so that ratios hold on
# a shared, noisy machine: every figure carries the 1-minute load average
# read just before it was measured.
#
#   bench/federation.sh                      # 90,000 files, 10 s per figure
#   FILES=50000 DUR=5 RATE=20000 bench/federation.sh
#   PROFILE=1 bench/federation.sh            # also CPU profiles of lakefed serve
#
# Everything runs on 127.0.0.1 free ports, started and stopped by this
# script (trap). A trivial Go handler answering a fixed 302 (bench/cmd/go302)
# runs beside nginx, as the floor of Go's HTTP server. The load generators
# share the 2 cores with the servers:
#   wrk -t2 -c64    saturated GET (wrk does not follow redirects), paths
#                   cycled over the warm set by a Lua script, and one fixed path
#   ratetest        (bench/cmd/ratetest) saturated HEAD, open-loop fixed-rate
#                   GET (latency from the scheduled send time), cold and
#                   missing paths
#   xrdopen         (bench/cmd/xrdopen) XRootD opens with go-hep's client
#                   (redirect followed, open + close at the data server) and
#                   the redirector's redirect answer alone
# PROFILE=1 (bench/lib.sh): a CPU profile of the federator during each of
# its figures, each a .pprof and a flame graph .svg in PROFILE_DIR
# (bench/results/profiles): federation-redirect-warm (wrk, the warm set),
# federation-redirect-one-path, federation-head, federation-redirect-ratetest,
# federation-redirect-fixed-rate, federation-redirect-cold and
# federation-missing; the last two, where the storage sites answer a HEAD
# per path, with a profile of site-a beside (NAME-site-a). The profiler
# costs the federator a little CPU: compare figures of runs without it.
# Needs: go, wrk, nginx, xrootd, cmsd, python3 (scripts/install-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh # free_port, wait_port, pprof_flag, profile_run
FILES=${FILES:-90000}        # files on every site (first WARM of them form the warm set; the rest, new
                             # paths, last the cold figure about 5 s; at most 99,900: d%03d/f%05d)
WARM=${WARM:-1000}           # warm set: looked up once before the warm runs
PER=100                      # files per directory
DUR=${DUR:-10}               # seconds per timed figure
CONNS=${CONNS:-64}
RATE=${RATE:-20000}          # fixed offered load for the p99 figure
MISS_N=${MISS_N:-300}        # never-seen missing paths, asked one at a time
LIST_AFTER=${LIST_AFTER:-}   # metadata_cache.list_after for the federator; empty: its default
for t in go wrk nginx xrootd cmsd python3 timeout; do
  command -v $t >/dev/null || { echo "missing $t: run scripts/install-deps.sh" >&2; exit 1; }
done
[ "$FILES" -gt $((WARM * 3)) ] || { echo "FILES must be > 3*WARM" >&2; exit 1; }

W=$(mktemp -d /tmp/lakefed-fedbench.XXXXXX)
chmod 755 "$W"
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for _ in $(seq 50); do
    local up=0
    for p in "${PIDS[@]}"; do kill -0 "$p" 2>/dev/null && up=1; done
    [ $up = 0 ] && break
    sleep 0.1
  done
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  # xrootd/cmsd leave /tmp/<prog>.<instance>.env files behind: drop ours
  for p in "${PIDS[@]}"; do
    for f in /tmp/xrootd.*.env /tmp/cmsd.*.env; do
      [ -f "$f" ] && grep -q "^pid=$p&" "$f" 2>/dev/null && rm -f "$f"
    done
  done
  [ -n "${KEEP:-}" ] && echo "kept $W" >&2 || rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

load1() { cut -d' ' -f1 /proc/loadavg; }
log() { echo "[$(date +%T) load $(load1)] $*" >&2; }

log "building"
go build -o "$W/bin/" ./cmd/lakefed ./bench/cmd/ratetest ./bench/cmd/xrdopen ./bench/cmd/go302

log "creating $FILES files on 3 lakefed sites and 2 XRootD data servers"
python3 - "$W/site-a" "$FILES" "$PER" <<'PY'
import os, sys
root, n, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for i in range(n):
    d = os.path.join(root, "data", "d%03d" % (i // per))
    if i % per == 0:
        os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "f%05d" % i), "w") as f:
        f.write("file %d\n" % i)
PY
chmod -R a+rX "$W/site-a"
# Hard links: same bytes everywhere, created in a second.
for d in site-b site-c xrd/ds1/data xrd/ds2/data; do mkdir -p "$(dirname "$W/$d")"; cp -al "$W/site-a" "$W/$d"; done

# --- three lakefed storage sites and the federator
declare -A SP
for s in site-a site-b site-c; do
  SP[$s]=$(free_port)
  pprof_flag "$s"
  "$W/bin/lakefed" storage --root "$W/$s" --listen 127.0.0.1:${SP[$s]} "${PPROF[@]}" >"$W/$s.log" 2>&1 &
  PIDS+=($!)
done
FP=$(free_port)
cat > "$W/fed.yaml" <<CFG
listen: 127.0.0.1:$FP
federation:
  mode: redirect
  client_networks:
    - networks: [127.0.0.0/8]
      location: [46.23, 6.05]
  metadata_cache:
    max_entries: $((FILES * 2))
    ttl: 10m
    negative_ttl: 5s
$([ -n "$LIST_AFTER" ] && echo "    list_after: $LIST_AFTER")
  health:
    interval: 2s
    timeout: 1s
  endpoints:
    - {name: site-a, url: "http://127.0.0.1:${SP[site-a]}/", location: [46.23, 6.05], timeout: 5s}
    - {name: site-b, url: "http://127.0.0.1:${SP[site-b]}/", location: [41.85, -88.27], timeout: 5s}
    - {name: site-c, url: "http://127.0.0.1:${SP[site-c]}/", location: [51.5, -0.1], timeout: 5s}
CFG
for s in site-a site-b site-c; do wait_port ${SP[$s]}; done
pprof_flag fed
"$W/bin/lakefed" serve --config "$W/fed.yaml" "${PPROF[@]}" >"$W/fed.log" 2>&1 &
PIDS+=($!)

# --- nginx answering a fixed 302 (to site-a, as the federator would)
NP=$(free_port)
mkdir -p "$W/nginx/logs"
cat > "$W/nginx/nginx.conf" <<CFG
$([ "$(id -u)" = 0 ] && echo "user root root;")
worker_processes auto;
pid $W/nginx/nginx.pid;
error_log $W/nginx/logs/error.log warn;
events { worker_connections 1024; }
http {
  access_log off; keepalive_requests 100000000; keepalive_timeout 120s;
  client_body_temp_path $W/nginx; proxy_temp_path $W/nginx; fastcgi_temp_path $W/nginx;
  uwsgi_temp_path $W/nginx; scgi_temp_path $W/nginx;
  server {
    listen 127.0.0.1:$NP;
    location / { return 302 http://127.0.0.1:${SP[site-a]}\$uri; }
  }
}
CFG
nginx -p "$W/nginx" -c "$W/nginx/nginx.conf" -g 'daemon off;' >"$W/nginx/logs/out.log" 2>&1 &
PIDS+=($!)

# --- a trivial Go net/http handler answering a fixed 302: the floor of Go's HTTP server
GP=$(free_port)
"$W/bin/go302" -listen 127.0.0.1:$GP -location "http://127.0.0.1:${SP[site-a]}" >"$W/go302.log" 2>&1 &
PIDS+=($!)

# --- XRootD federation: redirector (manager) + two data servers, as in
# /work/shared/servers/fed_start.sh. XRootD refuses to run as root.
XR=$(free_port); XRC=$(free_port); XD1=$(free_port); XD2=$(free_port)
RUNAS=(); [ "$(id -u)" = 0 ] && RUNAS=(-R xrootd)
xrd_cfg() { # NAME ROLE XROOTD_PORT CMSD_PORT
  mkdir -p "$W/xrd/$1/admin" "$W/xrd/$1/run" "$W/xrd/$1/data"
  cat > "$W/xrd/$1/xrootd.cfg" <<CFG
all.role $2
all.manager 127.0.0.1:$XRC
all.export /
oss.localroot $W/xrd/$1/data
all.adminpath $W/xrd/$1/admin
all.pidpath $W/xrd/$1/run
xrd.port $3 if exec xrootd
xrd.port $4 if exec cmsd
cms.delay startup 2 servers 2
cms.space min 100m 200m
CFG
}
xrd_cfg redir manager "$XR" "$XRC"
xrd_cfg ds1 server "$XD1" any
xrd_cfg ds2 server "$XD2" any
if [ "$(id -u)" = 0 ]; then
  for n in redir ds1 ds2; do chown -R xrootd: "$W/xrd/$n/admin" "$W/xrd/$n/run"; chown xrootd: "$W/xrd/$n"; done
fi
for n in redir ds1 ds2; do
  cmsd "${RUNAS[@]}" -n "$n" -c "$W/xrd/$n/xrootd.cfg" -l "$W/xrd/$n/cmsd.log" >"$W/xrd/$n/cmsd.out" 2>&1 </dev/null &
  PIDS+=($!)
  for _ in $(seq 100); do compgen -G "$W/xrd/$n/admin/$n/.olb/olbd.*" >/dev/null && break; sleep 0.1; done
  xrootd "${RUNAS[@]}" -n "$n" -c "$W/xrd/$n/xrootd.cfg" -l "$W/xrd/$n/xrootd.log" >"$W/xrd/$n/xrootd.out" 2>&1 </dev/null &
  PIDS+=($!)
done
for p in $FP $NP $GP $XRC $XR $XD1 $XD2; do wait_port "$p"; done
for _ in $(seq 150); do grep -q 'Status changed to active' "$W/xrd/redir/redir/cmsd.log" 2>/dev/null && break; sleep 0.2; done
grep -q 'Status changed to active' "$W/xrd/redir/redir/cmsd.log" || { echo "XRootD redirector never turned active (logs in $W/xrd)" >&2; KEEP=1; exit 1; }
log "servers up: federator :$FP, sites :${SP[site-a]} :${SP[site-b]} :${SP[site-c]}, nginx :$NP, xrootd redirector :$XR (data :$XD1 :$XD2)"

FED=http://127.0.0.1:$FP
NGX=http://127.0.0.1:$NP
GO=http://127.0.0.1:$GP
PAT=/data/d%03d/f%05d
RT=("$W/bin/ratetest" -pattern "$PAT" -per $PER)
XO=("$W/bin/xrdopen" -addr 127.0.0.1:$XR -pattern "$PAT" -per $PER)
TO=$((DUR + 60)) # every tool run is bounded in time

# kv LINE KEY -> the value of KEY=... in LINE
kv() { sed -n "s/.*\\b$2=\\([^ ]*\\).*/\\1/p" <<<"$1"; }
declare -A V L # V[figure]=value, L[figure]=load average before it

# ratetest LABEL ARGS... -> prints and returns its line; records the load
rt() { local lab=$1; shift; L[$lab]=$(load1); local out; out=$(timeout $TO "${RT[@]}" "$@"); log "$lab: $out"; R=$out; }
xo() { local lab=$1; shift; L[$lab]=$(load1); local out; out=$(timeout $TO "${XO[@]}" "$@"); log "$lab: $out"; R=$out; }
wrkrun() { # LABEL URL [LUA]
  local lab=$1 url=$2; shift 2
  L[$lab]=$(load1)
  local out; out=$(timeout $TO wrk -t2 -c$CONNS -d${DUR}s "$@" "$url")
  V[$lab]=$(awk '/Requests\/sec/ {printf "%.0f", $2}' <<<"$out")
  local non; non=$(awk '/Non-2xx or 3xx/ {print $NF}' <<<"$out")
  log "$lab: ${V[$lab]} req/s${non:+ (non-2xx/3xx: $non)}"
}

# The wrk Lua script cycles over the warm set, as ratetest does.
cat > "$W/paths.lua" <<LUA
local n, i = $WARM, 0
request = function()
  local k = i % n
  i = i + 1
  return wrk.format(nil, string.format("$PAT", math.floor(k / $PER), k))
end
LUA

# --- warm the federator's metadata for the warm set (one lookup each)
rt warmup -url $FED -method GET -files $WARM -unique -c $CONNS -d 60s -expect 302
[ "$(kv "$R" bad)" = 0 ] && [ "$(kv "$R" requests)" = "$WARM" ] || { echo "warm-up failed: $R" >&2; KEEP=1; exit 1; }
curl -sf -o /dev/null -w '%{http_code} %{redirect_url}\n' "$FED/data/d000/f00000" | grep -q '^302 http' || { echo "no redirect from the federator" >&2; exit 1; }

# --- warm GET redirect rate, saturated (wrk)
profile_run federation-redirect-warm fed "$DUR" wrkrun fed_get_wrk "$FED" -s "$W/paths.lua"
wrkrun go_get_wrk "$GO" -s "$W/paths.lua"
wrkrun ngx_get_wrk "$NGX" -s "$W/paths.lua"
profile_run federation-redirect-one-path fed "$DUR" wrkrun fed_get_wrk1 "$FED/data/d000/f00000"
wrkrun go_get_wrk1 "$GO/data/d000/f00000"
wrkrun ngx_get_wrk1 "$NGX/data/d000/f00000"

# --- warm HEAD (stat) rate, saturated (ratetest: wrk waits for a body after HEAD)
profile_run federation-head fed "$DUR" rt fed_head -url $FED -method HEAD -files $WARM -c $CONNS -d ${DUR}s -expect 200; V[fed_head]=$(kv "$R" rate); V[fed_head_bad]=$(kv "$R" bad)
rt go_head -url $GO -method HEAD -files $WARM -c $CONNS -d ${DUR}s -expect 302; V[go_head]=$(kv "$R" rate)
rt ngx_head -url $NGX -method HEAD -files $WARM -c $CONNS -d ${DUR}s -expect 302; V[ngx_head]=$(kv "$R" rate)
profile_run federation-redirect-ratetest fed "$DUR" rt fed_get_rt -url $FED -method GET -files $WARM -c $CONNS -d ${DUR}s -expect 302; V[fed_get_rt]=$(kv "$R" rate)
rt go_get_rt -url $GO -method GET -files $WARM -c $CONNS -d ${DUR}s -expect 302; V[go_get_rt]=$(kv "$R" rate)
rt ngx_get_rt -url $NGX -method GET -files $WARM -c $CONNS -d ${DUR}s -expect 302; V[ngx_get_rt]=$(kv "$R" rate)

# --- latency at a fixed offered load (open loop, from the scheduled send time)
for s in fed go ngx; do
  case $s in fed) u=$FED ;; go) u=$GO ;; ngx) u=$NGX ;; esac
  if [ $s = fed ]; then profile_during federation-redirect-fixed-rate fed "$DUR"; fi
  rt ${s}_fixed -url $u -method GET -files $WARM -c $CONNS -d ${DUR}s -rate $RATE -expect 302
  profile_collect
  for k in rate p50_ms p90_ms p99_ms max_ms bad errors; do V[${s}_fixed_$k]=$(kv "$R" $k); done
done

# --- cold metadata: every path new (never looked up), three sites each asked
profile_during federation-redirect-cold-site-a site-a
profile_run federation-redirect-cold fed "" rt fed_cold -url $FED -method GET -first $WARM -files $((FILES - WARM)) -unique -c $CONNS -d ${DUR}s -expect 302
V[fed_cold]=$(kv "$R" rate); V[fed_cold_n]=$(kv "$R" requests); V[fed_cold_p99]=$(kv "$R" p99_ms); V[fed_cold_bad]=$(kv "$R" bad)
[ "${V[fed_cold_n]}" -lt $((FILES - WARM)) ] || echo "note: the cold run used every path; raise FILES for a full-length cold run" >&2

# --- missing files: never-seen paths, one request at a time (3 sites say 404)
profile_during federation-missing-site-a site-a
profile_run federation-missing fed "" rt fed_miss -url $FED -method GET -pattern "/missing/r$$-%06d" -files $MISS_N -unique -c 1 -d 60s -expect 404
V[miss_p50]=$(kv "$R" p50_ms); V[miss_p99]=$(kv "$R" p99_ms); V[miss_bad]=$(kv "$R" bad); V[miss_n]=$(kv "$R" requests)

# --- XRootD redirector: cold (first open of each file), then warm (the
# warm set, located by a first pass)
HALF=$(((FILES - WARM) / 2))
xo xrd_redir_cold -mode redirect -first $WARM -files $HALF -unique -c $CONNS -d ${DUR}s
V[xrd_redir_cold]=$(kv "$R" rate); V[xrd_redir_cold_p99]=$(kv "$R" p99_ms); V[xrd_redir_cold_w]=$(kv "$R" waits)
xo xrd_open_cold -mode follow -first $((WARM + HALF)) -files $HALF -unique -c $CONNS -d ${DUR}s
V[xrd_open_cold]=$(kv "$R" rate); V[xrd_open_cold_p99]=$(kv "$R" p99_ms); V[xrd_open_cold_w]=$(kv "$R" waits)
xo xrd_locate -mode redirect -files $WARM -unique -c $CONNS -d 60s
xo xrd_redir -mode redirect -files $WARM -c $CONNS -d ${DUR}s
V[xrd_redir]=$(kv "$R" rate); V[xrd_redir_p99]=$(kv "$R" p99_ms); V[xrd_redir_e]=$(kv "$R" errors)
xo xrd_open -mode follow -files $WARM -c $CONNS -d ${DUR}s
V[xrd_open]=$(kv "$R" rate); V[xrd_open_p99]=$(kv "$R" p99_ms); V[xrd_open_e]=$(kv "$R" errors)
# XRootD missing files: a few, all at once (the redirector's lookup delay makes each take seconds)
xo xrd_miss -mode redirect -missing -pattern "/missing/r$$-%06d" -files 16 -unique -c 16 -d 60s -timeout 40s
V[xrd_miss_p50]=$(kv "$R" p50_ms); V[xrd_miss_p99]=$(kv "$R" p99_ms); V[xrd_miss_n]=$(kv "$R" opens)

# --- the table
r() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
ok() { awk -v a="$1" -v b="$2" -v dir="$3" 'BEGIN { if (a == "" || a == "nan") print "?"; else if ((dir == ">=" && a >= b) || (dir == "<=" && a <= b)) print "met"; else print "MISSED" }'; }
echo
echo "federation benchmark: FILES=$FILES WARM=$WARM CONNS=$CONNS DUR=${DUR}s RATE=$RATE, $(nproc) cores, $(date -u +%FT%TZ)"
printf '%-52s %15s %15s %15s  %s\n' "figure" "federator" "Go fixed 302" "nginx fixed 302" "load1 (each)"
row() { printf '%-52s %15s %15s %15s  %s\n' "$@"; }
row "GET redirect, warm, wrk -c$CONNS, $WARM paths (req/s)" "${V[fed_get_wrk]}" "${V[go_get_wrk]}" "${V[ngx_get_wrk]}" "${L[fed_get_wrk]} ${L[go_get_wrk]} ${L[ngx_get_wrk]}"
row "GET redirect, warm, wrk -c$CONNS, one path (req/s)" "${V[fed_get_wrk1]}" "${V[go_get_wrk1]}" "${V[ngx_get_wrk1]}" "${L[fed_get_wrk1]} ${L[go_get_wrk1]} ${L[ngx_get_wrk1]}"
row "GET redirect, warm, ratetest -c$CONNS (req/s)" "${V[fed_get_rt]}" "${V[go_get_rt]}" "${V[ngx_get_rt]}" "${L[fed_get_rt]} ${L[go_get_rt]} ${L[ngx_get_rt]}"
row "HEAD (stat), warm, ratetest -c$CONNS (req/s)" "${V[fed_head]}" "${V[go_head]}" "${V[ngx_head]}" "${L[fed_head]} ${L[go_head]} ${L[ngx_head]}"
row "GET at $RATE/s offered, open loop: achieved (req/s)" "${V[fed_fixed_rate]}" "${V[go_fixed_rate]}" "${V[ngx_fixed_rate]}" "${L[fed_fixed]} ${L[go_fixed]} ${L[ngx_fixed]}"
row "  p50 / p90 (ms)" "${V[fed_fixed_p50_ms]}/${V[fed_fixed_p90_ms]}" "${V[go_fixed_p50_ms]}/${V[go_fixed_p90_ms]}" "${V[ngx_fixed_p50_ms]}/${V[ngx_fixed_p90_ms]}" ""
row "  p99 / max (ms)" "${V[fed_fixed_p99_ms]}/${V[fed_fixed_max_ms]}" "${V[go_fixed_p99_ms]}/${V[go_fixed_max_ms]}" "${V[ngx_fixed_p99_ms]}/${V[ngx_fixed_max_ms]}" ""
row "GET redirect, cold (every path new, 3 sites) (req/s)" "${V[fed_cold]}" "-" "-" "${L[fed_cold]}"
row "  cold: requests / p99 (ms)" "${V[fed_cold_n]}/${V[fed_cold_p99]}" "-" "-" ""
row "missing file 404, 1 client, $MISS_N paths: p50/p99 ms" "${V[miss_p50]}/${V[miss_p99]}" "-" "-" "${L[fed_miss]}"
echo
printf '%-52s %15s %15s  %s\n' "XRootD redirector (xrootd+cmsd, 2 data servers)" "opens/s" "p99 ms" "load1"
xrow() { printf '%-52s %15s %15s  %s\n' "$@"; }
xrow "redirect answer only, warm (located files)" "${V[xrd_redir]}" "${V[xrd_redir_p99]}" "${L[xrd_redir]}"
xrow "open+close via redirect, warm" "${V[xrd_open]}" "${V[xrd_open_p99]}" "${L[xrd_open]}"
xrow "redirect answer only, cold (first open of each)" "${V[xrd_redir_cold]}" "${V[xrd_redir_cold_p99]}" "${L[xrd_redir_cold]}"
xrow "open+close via redirect, cold" "${V[xrd_open_cold]}" "${V[xrd_open_cold_p99]}" "${L[xrd_open_cold]}"
xrow "missing file, 16 at once: p50 / p99 (ms)" "${V[xrd_miss_p50]}/${V[xrd_miss_p99]}" "n=${V[xrd_miss_n]}" "${L[xrd_miss]}"
echo
printf '%-58s %12s %10s %8s\n' "goal" "measured" "ratio" "verdict"
goal() { printf '%-58s %12s %10s %8s\n' "$1" "$2" "$3" "$4"; }
goal "warm GET redirects >= 0.8x nginx fixed 302 (wrk, $WARM paths)" "${V[fed_get_wrk]}" "$(r "${V[fed_get_wrk]}" "${V[ngx_get_wrk]}")" "$(ok "$(r "${V[fed_get_wrk]}" "${V[ngx_get_wrk]}")" 0.8 '>=')"
goal "warm HEAD >= 0.8x nginx fixed 302 (ratetest)" "${V[fed_head]}" "$(r "${V[fed_head]}" "${V[ngx_head]}")" "$(ok "$(r "${V[fed_head]}" "${V[ngx_head]}")" 0.8 '>=')"
goal "p99 <= 2 ms at $RATE/s offered" "${V[fed_fixed_p99_ms]}" "$(r 2 "${V[fed_fixed_p99_ms]}")" "$(ok "${V[fed_fixed_p99_ms]}" 2 '<=')"
goal ">= 10x XRootD open rate (warm, open+close)" "${V[fed_get_wrk]}" "$(r "${V[fed_get_wrk]}" "${V[xrd_open]}")x" "$(ok "$(r "${V[fed_get_wrk]}" "${V[xrd_open]}")" 10 '>=')"
goal ">= 2x XRootD cold open rate (cold vs cold open+close)" "${V[fed_cold]}" "$(r "${V[fed_cold]}" "${V[xrd_open_cold]}")x" "$(ok "$(r "${V[fed_cold]}" "${V[xrd_open_cold]}")" 2 '>=')"
goal "missing file 404 in <= 50 ms (p99)" "${V[miss_p99]}" "$(r 50 "${V[miss_p99]}")" "$(ok "${V[miss_p99]}" 50 '<=')"
goal "federator / XRootD redirect answers (warm, redirect only)" "${V[fed_get_wrk]}" "$(r "${V[fed_get_wrk]}" "${V[xrd_redir]}")x" "-"
goal "federator / Go fixed 302 (wrk, $WARM paths)" "${V[fed_get_wrk]}" "$(r "${V[fed_get_wrk]}" "${V[go_get_wrk]}")" "-"
echo "(bad answers: head ${V[fed_head_bad]}, fixed-rate ${V[fed_fixed_bad]}/${V[ngx_fixed_bad]}, cold ${V[fed_cold_bad]}, missing ${V[miss_bad]} of ${V[miss_n]}; XRootD warm errors ${V[xrd_redir_e]}/${V[xrd_open_e]})"
