#!/usr/bin/env bash
# Federation-by-kind benchmark: reading a SIZE_MB file through the
# federator from each endpoint kind (lakefed storage, nginx WebDAV, S3 via
# s3proxy, XRootD) against reading that endpoint directly, in redirect and in
# proxy mode, in one run, so the ratios hold on a shared, noisy machine.
#
#   bench/kinds.sh                 # 1 GiB file, 3 rounds
#   SIZE_MB=256 ROUNDS=5 bench/kinds.sh
#   PROFILE=1 bench/kinds.sh       # also CPU profiles of lakefed
#
# One federator (lakefed serve) federates every server twice: as NAME-r
# (redirect mode) and NAME-p (proxy mode); each read is pinned to one of them
# with ?lakefed.site=NAME (as lakefed bench --site does), so one process and
# one config serve every case. The XRootD server is federated over root://
# (xrootd-p, proxied: HTTP clients cannot follow a redirect to root://) and,
# for redirect mode, with http_url (xrootd-r: clients go to its XrdHttp door).
#
# Direct reads: curl from the server itself (storage, nginx, XrdHttp; S3 with
# the pre-signed URL the federator hands out) and xrdcp from the root://
# port. Redirect reads: curl -L through the federator. Proxy reads: curl
# through the federator. Goals: redirect = direct (nothing measurable on
# bytes), proxy >= 0.9x direct, and for root:// proxy >= 1.0x xrdcp.
#
# Trust: the file is read once per path first (page cache, connections);
# then every measurement is repeated ROUNDS times, the order rotating each
# round; every round is printed and the table holds the medians. The load
# average is printed before and after. Everything runs on the same cores
# (loopback), so proxy mode pays for the federator's CPU out of the reader's
# and the server's share.
# PROFILE=1 (bench/lib.sh): after the table, reads run again and again for
# PROFILE_SECONDS (10) under a CPU profile, each a .pprof and a flame graph
# .svg in PROFILE_DIR (bench/results/profiles): kinds-storage-direct (the
# storage role serving), and kinds-KIND-proxy for every kind (the federator
# proxying). Redirect mode is not profiled: the federator answers one
# redirect per read, and the bytes come from the server.
# Needs: go, curl, java + the s3proxy jar (see internal/testenv/s3.go:
# S3ProxyInstall), nginx + dav-ext, xrootd, xrdcp.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
SIZE_MB=${SIZE_MB:-1024}
ROUNDS=${ROUNDS:-3}
for t in go curl java nginx xrootd xrdcp bc; do command -v $t >/dev/null || { echo "missing $t: run scripts/install-deps.sh" >&2; exit 1; }; done
JAR=${LAKEFED_S3PROXY_JAR:-$(ls "${XDG_CACHE_HOME:-$HOME/.cache}"/lakefed-s3proxy/s3proxy-*-jar-with-dependencies.jar 2>/dev/null | sort | tail -1)}
[ -f "$JAR" ] || { echo "no s3proxy jar; fetch it with: mvn -B -q dependency:copy -Dartifact=org.gaul:s3proxy:2.6.0:jar:jar-with-dependencies -DoutputDirectory=\$HOME/.cache/lakefed-s3proxy" >&2; exit 1; }

new_workdir lakefed-kinds
go build -o "$W/lakefed" ./cmd/lakefed
DATA=$W/data
mkdir -p "$DATA"
head -c $((SIZE_MB << 20)) /dev/urandom > "$DATA/big"
chmod -R a+rX "$DATA"

# lakefed storage
LP=$(free_port)
pprof_flag storage
"$W/lakefed" storage --root "$DATA" --listen 127.0.0.1:$LP "${PPROF[@]}" >"$W/storage.log" 2>&1 &
PIDS+=($!)

start_nginx "$DATA"
start_xrootd "$DATA"

# S3: s3proxy with its filesystem backend, bucket "bench"
SP=$(free_port)
mkdir -p "$W/s3/data/bench"
cat > "$W/s3/s3proxy.conf" <<CFG
s3proxy.endpoint=http://127.0.0.1:$SP
s3proxy.authorization=aws-v2-or-v4
s3proxy.identity=bench
s3proxy.credential=bench-secret
jclouds.provider=filesystem
jclouds.filesystem.basedir=$W/s3/data
CFG
java -XX:-UsePerfData -jar "$JAR" --properties "$W/s3/s3proxy.conf" >"$W/s3/server.log" 2>&1 &
PIDS+=($!)

# The federator: every server twice, redirect (-r) and proxy (-p).
FP=$(free_port)
S3OPTS="{endpoint: http://127.0.0.1:$SP, region: us-east-1, access_key: bench, secret_key: bench-secret, path_style: true}"
cat > "$W/fed.yaml" <<CFG
listen: 127.0.0.1:$FP
federation:
  mode: redirect
  health: {interval: 500ms, timeout: 2s}
  endpoints:
    - {name: storage-r, url: "http://127.0.0.1:$LP/"}
    - {name: storage-p, url: "http://127.0.0.1:$LP/", mode: proxy}
    - {name: nginx-r, url: "http://127.0.0.1:$NP/"}
    - {name: nginx-p, url: "http://127.0.0.1:$NP/", mode: proxy}
    - {name: s3-r, url: "s3://bench/", s3: $S3OPTS, writable: true}
    - {name: s3-p, url: "s3://bench/", s3: $S3OPTS, mode: proxy}
    - {name: xrootd-r, url: "root://127.0.0.1:$XP//", http_url: "http://127.0.0.1:$XHP/"}
    - {name: xrootd-p, url: "root://127.0.0.1:$XP//"}
CFG
pprof_flag fed
"$W/lakefed" serve --config "$W/fed.yaml" "${PPROF[@]}" >"$W/fed.log" 2>&1 &
PIDS+=($!)
wait_port $LP; wait_port $NP; wait_port $XP; wait_port $XHP; wait_port $SP 60; wait_port $FP
FED=http://127.0.0.1:$FP
# Wait until the federator has seen every endpoint up (s3proxy and xrootd
# start slower than the federator's first probes).
for i in $(seq 600); do
  curl -sf "$FED/api/endpoints" | grep -q '"state": "down"' || break
  [ "$i" = 600 ] && { echo "endpoints still down after 60s:" >&2; curl -s "$FED/api/endpoints" >&2; exit 1; }
  sleep 0.1
done

# Put the file into S3 through the federator (it writes, storing adler32).
curl -sf -o /dev/null -T "$DATA/big" "$FED/big?lakefed.site=s3-r" || { echo "upload to S3 failed" >&2; cat "$W/fed.log" >&2; exit 1; }
# The direct S3 URL is the pre-signed one the federator hands out (1h).
S3URL=$(curl -s -o /dev/null -w '%{redirect_url}' "$FED/big?lakefed.site=s3-r")
case $S3URL in http://127.0.0.1:$SP/*X-Amz-Signature=*) ;; *) echo "no pre-signed S3 URL: $S3URL" >&2; exit 1 ;; esac

# name → command; each prints nothing and exits 0 on a complete read.
KINDS=(storage nginx s3 xrootd)
declare -A DIRECT=([storage]="http://127.0.0.1:$LP/big" [nginx]="http://127.0.0.1:$NP/big" [s3]="$S3URL" [xrootd]="http://127.0.0.1:$XHP/big")
mbps() { awk -v b="$1" -v s="$2" 'BEGIN { printf "%.0f", b / 1048576 / s }'; }
now() { date +%s.%N; }
median() { tr ' ' '\n' | grep . | sort -n | awk '{ v[NR] = $1 } END { if (NR == 0) print "n/a"; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.0f", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# timed CMD...: runs it, checks the size it read, prints MB/s.
timed() {
  local t0 t1 n
  t0=$(now)
  n=$("$@") || { echo "read failed: $*" >&2; exit 1; }
  t1=$(now)
  [ "$n" = $((SIZE_MB << 20)) ] || { echo "short read ($n bytes): $*" >&2; exit 1; }
  mbps $((SIZE_MB << 20)) "$(echo "$t1 - $t0" | bc -l)"
}
get() { curl -sfL -o /dev/null -w '%{size_download}' "$1"; }
# xrdcp 5 reads with kXR_pgread by default (a CRC per 4 KiB page at both
# ends); XRD_CPUSEPGWRTRD=0 makes it use plain reads, its fastest mode, so
# the comparison is with xrdcp at its best.
xrd() { XRD_CPUSEPGWRTRD=0 xrdcp -s -f "root://127.0.0.1:$XP//big" /dev/null && echo $((SIZE_MB << 20)); }
read_case() { # kind mode → MB/s
  case $2 in
  direct) timed get "${DIRECT[$1]}" ;;
  xrdcp) timed xrd ;;
  redirect) timed get "$FED/big?lakefed.site=$1-r" ;;
  proxy) timed get "$FED/big?lakefed.site=$1-p" ;;
  esac
}
CASES=()
for k in "${KINDS[@]}"; do CASES+=("$k direct" "$k redirect" "$k proxy"); done
CASES+=("xrootd xrdcp")
declare -A V # "kind mode" → values of every round

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for c in "${CASES[@]}"; do read_case $c >/dev/null; done # warm-up
for r in $(seq "$ROUNDS"); do
  k=$(((r - 1) % ${#CASES[@]}))
  order=("${CASES[@]:$k}" "${CASES[@]:0:$k}")
  line=""
  for c in "${order[@]}"; do v=$(read_case $c); V[$c]+=" $v"; line+=" [$c $v]"; done
  echo "round $r (load $(cut -d' ' -f1 /proc/loadavg)):$line"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
printf '\nmedian MB/s of %s rounds, %s MiB file, through the federator vs direct\n' "$ROUNDS" "$SIZE_MB"
printf '%-8s %10s %10s %10s %10s %12s %10s\n' kind direct redirect "redir/dir" proxy "proxy/dir" goal
for k in "${KINDS[@]}"; do
  d=$(echo "${V[$k direct]}" | median); rd=$(echo "${V[$k redirect]}" | median); p=$(echo "${V[$k proxy]}" | median)
  printf '%-8s %10s %10s %10s %10s %12s %10s\n' "$k" "$d" "$rd" "$(ratio "$rd" "$d")" "$p" "$(ratio "$p" "$d")" ">=0.90"
done
x=$(echo "${V[xrootd xrdcp]}" | median); p=$(echo "${V[xrootd proxy]}" | median)
printf '%-8s %10s %10s %10s %10s %12s %10s\n' "root://" "$x" "-" "-" "$p" "$(ratio "$p" "$x")" ">=1.00"
echo "(direct: curl from the server; S3 direct is the pre-signed URL; root:// direct is xrdcp with plain reads; the xrootd row's direct is its XrdHttp door)"

if profiling; then
  echo
  profile_loop kinds-storage-direct storage get "${DIRECT[storage]}"
  for k in "${KINDS[@]}"; do profile_loop "kinds-$k-proxy" fed get "$FED/big?lakefed.site=$k-p"; done
fi
