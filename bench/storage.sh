#!/usr/bin/env bash
# Storage-role benchmark: the lakefed storage role against nginx (WebDAV) and
# XRootD's HTTP door (XrdHttp), all serving the same directory on loopback,
# measured in one run so the ratios hold on a shared, noisy machine.
#
#   bench/storage.sh            # 1 GiB file, 300,000 HEADs per server, 3 rounds
#   SIZE_MB=256 HEAD_N=100000 ROUNDS=5 bench/storage.sh
#   PROFILE=1 bench/storage.sh  # also CPU profiles of the storage role
#
# It measures: GET of a SIZE_MB file with 1 and with 16 parallel clients
# (curl, body discarded; aggregate MB/s), PUT of a SIZE_MB file (curl -T,
# MB/s, lakefed fsyncs before answering, nginx and XrdHttp do not), and the
# HEAD rate with 16 keep-alive connections (ab -k -i: wrk waits for a body
# after HEAD and counts nothing). The load
# generators share the 2 cores with the servers, as they do for everyone.
#
# Trust: every server is warmed up first (page cache, one short HEAD run),
# then each measurement is repeated ROUNDS times with the servers
# interleaved (the order rotates each round, so a burst of load from
# elsewhere hits every server alike). Every round is printed; the table
# holds the medians. The load average is printed before and after.
# PROFILE=1 (bench/lib.sh): after the table, each measurement is run again
# and again on lakefed alone for PROFILE_SECONDS (10) under a CPU profile:
# storage-get1, storage-get16 (PAR), storage-put and storage-head, each a .pprof
# and a flame graph .svg in PROFILE_DIR (bench/results/profiles).
# Needs: go, curl, ab, nginx + dav-ext, xrootd (scripts/install-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
SIZE_MB=${SIZE_MB:-1024}
HEAD_N=${HEAD_N:-300000}
PAR=${PAR:-16}
ROUNDS=${ROUNDS:-3}
for t in curl ab nginx xrootd; do command -v $t >/dev/null || { echo "missing $t: run scripts/install-deps.sh" >&2; exit 1; }; done

new_workdir lakefed-bench
go build -o "$W/lakefed" ./cmd/lakefed
DATA=$W/data
mkdir -p "$DATA" "$W/up"
head -c $((SIZE_MB << 20)) /dev/urandom > "$DATA/big"
cp "$DATA/big" "$W/up/src"
echo small > "$DATA/small"
chmod -R a+rX "$DATA"

# lakefed storage
LP=$(free_port)
pprof_flag storage
"$W/lakefed" storage --root "$DATA" --listen 127.0.0.1:$LP "${PPROF[@]}" >"$W/lakefed.log" 2>&1 &
PIDS+=($!)

start_nginx "$DATA"
start_xrootd "$DATA"
wait_port $LP; wait_port $NP; wait_port $XHP

declare -A URL=([lakefed]=http://127.0.0.1:$LP [nginx]=http://127.0.0.1:$NP [xrdhttp]=http://127.0.0.1:$XHP)
SERVERS=(lakefed nginx xrdhttp)
declare -A R1 R16 PUT HEAD # per server: the values of every round, space-separated

mbps() { awk -v b="$1" -v s="$2" 'BEGIN { printf "%.0f", b / 1048576 / s }'; }
now() { date +%s.%N; }
median() { tr ' ' '\n' | grep . | sort -n | awk '{ v[NR] = $1 } END { if (NR == 0) print "n/a"; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.0f", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
headrate() { ab -q -k -i -c16 -n "$1" "$2/small" 2>/dev/null | awk '/Requests per second/ {printf "%.0f", $4}'; }

get1() { local t0 t1; t0=$(now); curl -sf -o /dev/null "$1/big"; t1=$(now); mbps $((SIZE_MB << 20)) "$(echo "$t1 - $t0" | bc -l)"; }
getpar() {
  local t0 t1 cpids=() failed=0 j
  t0=$(now)
  for _ in $(seq "$PAR"); do curl -sf -o /dev/null "$1/big" & cpids+=($!); done
  for j in "${cpids[@]}"; do wait "$j" || failed=1; done
  t1=$(now)
  [ $failed = 0 ] || { echo "a parallel read from $1 failed" >&2; exit 1; }
  mbps $((PAR * SIZE_MB << 20)) "$(echo "$t1 - $t0" | bc -l)"
}
put1() {
  local t0 t1
  t0=$(now); curl -sf -o /dev/null -T "$W/up/src" "$1/put-$2"; t1=$(now)
  rm -f "$DATA/put-$2"
  mbps $((SIZE_MB << 20)) "$(echo "$t1 - $t0" | bc -l)"
}

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for s in "${SERVERS[@]}"; do # warm-up: page cache, connection paths, lazy init
  u=${URL[$s]}
  curl -sf -o /dev/null "$u/big"
  curl -sf -o /dev/null -T "$DATA/small" "$u/warm-$s"; rm -f "$DATA/warm-$s"
  headrate $((HEAD_N / 10 + 1000)) "$u" >/dev/null
done

for r in $(seq "$ROUNDS"); do
  # Rotate the order: round 1 lakefed first, round 2 nginx first, ...
  k=$(((r - 1) % ${#SERVERS[@]}))
  order=("${SERVERS[@]:$k}" "${SERVERS[@]:0:$k}")
  for s in "${order[@]}"; do R1[$s]+=" $(get1 "${URL[$s]}")"; done
  for s in "${order[@]}"; do R16[$s]+=" $(getpar "${URL[$s]}")"; done
  for s in "${order[@]}"; do PUT[$s]+=" $(put1 "${URL[$s]}" "$s")"; done
  sync # let nginx's and XrdHttp's unsynced writes reach the disk outside the measured time
  for s in "${order[@]}"; do HEAD[$s]+=" $(headrate "$HEAD_N" "${URL[$s]}")"; done
  echo "round $r (order ${order[*]}; load $(cut -d' ' -f1 /proc/loadavg)):"
  for s in "${SERVERS[@]}"; do
    set -- ${R1[$s]}; a=${!#}; set -- ${R16[$s]}; b=${!#}; set -- ${PUT[$s]}; c=${!#}; set -- ${HEAD[$s]}; d=${!#}
    printf '  %-8s GET1 %6s MB/s  GET%s %6s MB/s  PUT %6s MB/s  HEAD %7s req/s\n' "$s" "$a" "$PAR" "$b" "$c" "$d"
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
printf '\n%-26s %10s %10s %10s %14s %14s\n' "median of $ROUNDS (SIZE_MB=$SIZE_MB)" lakefed nginx xrdhttp lakefed/nginx lakefed/xrdhttp
row() {
  local name=$1; local -n a=$2; local l n x
  l=$(echo "${a[lakefed]}" | median); n=$(echo "${a[nginx]}" | median); x=$(echo "${a[xrdhttp]}" | median)
  printf '%-26s %10s %10s %10s %14s %14s\n' "$name" "$l" "$n" "$x" "$(ratio "$l" "$n")" "$(ratio "$l" "$x")"
}
row "GET 1 client (MB/s)" R1
row "GET $PAR clients (MB/s)" R16
row "PUT 1 client (MB/s)" PUT
row "HEAD 16 conns (req/s)" HEAD

if profiling; then
  echo
  u=${URL[lakefed]}
  profile_loop storage-get1 storage get1 "$u"
  profile_loop "storage-get$PAR" storage getpar "$u"
  profile_loop storage-put storage put1 "$u" profile
  profile_loop storage-head storage headrate $((HEAD_N / 10 + 1000)) "$u"
fi
