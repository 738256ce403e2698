#!/usr/bin/env bash
# Storage-role benchmark: the lakefed storage role against nginx (WebDAV) and
# XRootD's HTTP door (XrdHttp), all serving the same directory on loopback,
# measured in one run so the ratios hold on a shared, noisy machine.
#
#   bench/storage.sh            # 1 GiB file, 10 s HEAD runs
#   SIZE_MB=256 HEAD_SECS=5 bench/storage.sh
#
# It measures: GET of a SIZE_MB file with 1 and with 16 parallel clients
# (curl, body discarded; aggregate MB/s), PUT of a SIZE_MB file (curl -T,
# MB/s, lakefed fsyncs before answering, nginx and XrdHttp do not), and the
# HEAD rate with 16 keep-alive connections (wrk, 2 threads). The load
# generators share the 2 cores with the servers, as they do for everyone.
# Needs: go, curl, wrk, nginx + dav-ext, xrootd (scripts/install-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE_MB=${SIZE_MB:-1024}
HEAD_SECS=${HEAD_SECS:-10}
PAR=${PAR:-16}
for t in curl wrk nginx xrootd; do command -v $t >/dev/null || { echo "missing $t: run scripts/install-deps.sh" >&2; exit 1; }; done

W=$(mktemp -d /tmp/lakefed-bench.XXXXXX)
chmod 755 "$W"
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$W"; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 150); do (exec 3<>/dev/tcp/127.0.0.1/$1) 2>/dev/null && return 0; sleep 0.1; done; echo "nothing on port $1" >&2; return 1; }

go build -o "$W/lakefed" ./cmd/lakefed
DATA=$W/data
mkdir -p "$DATA" "$W/up"
head -c $((SIZE_MB << 20)) /dev/urandom > "$DATA/big"
cp "$DATA/big" "$W/up/src"
echo small > "$DATA/small"
chmod -R a+rX "$DATA"

# lakefed storage
LP=$(free_port)
"$W/lakefed" storage --root "$DATA" --listen 127.0.0.1:$LP >"$W/lakefed.log" 2>&1 &
PIDS+=($!)

# nginx WebDAV
NP=$(free_port)
MOD=$(nginx -V 2>&1 | sed -n 's/.*--modules-path=\([^ ]*\).*/\1/p')
mkdir -p "$W/nginx/tmp" "$W/nginx/logs"
cat > "$W/nginx/nginx.conf" <<CFG
load_module $MOD/ngx_http_dav_ext_module.so;
$([ "$(id -u)" = 0 ] && echo "user root root;")
worker_processes auto;
pid $W/nginx/nginx.pid;
error_log $W/nginx/logs/error.log warn;
events { worker_connections 1024; }
http {
  access_log off; sendfile on; tcp_nopush on; keepalive_requests 1000000;
  client_body_temp_path $DATA;
  server {
    listen 127.0.0.1:$NP; root $DATA; client_max_body_size 0;
    location / { dav_methods PUT DELETE MKCOL COPY MOVE; dav_ext_methods PROPFIND OPTIONS;
      create_full_put_path on; dav_access user:rw group:rw all:r; }
  }
}
CFG
nginx -p "$W/nginx" -c "$W/nginx/nginx.conf" -g 'daemon off;' >"$W/nginx/logs/out.log" 2>&1 &
PIDS+=($!)

# XRootD with XrdHttp (refuses to run as root: drop to the xrootd user)
XP=$(free_port); XHP=$(free_port)
mkdir -p "$W/xrd/admin" "$W/xrd/run"
cat > "$W/xrd/xrootd.cfg" <<CFG
all.export /
oss.localroot $DATA
xrd.port $XP
all.adminpath $W/xrd/admin
all.pidpath $W/xrd/run
xrd.protocol XrdHttp:$XHP libXrdHttp.so
CFG
RUNAS=(); if [ "$(id -u)" = 0 ]; then RUNAS=(-R xrootd); chown -R xrootd: "$W/xrd" "$DATA"; fi
xrootd "${RUNAS[@]}" -c "$W/xrd/xrootd.cfg" -l "$W/xrd/xrootd.log" >/dev/null 2>&1 &
PIDS+=($!)
wait_port $LP; wait_port $NP; wait_port $XHP

declare -A URL=([lakefed]=http://127.0.0.1:$LP [nginx]=http://127.0.0.1:$NP [xrdhttp]=http://127.0.0.1:$XHP)
SERVERS=(lakefed nginx xrdhttp)
declare -A R1 R16 PUT HEAD

mbps() { awk -v b="$1" -v s="$2" 'BEGIN { printf "%.0f", b / 1048576 / s }'; }
now() { date +%s.%N; }

for s in "${SERVERS[@]}"; do
  u=${URL[$s]}
  curl -sf -o /dev/null "$u/big" # warm the page cache and the connection path
  t0=$(now); curl -sf -o /dev/null "$u/big"; t1=$(now)
  R1[$s]=$(mbps $((SIZE_MB << 20)) "$(echo "$t1 - $t0" | bc -l)")
  t0=$(now)
  cpids=()
  for i in $(seq "$PAR"); do curl -sf -o /dev/null "$u/big" & cpids+=($!); done
  wait_all=0; for j in "${cpids[@]}"; do wait "$j" || wait_all=1; done
  t1=$(now)
  [ $wait_all = 0 ] || { echo "a parallel read from $s failed" >&2; exit 1; }
  R16[$s]=$(mbps $((PAR * SIZE_MB << 20)) "$(echo "$t1 - $t0" | bc -l)")
  t0=$(now); curl -sf -o /dev/null -T "$W/up/src" "$u/put-$s"; t1=$(now)
  PUT[$s]=$(mbps $((SIZE_MB << 20)) "$(echo "$t1 - $t0" | bc -l)")
  rm -f "$DATA/put-$s"
  cat > "$W/head.lua" <<'LUA'
wrk.method = "HEAD"
LUA
  HEAD[$s]=$(wrk -t2 -c16 -d"${HEAD_SECS}s" -s "$W/head.lua" "$u/small" | awk '/Requests\/sec/ {printf "%.0f", $2}')
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
printf '\n%-26s %10s %10s %10s %14s %14s\n' "test (SIZE_MB=$SIZE_MB)" lakefed nginx xrdhttp lakefed/nginx lakefed/xrdhttp
row() { local name=$1; local -n a=$2; printf '%-26s %10s %10s %10s %14s %14s\n' "$name" "${a[lakefed]}" "${a[nginx]}" "${a[xrdhttp]}" "$(ratio "${a[lakefed]}" "${a[nginx]}")" "$(ratio "${a[lakefed]}" "${a[xrdhttp]}")"; }
row "GET 1 client (MB/s)" R1
row "GET $PAR clients (MB/s)" R16
row "PUT 1 client (MB/s)" PUT
row "HEAD 16 conns (req/s)" HEAD
