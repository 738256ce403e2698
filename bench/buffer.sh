#!/usr/bin/env bash
# Write-buffer benchmark: the Russian data-lake prototype's
# synthetic test on loopback. WRITERS writers (10) each upload FILES files
# (10) of SIZE_MB MB (100; MB = 10^6 bytes, as the proxy counts) with
# curl -T, one file after the other, all writers at once:
#
#   bench/buffer.sh                                   # 10 × 10 × 100 MB = 10 GB
#   SIZE_MB=10 bench/buffer.sh                        # quick check, 1 GB
#   WRITERS=4 FILES=3 SIZE_MB=5 OUT=/tmp/b.md bench/buffer.sh   # smoke test
#   PROFILE=1 bench/buffer.sh                         # also CPU profiles of lakefed
#
# The target is a lakefed storage role behind bench/cmd/wanproxy adding
# LATENCY (20 ms) to the round trip and throttling both directions to
# BANDWIDTH (50 MB/s): that is the WAN. toxiproxy's bandwidth toxic acts
# per TCP connection, so each writer's stream gets 50 MB/s, as the
# prototype's did (its direct run, 10 GB in 22 s, is 450 MB/s in all).
#
# (a) direct: the writers PUT to the target through the proxy.
# (b) buffered: the writers PUT to a lakefed federator (lakefed serve) whose
#     write buffer (buffer: in its config, spool in BUFFER_DIR) takes every
#     file under /buffered and migrates it to the target through the proxy,
#     PARALLEL (10) files at once; every PUT must be a 201 whose Digest
#     holds the source's adler32.
# (c) migration: from the start of (b), polling /api/buffer until
#     pending_files is 0 and every file counts as migrated (verified on the
#     target by the buffer); then this script reads every file on the
#     target's disk and checks its adler32 against the source's itself.
#
# HOLD_MIGRATION=1 stops the proxy during (b) and starts it again on the
# same port when the last file is acknowledged: the mover (and the proxy
# and target it drives) then do not compete with the writers for the
# CPU, which on a 2-core machine they do (on a real site the WAN is not
# on the writers' cores). (c) then includes the wait for the retry.
#
# Goal: (b) ≥ 3× faster than (a); 100 % of the files migrated and
# verified. The prototype (EOS disks, its LRU and converter engines):
# 22 s direct, 12 s buffered (1.8×), about 10 % never migrated.
#
# Sources: FILES distinct random files; writer w's file f is source
# (f + w) mod FILES, so every path of a writer differs from its
# neighbours' and a file migrated to the wrong path fails the check.
# The disk: the buffered run writes every byte twice on this machine (the
# spool, then the target), and (b) is bound by how fast the spool's disk
# takes fsynced writes, on a machine whose 2 cores are shared with the
# writers, the proxy and the target. The script checks df first and
# shrinks SIZE_MB to fit, saying so. BUFFER_DIR=/dev/shm/... puts the spool
# on tmpfs to measure the buffer rather than the disk (it then holds up to
# the whole data set in RAM). The table is printed and written as markdown
# to OUT (default bench/results/buffer.md).
# PROFILE=1 (bench/lib.sh): CPU profiles, each a .pprof and a flame graph
# .svg in PROFILE_DIR (bench/results/profiles): buffer-direct-target (the
# target's storage role during (a)), buffer-buffered and
# buffer-buffered-target (the federator with its buffer, and the target,
# from the start of (b) until (c) ends).
# Needs: go, curl, python3.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
WRITERS=${WRITERS:-10}
FILES=${FILES:-10}
SIZE_MB=${SIZE_MB:-100}
LATENCY=${LATENCY:-20ms}
BANDWIDTH=${BANDWIDTH:-50}
PARALLEL=${PARALLEL:-10}
MIGRATE_TIMEOUT=${MIGRATE_TIMEOUT:-900}
HOLD_MIGRATION=${HOLD_MIGRATION:-0}
BUFFER_DIR=${BUFFER_DIR:-}
OUT=${OUT:-bench/results/buffer.md}
for t in curl python3 go; do command -v $t >/dev/null || { echo "missing $t: run scripts/install-deps.sh" >&2; exit 1; }; done

new_workdir lakefed-buffer-bench
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$W" "${SPOOL_ROOT:-$W}"
}
trap cleanup EXIT
SPOOL_ROOT=$W
if [ -n "$BUFFER_DIR" ]; then SPOOL_ROOT=$(mktemp -d "$BUFFER_DIR/lakefed-buffer-bench.XXXXXX"); fi
log() { echo "$(date -u +%H:%M:%S) $*" >&2; }

# The disk: the sources, then at most the spool and the target's copies
# at once (the direct run's copies are removed before the buffered run),
# with 2 GB to spare. Shrink SIZE_MB until that fits.
avail_mb() { df --output=avail -B 1000000 "$1" | tail -1 | tr -d ' '; }
need_mb() { # SIZE_MB → MB needed
  local s=$1 same
  same=$([ "$(stat -c %d "$W")" = "$(stat -c %d "$SPOOL_ROOT")" ] && echo 1 || echo 0)
  echo $((s * FILES + WRITERS * FILES * s * (1 + same) + 2000))
}
ASKED_MB=$SIZE_MB
while [ "$SIZE_MB" -gt 1 ] && [ "$(need_mb "$SIZE_MB")" -gt "$(avail_mb "$W")" ]; do SIZE_MB=$((SIZE_MB / 2)); done
if [ -n "$BUFFER_DIR" ]; then
  while [ "$SIZE_MB" -gt 1 ] && [ $((WRITERS * FILES * SIZE_MB + 1000)) -gt "$(avail_mb "$SPOOL_ROOT")" ]; do SIZE_MB=$((SIZE_MB / 2)); done
fi
SCALED=""
if [ "$SIZE_MB" != "$ASKED_MB" ]; then
  SCALED="scaled down from $ASKED_MB MB files: $(avail_mb "$W") MB free"
  log "not enough disk for $ASKED_MB MB files ($(need_mb "$ASKED_MB") MB needed, $(avail_mb "$W") MB free): using $SIZE_MB MB"
fi
SIZE=$((SIZE_MB * 1000000))
N=$((WRITERS * FILES))
TOTAL=$((N * SIZE))

go build -o "$W/lakefed" ./cmd/lakefed
go build -o "$W/wanproxy" ./bench/cmd/wanproxy

log "writing $FILES sources of $SIZE_MB MB"
SRC=$W/src
mkdir -p "$SRC"
for s in $(seq 0 $((FILES - 1))); do head -c "$SIZE" /dev/urandom > "$SRC/s$s"; done
# adler32 of each source, as the buffer and the storage role write it.
cat > "$W/adler.py" <<'PY'
import sys, zlib
def adler(p):
    a = 1
    with open(p, "rb") as f:
        while True:
            b = f.read(1 << 22)
            if not b:
                return "%08x" % a
            a = zlib.adler32(b, a)
for p in sys.argv[1:]:
    print(p, adler(p))
PY
declare -A SUM
while read -r p a; do SUM[$(basename "$p")]=$a; done < <(python3 "$W/adler.py" "$SRC"/s*)

# The target: a storage role, behind the WAN proxy.
T=$W/target
mkdir -p "$T"
TP=$(free_port)
pprof_flag target
"$W/lakefed" storage --root "$T" --listen 127.0.0.1:$TP "${PPROF[@]}" >"$W/target.log" 2>&1 &
PIDS+=($!)
wait_port $TP
# start_wan [ADDR]: the proxy, on ADDR or a free port; WAN is its address.
start_wan() {
  : > "$W/wanproxy.out"
  "$W/wanproxy" -listen "${1:-127.0.0.1:0}" -upstream 127.0.0.1:$TP -latency "$LATENCY" -bandwidth "$BANDWIDTH" -up-bandwidth "$BANDWIDTH" >"$W/wanproxy.out" 2>&1 &
  WANPID=$!
  PIDS+=($WANPID)
  for _ in $(seq 100); do grep -q listening "$W/wanproxy.out" 2>/dev/null && break; sleep 0.1; done
  WAN=$(awk '/listening/ {print $2}' "$W/wanproxy.out")
  [ -n "$WAN" ] || { cat "$W/wanproxy.out" >&2; exit 1; }
}
start_wan

# The federator with its write buffer; its one endpoint is the target
# seen through the proxy.
FP=$(free_port)
cat > "$W/fed.yaml" <<CFG
listen: 127.0.0.1:$FP
federation:
  endpoints:
    - {name: wan-site, url: "http://$WAN/", writable: true}
buffer:
  dir: $SPOOL_ROOT/spool
  keep_after_migration: 1ms
  parallel: $PARALLEL
  retry: {initial: 500ms, max: 2s}
  prefixes:
    - {prefix: /buffered, targets: [wan-site]}
CFG
pprof_flag fed
LAKEFED_BENCH_DB=$W/results.db "$W/lakefed" serve --config "$W/fed.yaml" "${PPROF[@]}" >"$W/fed.log" 2>&1 &
PIDS+=($!)
wait_port $FP

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
mbs() { awk -v n="$1" -v s="$2" 'BEGIN { if (s > 0) printf "%.0f", n / 1e6 / s; else print "n/a" }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }

# upload BASE PHASE: every writer PUTs its FILES files under BASE/PHASE/
# one after the other; $W/PHASE.wW gets "status path source adler32-of-Digest"
# per file. Fails when a curl fails.
upload() {
  local base=$1 phase=$2 w pids=() failed=0
  for w in $(seq 0 $((WRITERS - 1))); do
    (
      for f in $(seq 0 $((FILES - 1))); do
        s=$(((f + w) % FILES))
        out=$(curl -sS -o /dev/null -D - -w '%{http_code}\n' -T "$SRC/s$s" "$base/$phase/w$w/f$f.dat") || { echo "curl PUT $base/$phase/w$w/f$f.dat failed" >&2; exit 1; }
        dig=$(tr -d '\r' <<<"$out" | sed -n 's/^[Dd]igest: *//p' | tr ',' '\n' | sed -n 's/^adler32=//p' | tail -1)
        echo "$(tail -1 <<<"$out") $phase/w$w/f$f.dat s$s ${dig:--}"
      done > "$W/$phase.w$w"
    ) &
    pids+=($!)
  done
  for w in "${pids[@]}"; do wait "$w" || failed=1; done
  [ $failed = 0 ] || { echo "an upload failed" >&2; exit 1; }
}

# buffer_state: "pending_files held_files migrated failures" from /api/buffer.
buffer_state() {
  curl -sf "http://127.0.0.1:$FP/api/buffer" | python3 -c 'import json, sys
d = json.load(sys.stdin)
print(d["pending_files"], d["held_files"], d["migrated"], len(d.get("failures") or []))'
}

echo "WRITERS=$WRITERS FILES=$FILES SIZE_MB=$SIZE_MB$([ -n "$SCALED" ] && echo " ($SCALED)") ($((TOTAL / 1000000)) MB), LATENCY=$LATENCY BANDWIDTH=$BANDWIDTH MB/s per connection, PARALLEL=$PARALLEL; spool on $(df --output=fstype "$SPOOL_ROOT" | tail -1), $(avail_mb "$SPOOL_ROOT") MB free; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

# (a) direct.
sync
log "direct: $N PUTs to the target through the proxy"
profile_during buffer-direct-target target
t0=$(now)
upload "http://$WAN" direct
t1=$(now)
profile_collect
DIRECT=$(secs "$t0" "$t1")
bad=$(cat "$W"/direct.w* | awk '$1 != 201' | wc -l)
short=0
for f in "$T"/direct/w*/f*.dat; do [ "$(stat -c %s "$f")" = "$SIZE" ] || short=$((short + 1)); done
[ "$bad" = 0 ] && [ "$short" = 0 ] && [ "$(cat "$W"/direct.w* | wc -l)" = "$N" ] || { echo "direct: $bad PUTs not answered 201, $short files of the wrong size" >&2; exit 1; }
log "direct: $DIRECT s ($(mbs $TOTAL "$DIRECT") MB/s); load $(cut -d' ' -f1 /proc/loadavg)"
rm -rf "$T/direct"
sync

# (b) buffered, and (c) the migration, timed from the same start.
if [ "$HOLD_MIGRATION" = 1 ]; then kill "$WANPID"; wait "$WANPID" 2>/dev/null || true; fi
log "buffered: $N PUTs to the federator's write buffer$([ "$HOLD_MIGRATION" = 1 ] && echo ", the proxy stopped until the last one")"
profile_during buffer-buffered fed
profile_during buffer-buffered-target target
t0=$(now)
upload "http://127.0.0.1:$FP" buffered
t1=$(now)
if [ "$HOLD_MIGRATION" = 1 ]; then start_wan "$WAN"; fi
BUFFERED=$(secs "$t0" "$t1")
log "buffered: $BUFFERED s ($(mbs $TOTAL "$BUFFERED") MB/s); load $(cut -d' ' -f1 /proc/loadavg); state $(buffer_state)"
bad=$(cat "$W"/buffered.w* | awk '$1 != 201' | wc -l)
[ "$bad" = 0 ] && [ "$(cat "$W"/buffered.w* | wc -l)" = "$N" ] || { echo "buffered: $bad PUTs not answered 201" >&2; exit 1; }
digests=0
while read -r _ _ s d; do [ "$d" = "${SUM[$s]}" ] && digests=$((digests + 1)); done < <(cat "$W"/buffered.w*)

last=0
while :; do
  read -r pending held migrated failures < <(buffer_state)
  t2=$(now)
  if [ "$pending" = 0 ] && [ "$migrated" -ge "$N" ]; then break; fi
  el=$(secs "$t0" "$t2")
  if [ "${el%.*}" -ge "$MIGRATE_TIMEOUT" ]; then log "migration: gave up after $MIGRATE_TIMEOUT s"; break; fi
  if [ $((${el%.*} / 10)) != "$last" ]; then last=$((${el%.*} / 10)); log "migration: $migrated of $N verified, $pending pending, $held held, $failures failing"; fi
  sleep 0.2
done
profile_collect
MIGRATED=$(secs "$t0" "$t2")
AFTER=$(secs "$t1" "$t2")
log "migration: $migrated of $N verified by the buffer, $MIGRATED s from the first PUT ($AFTER s after the last ack)"

# Our own check of every file on the target's disk.
ok=0 missing=0 wrong=0
declare -A WANT
while read -r _ p s _; do WANT[$T/$p]=${SUM[$s]}; done < <(cat "$W"/buffered.w*)
present=()
for p in "${!WANT[@]}"; do if [ -f "$p" ]; then present+=("$p"); else missing=$((missing + 1)); fi; done
if [ ${#present[@]} -gt 0 ]; then
  while read -r p a; do if [ "$a" = "${WANT[$p]}" ] && [ "$(stat -c %s "$p")" = "$SIZE" ]; then ok=$((ok + 1)); else wrong=$((wrong + 1)); fi; done \
    < <(python3 "$W/adler.py" "${present[@]}")
fi
log "target: $ok of $N files with the source's adler32, $missing missing, $wrong wrong"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

SPEEDUP=$(ratio "$DIRECT" "$BUFFERED")
PCT=$(awk -v a="$ok" -v n="$N" 'BEGIN { printf "%.0f", 100 * a / n }')
goal3=$(awk -v v="$SPEEDUP" 'BEGIN { if (v + 0 >= 3) print "met"; else printf "missed (%.0f%% short)", (1 - v / 3) * 100 }')
goal100=$([ "$ok" = "$N" ] && echo met || echo missed)
{
  echo "Write buffer, \`bench/buffer.sh\` ($WRITERS writers × $FILES files of $SIZE_MB MB = $((TOTAL / 1000000)) MB$([ -n "$SCALED" ] && echo ", $SCALED"); the target a lakefed storage role behind \`bench/cmd/wanproxy\` at +$LATENCY round trip and $BANDWIDTH MB/s per connection; spool on $(df --output=fstype "$SPOOL_ROOT" | tail -1)$([ -n "$BUFFER_DIR" ] && echo " (BUFFER_DIR=$BUFFER_DIR)"), buffer parallel $PARALLEL$([ "$HOLD_MIGRATION" = 1 ] && echo ", HOLD_MIGRATION=1: the proxy stopped during (b)"); curl -T; loopback, $(nproc) cores shared by writers, proxy, target and lakefed, load average $(cut -d' ' -f1 /proc/loadavg) at the end; $(date -u +%Y-%m-%d))."
  echo
  echo "| measurement | time | rate | ratio | goal |"
  echo "|---|---:|---:|---:|---|"
  echo "| (a) direct upload, writers → WAN → target | $DIRECT s | $(mbs $TOTAL "$DIRECT") MB/s | 1× | |"
  echo "| (b) buffered upload, writers → lakefed write buffer (201 after fsync and journal) | $BUFFERED s | $(mbs $TOTAL "$BUFFERED") MB/s | $SPEEDUP× faster | ≥ 3×: $goal3 |"
  echo "| (c) until all migrated and verified by the buffer, from the first PUT | $MIGRATED s | $(mbs $TOTAL "$MIGRATED") MB/s | $(ratio "$MIGRATED" "$DIRECT")× the direct time | |"
  echo "| (c) of which after the last acknowledgement | $AFTER s | | | |"
  echo "| files on the target with the source's adler32 (checked by this script) | $ok / $N | | $PCT % | 100 %: $goal100 |"
  echo "| PUT answers whose Digest held the source's adler32 | $digests / $N | | | |"
  echo
  echo "The prototype (EOS): 22 s direct, 12 s buffered (1.8×), about 10 % of the files never migrated."
} > "$W/table.md"
echo
cat "$W/table.md"
mkdir -p "$(dirname "$OUT")"
cp "$W/table.md" "$OUT"
echo
echo "written to $OUT"
