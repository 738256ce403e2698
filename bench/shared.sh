#!/usr/bin/env bash
# Shared-state benchmark: what sharing the federators' state through
# Redis costs and what it saves, every figure from one run, each as a
# ratio:
#
# (1) warm GET redirect rate of a federator sharing state through Redis
#     beside the same federator alone (same config otherwise): wrk -c64
#     over the warm set, as bench/federation.sh, alternating the two
#     ROUNDS (3) times so that drift on a shared machine falls on both.
#     Goal ≥ 0.95×.
# (2) cold look-ups through three federators: COLD new paths, each asked
#     of the three at once (bench/cmd/coldfan); the storage sites' own
#     access logs count how many times each path reached each site.
#     Three federators sharing Redis, beside three alone (3 asks per path
#     per site). Goal ≤ 1.1.
# (3) bytes per metadata entry at ENTRIES (10^6) entries: the federator's
#     Go heap after GC divided by entries, and Redis's used_memory
#     (INFO memory) delta divided by entries (bench/cmd/entrybytes; each
#     entry a file on three sites, filled by one GET through the
#     federator's handler; in Redis, the first 50,000 stored by real
#     look-ups through it, the rest copies of those under their own
#     paths, since a million look-ups through Redis take minutes here).
#     Goal ≤ 200 B in the process.
# (4) the Redis client: go-redis v9 (what lakefed uses, invalidations by
#     publish/subscribe) against rueidis (RESP3 client-side caching,
#     invalidations pushed by CLIENT TRACKING): GET of a ~300 B metadata
#     key, and an invalidation round seen by another client
#     (bench/cmd/redisclients, a module of its own).
#
#   bench/shared.sh                                   # about 4 minutes
#   DUR=5 COLD=1000 ENTRIES=100000 bench/shared.sh    # quick check
#   PROFILE=1 bench/shared.sh     # also CPU profiles of the federators
#
# Everything runs on 127.0.0.1 free ports, started and stopped by this
# script: three lakefed storage sites (--access-log), six federators
# (three alone, three sharing one redis-server), and a redis-server of
# its own for each of (3) and (4). The table is printed and written as
# markdown to OUT (default bench/results/shared.md).
# PROFILE=1 (bench/lib.sh): CPU profiles, each a .pprof and a flame graph
# .svg in PROFILE_DIR (bench/results/profiles): shared-warm-alone and
# shared-warm-shared (u0 and s0 during the first warm run of each),
# shared-cold-shared and shared-cold-alone (s0 and u0, one of the three
# federators asked, during the cold run), with site-a beside
# (NAME-site-a). (3) and (4) run no lakefed process.
# Needs: go, wrk, curl, python3, redis-server (REDIS_SERVER, else PATH, else
# /usr/bin/redis-server).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh # free_port, wait_port, pprof_flag, profile_run
WARM=${WARM:-1000}          # warm set: paths looked up once before the warm runs
DUR=${DUR:-10}              # seconds of each warm wrk run
ROUNDS=${ROUNDS:-3}         # warm runs of each federator, alternating
CONNS=${CONNS:-64}
COLD=${COLD:-2000}          # new paths asked of the three federators, per run
COLD_C=${COLD_C:-8}         # paths asked at once
ENTRIES=${ENTRIES:-1000000} # metadata entries for (3)
CLIENT_DUR=${CLIENT_DUR:-3} # seconds of each client figure
PER=100
OUT=${OUT:-bench/results/shared.md}
REDIS_SERVER=${REDIS_SERVER:-$(command -v redis-server || echo /usr/bin/redis-server)}
for t in go wrk curl python3 timeout "$REDIS_SERVER"; do
  command -v "$t" >/dev/null || { echo "missing $t: run scripts/install-deps.sh" >&2; exit 1; }
done

new_workdir lakefed-sharedbench
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
  [ -n "${KEEP:-}" ] && echo "kept $W" >&2 || rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
load1() { cut -d' ' -f1 /proc/loadavg; }
log() { echo "[$(date +%T) load $(load1)] $*" >&2; }
kv() { sed -n "s/.*\\b$2=\\([^ ]*\\).*/\\1/p" <<<"$1"; }
declare -A V L # V[figure]=value, L[figure]=load average before it

log "building"
go build -o "$W/bin/" ./cmd/lakefed ./bench/cmd/ratetest ./bench/cmd/coldfan ./bench/cmd/entrybytes
(cd bench/cmd/redisclients && go build -o "$W/bin/redisclients" .)

# start_redis NAME: a redis-server without persistence on a free port,
# set in RP; its pid is in RPID.
start_redis() {
  RP=$(free_port)
  mkdir -p "$W/$1"
  "$REDIS_SERVER" --bind 127.0.0.1 --port "$RP" --save '' --appendonly no --dir "$W/$1" >"$W/$1/log" 2>&1 &
  RPID=$!
  PIDS+=($RPID)
  wait_port "$RP"
}

log "creating files: $WARM warm, 2 x $COLD cold, on 3 sites"
python3 - "$W/site-a" "$WARM" "$COLD" "$PER" <<'PY'
import os, sys
root, warm, cold, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
for top, n in (("warm", warm), ("cold-s", cold), ("cold-u", cold)):
    for i in range(n):
        d = os.path.join(root, top, "d%03d" % (i // per))
        if i % per == 0:
            os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "f%05d" % i), "w") as f:
            f.write("file %d\n" % i)
PY
chmod -R a+rX "$W/site-a"
for s in site-b site-c; do cp -al "$W/site-a" "$W/$s"; done

declare -A SP
for s in site-a site-b site-c; do
  SP[$s]=$(free_port)
  pprof_flag "$s"
  "$W/bin/lakefed" storage --root "$W/$s" --listen 127.0.0.1:${SP[$s]} --access-log "${PPROF[@]}" >"$W/$s.log" 2>&1 &
  PIDS+=($!)
done
start_redis redis-fed
FED_REDIS=$RP

# Six federators, one config but for the shared section: u0..u2 alone,
# s0..s2 sharing Redis.
declare -A FP FPID
for f in u0 u1 u2 s0 s1 s2; do
  FP[$f]=$(free_port)
  {
    echo "listen: 127.0.0.1:${FP[$f]}"
    [[ $f == s* ]] && echo "shared: {redis: \"redis://127.0.0.1:$FED_REDIS/0\", node: fed-$f}"
    cat <<CFG
federation:
  mode: redirect
  client_networks:
    - networks: [127.0.0.0/8]
      location: [46.23, 6.05]
  metadata_cache:
    max_entries: $(((WARM + 2 * COLD) * 2))
    ttl: 10m
    negative_ttl: 5s
  health:
    interval: 2s
    timeout: 1s
  endpoints:
    - {name: site-a, url: "http://127.0.0.1:${SP[site-a]}/", location: [46.23, 6.05], timeout: 5s}
    - {name: site-b, url: "http://127.0.0.1:${SP[site-b]}/", location: [41.85, -88.27], timeout: 5s}
    - {name: site-c, url: "http://127.0.0.1:${SP[site-c]}/", location: [51.5, -0.1], timeout: 5s}
CFG
  } > "$W/$f.yaml"
done
for s in site-a site-b site-c; do wait_port ${SP[$s]}; done
for f in u0 u1 u2 s0 s1 s2; do
  pprof_flag "$f"
  "$W/bin/lakefed" serve --config "$W/$f.yaml" "${PPROF[@]}" >"$W/$f.log" 2>&1 &
  FPID[$f]=$!
  PIDS+=($!)
done
for f in u0 u1 u2 s0 s1 s2; do wait_port ${FP[$f]}; done
# metric URL NAME: the federator's counter NAME (0 when absent)
metric() { curl -s "$1/metrics" | awk -v n="$2" '$1 == n { v = $2 } END { printf "%.0f", v }'; }
# A federator sharing state keeps what it looks up only once it holds its
# membership lease, a second or so after it reaches Redis (and says
# X-Lakefed-Shared: ok): until then every look-up asks the endpoints and
# keeps nothing. Wait until a path asked twice is a hit the second time.
wait_trusted() { # URL
  local m
  for _ in $(seq 100); do
    curl -s -o /dev/null "$1/warm/d000/f00000"
    m=$(metric "$1" lakefed_federation_metadata_cache_misses_total)
    curl -s -o /dev/null "$1/warm/d000/f00000"
    [ "$(metric "$1" lakefed_federation_metadata_cache_misses_total)" = "$m" ] && return 0
    sleep 0.1
  done
  echo "$1 never kept a look-up (shared state never trusted?)" >&2
  return 1
}
for f in s0 s1 s2; do wait_trusted "http://127.0.0.1:${FP[$f]}"; done
log "up: sites :${SP[site-a]} :${SP[site-b]} :${SP[site-c]}, federators alone :${FP[u0]} :${FP[u1]} :${FP[u2]}, sharing :${FP[s0]} :${FP[s1]} :${FP[s2]}, redis :$FED_REDIS"

U=http://127.0.0.1:${FP[u0]}
S=http://127.0.0.1:${FP[s0]}
TO=$((DUR + 60))

# --- (1) warm GET redirect rate, shared against alone
cat > "$W/paths.lua" <<LUA
local n, i = $WARM, 0
request = function()
  local k = i % n
  i = i + 1
  return wrk.format(nil, string.format("/warm/d%03d/f%05d", math.floor(k / $PER), k))
end
LUA
for u in "$U" "$S"; do
  R=$(timeout $TO "$W/bin/ratetest" -url "$u" -pattern /warm/d%03d/f%05d -per $PER -method GET -files $WARM -unique -c $CONNS -d 60s -expect 302)
  [ "$(kv "$R" bad)" = 0 ] && [ "$(kv "$R" requests)" = "$WARM" ] || { echo "warm-up of $u failed: $R" >&2; KEEP=1; exit 1; }
done
wrkrun() { # LABEL URL: also counts the look-ups that missed the metadata cache meanwhile
  L[$1]=$(load1)
  local m0; m0=$(metric "$2" lakefed_federation_metadata_cache_misses_total)
  local out; out=$(timeout $TO wrk -t2 -c$CONNS -d${DUR}s -s "$W/paths.lua" "$2")
  V[$1]=$(awk '/Requests\/sec/ {printf "%.0f", $2}' <<<"$out")
  V[$1_miss]=$(($(metric "$2" lakefed_federation_metadata_cache_misses_total) - m0))
  local non; non=$(awk '/Non-2xx or 3xx/ {print $NF}' <<<"$out")
  log "$1: ${V[$1]} req/s, ${V[$1_miss]} metadata cache misses${non:+ (non-2xx/3xx: $non)}"
}
profile_run shared-warm-alone u0 "$DUR" wrkrun alone1 "$U"
profile_run shared-warm-shared s0 "$DUR" wrkrun shared1 "$S"
for i in $(seq 2 "$ROUNDS"); do wrkrun alone$i "$U"; wrkrun shared$i "$S"; done
V[alone]=0 V[shared]=0 RUNS=
for i in $(seq "$ROUNDS"); do
  V[alone]=$((V[alone] + V[alone$i])); V[shared]=$((V[shared] + V[shared$i]))
  RUNS+=" ${V[alone$i]}/${V[shared$i]} (load ${L[alone$i]}/${L[shared$i]}, misses ${V[alone${i}_miss]}/${V[shared${i}_miss]})"
done
V[alone]=$((V[alone] / ROUNDS)); V[shared]=$((V[shared] / ROUNDS))

# --- (2) cold look-ups: each new path asked of three federators at once
# asks PREFIX: requests the three sites' access logs show for paths under PREFIX
asks() { cat "$W"/site-?.log | grep -c "msg=request .*method=[A-Z]* path=$1/" || true; }
site_asks() { grep -c "msg=request .*method=[A-Z]* path=$2/" "$W/$1.log" || true; }
coldrun() { # LABEL PREFIX FED...
  local lab=$1 pre=$2; shift 2
  local urls=() f
  for f in "$@"; do urls+=("http://127.0.0.1:${FP[$f]}"); done
  L[$lab]=$(load1)
  R=$(timeout 300 "$W/bin/coldfan" -urls "$(IFS=,; echo "${urls[*]}")" -pattern "$pre/d%03d/f%05d" -per $PER -files $COLD -c $COLD_C -expect 302)
  log "$lab: $R"
  V[${lab}_rate]=$(kv "$R" rate); V[${lab}_p99]=$(kv "$R" p99_ms); V[${lab}_bad]=$(($(kv "$R" bad) + $(kv "$R" errors)))
}
profile_during shared-cold-shared-site-a site-a
profile_run shared-cold-shared s0 "" coldrun cold_shared /cold-s s0 s1 s2
profile_during shared-cold-alone-site-a site-a
profile_run shared-cold-alone u0 "" coldrun cold_alone /cold-u u0 u1 u2
# the access log is written as each request ends: wait until the counts stop moving
prev=-1
for _ in $(seq 50); do n=$(($(asks /cold-s) + $(asks /cold-u))); [ "$n" = "$prev" ] && break; prev=$n; sleep 0.2; done
perpath() { awk -v a="$1" -v n="$2" 'BEGIN { printf "%.2f", a / n }'; }
for lab in shared alone; do
  pre=/cold-s; [ $lab = alone ] && pre=/cold-u
  V[asks_$lab]=$(perpath "$(asks $pre)" $((COLD * 3)))
  worst=0
  for s in site-a site-b site-c; do
    n=$(site_asks $s $pre); [ "$n" -gt "$worst" ] && worst=$n
  done
  V[asks_${lab}_worst]=$(perpath "$worst" "$COLD")
  log "cold, $lab: ${V[asks_$lab]} asks per path per site (the most asked site: ${V[asks_${lab}_worst]})"
done

# --- (3) bytes per metadata entry, in the process and in Redis
start_redis redis-entries
L[entries]=$(load1)
log "entries: filling $ENTRIES through a federator sharing Redis :$RP"
R=$(timeout 600 "$W/bin/entrybytes" -n "$ENTRIES" -c 128 -redis "redis://127.0.0.1:$RP/0")
log "entries: $R"
V[proc_bytes]=$(kv "$R" proc_bytes); V[redis_bytes]=$(kv "$R" redis_bytes); V[fill_s]=$(kv "$R" fill_s)
V[redis_bytes_real]=$(kv "$R" redis_bytes_real); V[redis_real]=$(kv "$R" real)
kill "$RPID"; wait "$RPID" 2>/dev/null || true

# --- (4) go-redis against rueidis
start_redis redis-clients
L[clients]=$(load1)
while read -r line; do
  n=$(kv "$line" name)
  V[${n}_rate]=$(kv "$line" rate); V[${n}_p50]=$(kv "$line" p50_us); V[${n}_p99]=$(kv "$line" p99_us)
  log "$line"
done < <(timeout 120 "$W/bin/redisclients" -addr 127.0.0.1:$RP -d ${CLIENT_DUR}s -c $CONNS)

# --- the table
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
verdict() { awk -v a="$1" -v b="$2" -v dir="$3" 'BEGIN { if (a == "") print "?"; else if ((dir == ">=" && a >= b) || (dir == "<=" && a <= b)) print "met"; else print "missed" }'; }
C=$CONNS
{
  echo "Shared state, \`bench/shared.sh\` (WARM=$WARM paths, wrk -c$CONNS ${DUR}s × $ROUNDS each, alternating; COLD=$COLD paths × 3 federators, $COLD_C paths at once; ENTRIES=$ENTRIES; three lakefed storage sites on loopback, $(nproc) cores shared by everything, load average $(load1) at the end; $(date -u +%Y-%m-%d))."
  echo
  echo "| measurement | sharing Redis | alone | ratio | goal |"
  echo "|---|---:|---:|---:|---|"
  echo "| (1) warm GET redirects/s, wrk -c$CONNS, $WARM paths (mean of $ROUNDS runs each) | ${V[shared]} | ${V[alone]} | $(ratio "${V[shared]}" "${V[alone]}")× | ≥ 0.95×: $(verdict "$(ratio "${V[shared]}" "${V[alone]}")" 0.95 '>=') |"
  echo "| (2) cold: asks per path per site, 3 federators asked at once | ${V[asks_shared]} | ${V[asks_alone]} | $(ratio "${V[asks_shared]}" "${V[asks_alone]}")× | ≤ 1.1: $(verdict "${V[asks_shared]}" 1.1 '<=') |"
  echo "| (2) cold: the most asked site, asks per path | ${V[asks_shared_worst]} | ${V[asks_alone_worst]} | | |"
  echo "| (2) cold: paths/s (3 GETs each), p99 of a GET (ms) | ${V[cold_shared_rate]}, ${V[cold_shared_p99]} | ${V[cold_alone_rate]}, ${V[cold_alone_p99]} | $(ratio "${V[cold_shared_rate]}" "${V[cold_alone_rate]}")× | |"
  echo "| (3) bytes per metadata entry in the federator's heap, $ENTRIES entries | ${V[proc_bytes]} B | | $(ratio "${V[proc_bytes]}" 200)× the goal | ≤ 200 B: $(verdict "${V[proc_bytes]}" 200 '<=') |"
  echo "| (3) bytes per metadata entry in Redis (used_memory), $ENTRIES entries | ${V[redis_bytes]} B | | | |"
  echo "| (3) the same over the first ${V[redis_real]}, stored by real look-ups (the rest are copies of them) | ${V[redis_bytes_real]} B | | | |"
  echo
  echo "| Redis client (one redis-server, ${CLIENT_DUR}s each) | ops/s | p50 µs | p99 µs | / go-redis |"
  echo "|---|---:|---:|---:|---:|"
  for c in 1 $C; do
    for n in goredis_get rueidis_get rueidis_cached_get; do
      k=${n}_c$c
      echo "| $n, $c caller$([ "$c" = 1 ] || echo s) | ${V[${k}_rate]} | ${V[${k}_p50]} | ${V[${k}_p99]} | $(ratio "${V[${k}_rate]}" "${V[goredis_get_c${c}_rate]}")× |"
    done
  done
  for n in goredis_inval rueidis_inval; do
    echo "| $n, rounds one at a time | ${V[${n}_rate]} | ${V[${n}_p50]} | ${V[${n}_p99]} | $(ratio "${V[${n}_rate]}" "${V[goredis_inval_rate]}")× |"
  done
  echo
  echo "Warm runs, alone/sharing req/s (load average before each, metadata cache misses during each):$RUNS. Load average before: cold ${L[cold_shared]} ${L[cold_alone]}; entries ${L[entries]} (fill ${V[fill_s]} s); clients ${L[clients]}. Bad answers: cold ${V[cold_shared_bad]} / ${V[cold_alone_bad]}."
} > "$W/table.md"
echo
cat "$W/table.md"
mkdir -p "$(dirname "$OUT")"
cp "$W/table.md" "$OUT"
echo
echo "written to $OUT"
