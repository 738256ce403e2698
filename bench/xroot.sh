#!/usr/bin/env bash
# root:// door benchmark: lakefed's door (listen_xroot) beside the
# XRootD redirector (xrootd + cmsd manager, two data servers, as
# ../shared/servers/fed_start.sh starts them), on the same files and the
# same two data servers, with THREADS client threads:
#   (a) open+close rate: kXR_open at the front, its kXR_redirect followed to
#       the data server, kXR_open and kXR_close there (bench/cmd/xrdopen
#       -mode follow), warm (every file looked up once before) and cold
#       (first open of each file); the front's redirect answer alone; and
#       open+close answered by the door itself, for files only on a lakefed
#       storage site (no redirect). Goal: door >= 5x the redirector (warm
#       open+close). Both fronts send clients to the same two data servers,
#       so their open+close bounds the redirected figure for both.
#   (b) the answer to a never-seen missing file (kXR_NotFound), p50/p99.
#       Goal: door p99 <= 50 ms, against the redirector's ~5.5 s.
#   (c) xrdcp of a BIG_MB file (default 1 GiB) through the front against
#       xrdcp from the data server directly. Goal: door >= 1.0x direct.
#       Also the door serving the bytes itself, for a file only on a lakefed
#       storage site (proxied), as a reference.
#
#   bench/xroot.sh                        # 40,000 files, 10 s per rate, 1 GiB, 3 rounds
#   QUICK=1 bench/xroot.sh                # a smoke run: 600 files, 3 s, 64 MiB, 1 round
#   FILES=40000 DUR=20 THREADS=8 BIG_MB=1024 ROUNDS=5 bench/xroot.sh
#   PACED=1 bench/xroot.sh                # instead: the AAA paced reads (see paced below)
#   PROFILE=1 bench/xroot.sh              # also CPU profiles of the door
#
# The federation behind the door has three endpoints: the two XRootD data
# servers over root:// (the files the redirector serves, hard links of one
# tree) and one lakefed storage site (same tree, plus the proxied file). An
# open of a file with a root:// replica is redirected there, as the
# redirector does. Everything runs on 127.0.0.1 free ports, started and
# stopped by this script; clients and servers share the machine's cores, so
# every figure carries the 1-minute load average read just before it.
# PROFILE=1 (bench/lib.sh): a CPU profile of lakefed serve (the door)
# during each of its figures, each a .pprof and a flame graph .svg in
# PROFILE_DIR (bench/results/profiles): xroot-open-cold, xroot-redirect-cold,
# xroot-open, xroot-redirect, xroot-self and xroot-missing (with the
# lakefed site beside, xroot-missing-site, which the door asks); and, after
# the table, xrdcp through the door from the lakefed site again and again
# for PROFILE_SECONDS (10): xroot-xrdcp-proxied and xroot-xrdcp-proxied-site.
# Needs: go, xrootd, cmsd, xrdcp, python3.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh # free_port, wait_port, pprof_flag, profile_run
if [ -n "${QUICK:-}" ]; then
  FILES=${FILES:-600} WARM=${WARM:-300} DUR=${DUR:-3} BIG_MB=${BIG_MB:-64} ROUNDS=${ROUNDS:-1} MISS_N=${MISS_N:-80}
fi
FILES=${FILES:-40000}    # files on every server (the first WARM are the warm set; each
                         # cold figure opens half the rest, 19,500: 2-4 s at these rates)
WARM=${WARM:-1000}
PER=100                  # files per directory
DUR=${DUR:-10}           # seconds per rate figure
THREADS=${THREADS:-8}    # client threads (one connection each)
BIG_MB=${BIG_MB:-1024}   # size of the xrdcp file
ROUNDS=${ROUNDS:-3}      # xrdcp rounds (medians are reported)
MISS_N=${MISS_N:-400}    # never-seen missing paths asked of the door
for t in go xrootd cmsd xrdcp python3 timeout; do
  command -v $t >/dev/null || { echo "missing $t: run scripts/install-deps.sh" >&2; exit 1; }
done
[ "$FILES" -gt "$WARM" ] || { echo "FILES must be > WARM" >&2; exit 1; }

W=$(mktemp -d /tmp/lakefed-xroot.XXXXXX)
chmod 755 "$W"
PIDS=()
cleanup() {
  local p f
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
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
kv() { sed -n "s/.*\\b$2=\\([^ ]*\\).*/\\1/p" <<<"$1"; }
# cpu PID... -> CPU time (user + system) the processes used so far, in ticks
cpu() { local p t=0; for p in "$@"; do t=$((t + $(awk '{ print $14 + $15 }' "/proc/$p/stat"))); done; echo $t; }
TICKS=$(getconf CLK_TCK)

# --- PACED=1: the CMS AAA paced-read test. Each job is the AAA scale
# test's client (xrdfragcpXrdCl of cvuosalo/xrootd_scaletest, XrdCl,
# --cmsclientsim): it opens one file and reads PMB MiB every PPERIOD s,
# sequentially, for PMIN minutes, then stops by itself. PJOBS jobs (one
# run per count) read (a) through the door, which serves the files itself
# from two lakefed storage sites over HTTP (no root:// replica: no
# redirect, the door proxies every byte), and (b) from a real XRootD data
# server holding the same files (hard links: one page cache). For each:
# p50/p99/max read latency, late reads (a read that ends after the next
# one was due: the client sleeps PPERIOD less the read's time, so a read
# longer than PPERIOD is late), the most jobs late in one second, and the
# server's CPU (utime+stime of its process, /proc/PID/stat) per GB read.
# Door and XRootD alternate at each job count, so both see the same
# neighbours on a shared machine. Also shown: the sites' CPU seconds, the
# share of the door's bytes moved by splice(2), and the segments the
# kernel dropped for want of TCP memory and the retransmission timeouts
# during the run (host-wide: other processes' too), which stall reads.
#
#   PACED=1 bench/xroot.sh                  # 100 and 200 jobs, 2 min each
#   QUICK=1 PACED=1 bench/xroot.sh          # smoke: 20 jobs, 1 min
#   PACED=1 PROFILE=1 bench/xroot.sh        # also the door's CPU, block and
#                                           # mutex profiles and a 5 s trace
# Needs: g++, libxrootd-client-dev, libpcre3-dev (scripts/install-deps.sh).
paced() {
  local jobs_list=${PJOBS:-100 200} mins=${PMIN:-2} mb=${PMB:-2.5} period=${PPERIOD:-1}
  [ -n "${QUICK:-}" ] && { jobs_list=${PJOBS:-20}; mins=${PMIN:-1}; }
  local size_mb=${PSIZE_MB:-256} ramp=${PRAMP:-10} maxjobs=0 n
  for n in $jobs_list; do [ "$n" -gt "$maxjobs" ] && maxjobs=$n; done
  for t in g++ curl; do command -v $t >/dev/null || { echo "missing $t: run scripts/install-deps.sh" >&2; exit 1; }; done
  [ -f /usr/include/xrootd/XrdCl/XrdClFile.hh ] && [ -f /usr/include/pcrecpp.h ] ||
    { echo "missing libxrootd-client-dev or libpcre3-dev: run scripts/install-deps.sh" >&2; exit 1; }
  local repo=${AAA_REPO:-/work/.mirror/cvuosalo+xrootd_scaletest/repo}
  log "building the AAA client (xrdfragcpXrdCl) from $repo"
  git -C "$repo" show HEAD:filereadtests/xrdfragcpXrdCl.cxx >"$W/xrdfragcpXrdCl.cxx"
  g++ -O2 -w -o "$W/bin/xrdfragcpXrdCl" -I/usr/include/xrootd "$W/xrdfragcpXrdCl.cxx" -lXrdCl -lXrdUtils -lpcrecpp -pthread

  # One random file, hard-linked under maxjobs names on every server:
  # job i reads /paced/f<i>; the bytes sit in one page cache for all.
  log "creating a $size_mb MiB file under $maxjobs names"
  mkdir -p "$W/pt" "$W/site1/paced" "$W/site2/paced" "$W/pxrd/data/paced" "$W/pxrd/admin" "$W/pxrd/run"
  head -c $((size_mb << 20)) /dev/urandom >"$W/pt/f"
  for ((i = 0; i < maxjobs; i++)); do
    for d in site1 site2 pxrd/data; do ln "$W/pt/f" "$W/$d/paced/f$i"; done
  done
  chmod -R a+rX "$W/pt" "$W/site1" "$W/site2" "$W/pxrd/data"

  # (b) a real XRootD data server, alone (no cmsd), on the same files
  local px; px=$(free_port)
  cat >"$W/pxrd/xrootd.cfg" <<CFG
all.export /
oss.localroot $W/pxrd/data
xrd.port $px
all.adminpath $W/pxrd/admin
all.pidpath $W/pxrd/run
CFG
  local runas=()
  if [ "$(id -u)" = 0 ]; then runas=(-R xrootd); chown -R xrootd: "$W/pxrd/admin" "$W/pxrd/run"; chown xrootd: "$W/pxrd"; fi
  xrootd "${runas[@]}" -c "$W/pxrd/xrootd.cfg" -l "$W/pxrd/xrootd.log" >"$W/pxrd/xrootd.out" 2>&1 </dev/null &
  PIDS+=($!)
  local xpid=$!

  # (a) two lakefed storage sites and the federator with its door; the
  # federation has only the sites, so the door serves every byte.
  local s1 s2 fp dp
  s1=$(free_port); s2=$(free_port); fp=$(free_port); dp=$(free_port)
  "$W/bin/lakefed" storage --root "$W/site1" --listen 127.0.0.1:$s1 >"$W/site1.log" 2>&1 &
  PIDS+=($!); local site_pids=($!)
  "$W/bin/lakefed" storage --root "$W/site2" --listen 127.0.0.1:$s2 >"$W/site2.log" 2>&1 &
  PIDS+=($!); site_pids+=($!)
  cat >"$W/pfed.yaml" <<CFG
listen: 127.0.0.1:$fp
listen_xroot: 127.0.0.1:$dp
federation:
  health:
    interval: 2s
    timeout: 1s
  endpoints:
    - {name: site1, url: "http://127.0.0.1:$s1/", timeout: 5s}
    - {name: site2, url: "http://127.0.0.1:$s2/", timeout: 5s}
CFG
  for p in $px $s1 $s2; do wait_port "$p"; done
  pprof_flag door
  local prof=("${PPROF[@]}")
  if profiling; then prof+=(--pprof-contention); fi
  "$W/bin/lakefed" serve --config "$W/pfed.yaml" "${prof[@]}" >"$W/pfed.log" 2>&1 &
  PIDS+=($!)
  local dpid=$!
  wait_port $fp && wait_port $dp || { echo "lakefed serve did not start:" >&2; cat "$W/pfed.log" >&2; exit 1; }
  # The sites keep a file's adler32 from its PUT; these files were
  # written behind their back, so each site computes it once now (kept by
  # inode: one request covers every name), as it would have on upload.
  # Without it every job's first read waits for a sum of the whole file.
  for p in $s1 $s2; do
    curl -sf -o /dev/null -I -H 'Want-Digest: adler32' "http://127.0.0.1:$p/paced/f0" ||
      { echo "site :$p did not answer the checksum" >&2; exit 1; }
  done
  log "servers up: door :$dp (sites :$s1 :$s2), XRootD :$px; ${mb} MiB every ${period} s for $mins min per job, jobs start over ${ramp} s"

  # doorbytes -> "read_bytes spliced_bytes" of the door so far
  doorbytes() {
    curl -sf "http://127.0.0.1:$fp/api/xroot" |
      python3 -c 'import json, sys; d = json.load(sys.stdin)["federation"]; print(d["read_bytes"], d.get("spliced_bytes", 0))'
  }
  # drops -> segments the kernel dropped for want of TCP memory, and
  # retransmission timeouts, host-wide so far (/proc/net/netstat)
  drops() {
    awk '/^TcpExt:/ { if (!h) { for (i = 2; i <= NF; i++) k[i] = $i; h = 1 } else for (i = 2; i <= NF; i++) v[k[i]] = $i }
      END { print v["TCPRcvQDrop"] + 0, v["TCPTimeouts"] + 0 }' /proc/net/netstat
  }
  declare -A P
  local run setup addr pid dir c0 c1 s0 s1c d0 d1 k0 k1 out
  for n in $jobs_list; do
    for setup in ${PSERVERS:-door xrootd}; do
      run=${setup}_$n dir="$W/paced/$run"
      mkdir -p "$dir"
      addr=127.0.0.1:$dp pid=$dpid
      [ $setup = xrootd ] && addr=127.0.0.1:$px pid=$xpid
      P[${run}_load]=$(load1)
      c0=$(cpu "$pid"); s0=$(cpu "${site_pids[@]}"); d0=$(doorbytes); k0=$(drops)
      local jp=()
      for ((i = 0; i < n; i++)); do
        timeout $((mins * 60 + 60)) "$W/bin/xrdfragcpXrdCl" --cmsclientsim "$mb" "$period" "$mins" \
          "root://$addr//paced/f$i" >"$dir/job$i.out" 2>"$dir/job$i.err" &
        jp+=($!)
        sleep "$(awk -v r="$ramp" -v n="$n" 'BEGIN { printf "%.3f", r / n }')"
      done
      if profiling && [ $setup = door ]; then
        # Mid-run, all jobs reading: 20 s of CPU (xroot-paced-N, with
        # its flame graph), block and mutex profiles (deltas), then a
        # 5 s scheduler trace.
        local pu=http://127.0.0.1:${PPROF_PORT[door]}/debug/pprof pb pm
        mkdir -p "$PROFILE_DIR"
        profile_during "xroot-paced-$n" door 20
        curl -sf -o "$PROFILE_DIR/xroot-paced-$n-block.pprof" "$pu/block?seconds=20" & pb=$!
        curl -sf -o "$PROFILE_DIR/xroot-paced-$n-mutex.pprof" "$pu/mutex?seconds=20" & pm=$!
        wait $pb $pm || true
        profile_collect
        curl -sf -o "$PROFILE_DIR/xroot-paced-$n-trace.out" "$pu/trace?seconds=${PTRACE_S:-5}" || true
      fi
      wait "${jp[@]}" || true
      c1=$(cpu "$pid"); s1c=$(cpu "${site_pids[@]}"); d1=$(doorbytes); k1=$(drops)
      P[${run}_drops]=$(awk -v a="$k0" -v b="$k1" 'BEGIN { split(a, x); split(b, y); printf "%d/%d", y[1] - x[1], y[2] - x[2] }')
      out=$(python3 - "$period" "$dir" <<'PY'
import glob, os, sys
period, d = float(sys.argv[1]), sys.argv[2]
lat, late, failed, nbytes, jobs_bad = [], 0, 0, 0, 0
late_by_sec = {}
for f in glob.glob(os.path.join(d, "job*.out")):
    job = os.path.basename(f)
    reads = 0
    for line in open(f, errors="replace"):
        w = line.split()
        if "duration:" in w and "read:" in w:
            sec = int(w[w.index("time:") + 1])
            t = float(w[w.index("duration:") + 1])
            lat.append(t)
            nbytes += int(w[w.index("read:") + 1])
            reads += 1
            if t > period:
                late += 1
                late_by_sec.setdefault(sec, set()).add(job)
        elif line.lstrip().startswith("Failed read"):
            failed += 1
            reads += 1
    if reads == 0:
        jobs_bad += 1
lat.sort()
def q(p):
    return 1000 * lat[min(len(lat) - 1, int(p * len(lat)))] if lat else float("nan")
stall = max((len(v) for v in late_by_sec.values()), default=0)
print("reads=%d p50_ms=%.1f p99_ms=%.1f max_ms=%.1f late=%d failed=%d bytes=%d stall_jobs=%d jobs_without_reads=%d"
      % (len(lat), q(0.50), q(0.99), 1000 * lat[-1] if lat else float("nan"), late, failed, nbytes, stall, jobs_bad))
PY
)
      P[$run]=$out
      P[${run}_cpu]=$(awk -v t=$((c1 - c0)) -v hz="$TICKS" 'BEGIN { printf "%.2f", t / hz }')
      P[${run}_site_cpu]=$(awk -v t=$((s1c - s0)) -v hz="$TICKS" 'BEGIN { printf "%.2f", t / hz }')
      P[${run}_cpugb]=$(awk -v c="${P[${run}_cpu]}" -v b="$(kv "$out" bytes)" 'BEGIN { if (b > 0) printf "%.2f", c / (b / 1e9); else print "n/a" }')
      P[${run}_spliced]=-
      if [ $setup = door ]; then
        P[${run}_spliced]=$(awk -v a="$d0" -v b="$d1" 'BEGIN { split(a, x); split(b, y); r = y[1] - x[1]; if (r > 0) printf "%.0f%%", 100 * (y[2] - x[2]) / r; else print "n/a" }')
      fi
      log "$run: $out server_cpu_s=${P[${run}_cpu]} (sites ${P[${run}_site_cpu]}) cpu_s_per_GB=${P[${run}_cpugb]} spliced=${P[${run}_spliced]} tcp_drops/timeouts=${P[${run}_drops]}"
    done
  done

  r() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "" && a != "nan" && a != "n/a" && b > 0) printf "%.2f", a / b; else print "n/a" }'; }
  ok() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || a == "nan" || a == "n/a") print "?"; else if (a <= b) print "met"; else print "MISSED" }'; }
  echo
  echo "AAA paced reads (xrdfragcpXrdCl --cmsclientsim $mb $period $mins): ${mb} MiB every ${period} s per job, $(nproc) cores, load before $LOAD_BEFORE, after $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ)"
  printf '%-6s %-7s %7s %8s %8s %9s %5s %6s %6s %10s %9s %8s %11s %6s\n' jobs server reads p50_ms p99_ms max_ms late stall failed cpu_s/GB site_cpu spliced drops/rto load1
  for n in $jobs_list; do
    for setup in door xrootd; do
      run=${setup}_$n out=${P[$run]}
      printf '%-6s %-7s %7s %8s %8s %9s %5s %6s %6s %10s %9s %8s %11s %6s\n' "$n" "$setup" "$(kv "$out" reads)" "$(kv "$out" p50_ms)" \
        "$(kv "$out" p99_ms)" "$(kv "$out" max_ms)" "$(kv "$out" late)" "$(kv "$out" stall_jobs)" \
        "$(( $(kv "$out" failed) + $(kv "$out" jobs_without_reads) ))" "${P[${run}_cpugb]}" "${P[${run}_site_cpu]}" "${P[${run}_spliced]}" "${P[${run}_drops]}" "${P[${run}_load]}"
    done
  done
  echo
  printf '%-6s %-34s %10s %10s %8s\n' jobs "goal (door vs XRootD, same run)" measured ratio verdict
  for n in $jobs_list; do
    [ -n "${P[door_$n]:-}" ] && [ -n "${P[xrootd_$n]:-}" ] || continue
    local d=${P[door_$n]} x=${P[xrootd_$n]} rp rc
    rp=$(r "$(kv "$d" p99_ms)" "$(kv "$x" p99_ms)")
    rc=$(r "${P[door_${n}_cpugb]}" "${P[xrootd_${n}_cpugb]}")
    printf '%-6s %-34s %10s %10s %8s\n' "$n" "p99 <= 1.5x XRootD's" "$(kv "$d" p99_ms) ms" "${rp}x" "$(ok "$rp" 1.5)"
    printf '%-6s %-34s %10s %10s %8s\n' "$n" "max <= 500 ms" "$(kv "$d" max_ms) ms" "$(r "$(kv "$d" max_ms)" "$(kv "$x" max_ms)")x" "$(ok "$(kv "$d" max_ms)" 500)"
    printf '%-6s %-34s %10s %10s %8s\n' "$n" "CPU per GB <= 1.5x XRootD's" "${P[door_${n}_cpugb]} s/GB" "${rc}x" "$(ok "$rc" 1.5)"
    printf '%-6s %-34s %10s %10s %8s\n' "$n" "0 late reads" "$(kv "$d" late)" "$(kv "$x" late) XRootD" "$(ok "$(kv "$d" late)" 0)"
  done
  if profiling; then echo "(door profiles in $PROFILE_DIR: xroot-paced-N.pprof and .svg, -block.pprof, -mutex.pprof, -trace.out)"; fi
  return 0
}

log "building"
go build -o "$W/bin/" ./cmd/lakefed ./bench/cmd/xrdopen
if [ -n "${PACED:-}" ]; then
  paced
  exit 0
fi

log "creating $FILES files and a $BIG_MB MiB file"
python3 - "$W/tree" "$FILES" "$PER" <<'PY'
import os, sys
root, n, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for i in range(n):
    d = os.path.join(root, "data", "d%03d" % (i // per))
    if i % per == 0:
        os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "f%05d" % i), "w") as f:
        f.write("file %d\n" % i)
PY
mkdir -p "$W/tree/big"
head -c $((BIG_MB << 20)) /dev/urandom >"$W/tree/big/big.bin"
chmod -R a+rX "$W/tree"
# Hard links: the same bytes (and page cache) everywhere, made in a second.
mkdir -p "$W/xrd/ds1" "$W/xrd/ds2"
for d in site xrd/ds1/data xrd/ds2/data; do cp -al "$W/tree" "$W/$d"; done
mkdir -p "$W/site/only-site" && ln "$W/tree/big/big.bin" "$W/site/only-site/big.bin"
# The same small files under /sdata on the lakefed site alone: the door
# opens them itself (no root:// replica to redirect to).
cp -al "$W/tree/data" "$W/site/sdata"

# --- XRootD federation: redirector (manager) + two data servers, as in
# ../shared/servers/fed_start.sh. XRootD refuses to run as root.
XR=$(free_port); XRC=$(free_port); XD1=$(free_port); XD2=$(free_port)
RUNAS=(); [ "$(id -u)" = 0 ] && RUNAS=(-R xrootd)
xrd_cfg() { # NAME ROLE XROOTD_PORT CMSD_PORT
  mkdir -p "$W/xrd/$1/admin" "$W/xrd/$1/run" "$W/xrd/$1/data"
  cat >"$W/xrd/$1/xrootd.cfg" <<CFG
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
  [ $n = redir ] && REDIR_PIDS=($!)
  for _ in $(seq 100); do compgen -G "$W/xrd/$n/admin/$n/.olb/olbd.*" >/dev/null && break; sleep 0.1; done
  xrootd "${RUNAS[@]}" -n "$n" -c "$W/xrd/$n/xrootd.cfg" -l "$W/xrd/$n/xrootd.log" >"$W/xrd/$n/xrootd.out" 2>&1 </dev/null &
  PIDS+=($!)
  [ $n = redir ] && REDIR_PIDS+=($!)
done

# --- lakefed: one storage site and the federator with its root:// door
SP=$(free_port); FP=$(free_port); DP=$(free_port)
pprof_flag site
"$W/bin/lakefed" storage --root "$W/site" --listen 127.0.0.1:$SP "${PPROF[@]}" >"$W/site.log" 2>&1 &
PIDS+=($!)
cat >"$W/fed.yaml" <<CFG
listen: 127.0.0.1:$FP
listen_xroot: 127.0.0.1:$DP
federation:
  metadata_cache:
    max_entries: $((FILES * 4))
    ttl: 10m
    negative_ttl: 5s
  health:
    interval: 2s
    timeout: 1s
  endpoints:
    - {name: ds1, url: "root://127.0.0.1:$XD1//", timeout: 5s, priority: 1}
    - {name: ds2, url: "root://127.0.0.1:$XD2//", timeout: 5s, priority: 1}
    - {name: site, url: "http://127.0.0.1:$SP/", timeout: 5s, priority: 2}
CFG
for p in $XRC $XR $XD1 $XD2 $SP; do wait_port "$p"; done
pprof_flag door
"$W/bin/lakefed" serve --config "$W/fed.yaml" "${PPROF[@]}" >"$W/fed.log" 2>&1 &
PIDS+=($!)
DOOR_PIDS=($!)
wait_port $FP && wait_port $DP || { echo "lakefed serve did not start:" >&2; cat "$W/fed.log" >&2; exit 1; }
for _ in $(seq 150); do grep -q 'Status changed to active' "$W/xrd/redir/redir/cmsd.log" 2>/dev/null && break; sleep 0.2; done
grep -q 'Status changed to active' "$W/xrd/redir/redir/cmsd.log" || { echo "XRootD redirector never turned active (logs in $W/xrd)" >&2; KEEP=1; exit 1; }
log "servers up: lakefed door :$DP (federator :$FP, site :$SP), XRootD redirector :$XR, data servers :$XD1 :$XD2"

PAT=/data/d%03d/f%05d
TO=$((DUR + 90)) # every tool run is bounded in time
declare -A V L   # V[figure]=value, L[figure]=load average before it
DOOR=127.0.0.1:$DP
REDIR=127.0.0.1:$XR
# xo LABEL ADDR ARGS... -> runs xrdopen against ADDR, sets R to its line and
# C[LABEL] to the opens per CPU-second the front used (lakefed serve; the
# redirector's xrootd + cmsd): the clients share the cores, so the rate
# alone understates a front that is not the bottleneck.
declare -A C
xo() {
  local lab=$1 addr=$2 c0 c1; shift 2
  local front=("${DOOR_PIDS[@]}"); [ "$addr" = "$REDIR" ] && front=("${REDIR_PIDS[@]}")
  L[$lab]=$(load1)
  c0=$(cpu "${front[@]}")
  R=$(timeout $TO "$W/bin/xrdopen" -addr "$addr" -pattern "$PAT" -per $PER -c "$THREADS" "$@" 2>"$W/$lab.err") || true
  c1=$(cpu "${front[@]}")
  C[$lab]=$(awk -v n="$(kv "$R" opens)" -v t=$((c1 - c0)) -v hz="$TICKS" 'BEGIN { if (t > 0) printf "%.0f", n / (t / hz); else print "n/a" }')
  log "$lab: $R front_cpu_s=$(awk -v t=$((c1 - c0)) -v hz="$TICKS" 'BEGIN { print t / hz }') $(tail -1 "$W/$lab.err")"
}

# --- (a) open+close. The door runs first, each time: the data servers'
# own caches then favour the redirector, not the door.
HALF=$(((FILES - WARM) / 2))
# dprof NAME: with PROFILE=1, a CPU profile of the door (NAME) while s is
# the door, until profile_collect
dprof() { if [ $s = door ]; then profile_during "$1" door; fi; }
for s in door redir; do
  a=$DOOR; [ $s = redir ] && a=$REDIR
  dprof xroot-open-cold
  xo ${s}_open_cold $a -mode follow -first $WARM -files $HALF -unique -d ${DUR}s
  profile_collect
  V[${s}_open_cold]=$(kv "$R" rate); V[${s}_open_cold_p99]=$(kv "$R" p99_ms); V[${s}_open_cold_e]=$(kv "$R" errors)
  dprof xroot-redirect-cold
  xo ${s}_redir_cold $a -mode redirect -first $((WARM + HALF)) -files $HALF -unique -d ${DUR}s
  profile_collect
  V[${s}_redir_cold]=$(kv "$R" rate); V[${s}_redir_cold_e]=$(kv "$R" errors)
  # warm-up: every file of the warm set looked up once
  xo ${s}_locate $a -mode redirect -files $WARM -unique -d 60s
done
for s in door redir; do
  a=$DOOR; [ $s = redir ] && a=$REDIR
  dprof xroot-open
  xo ${s}_open $a -mode follow -files $WARM -d ${DUR}s
  profile_collect
  V[${s}_open]=$(kv "$R" rate); V[${s}_open_p50]=$(kv "$R" p50_ms); V[${s}_open_p99]=$(kv "$R" p99_ms); V[${s}_open_e]=$(kv "$R" errors)
  dprof xroot-redirect
  xo ${s}_redir $a -mode redirect -files $WARM -d ${DUR}s
  profile_collect
  V[${s}_redir]=$(kv "$R" rate); V[${s}_redir_p99]=$(kv "$R" p99_ms); V[${s}_redir_e]=$(kv "$R" errors)
done
# open+close answered by the door itself: files only on the lakefed site
xo door_slocate $DOOR -mode follow -pattern "/sdata/d%03d/f%05d" -files $WARM -unique -d 60s
profile_run xroot-self door "" xo door_self $DOOR -mode follow -pattern "/sdata/d%03d/f%05d" -files $WARM -d ${DUR}s
V[door_self]=$(kv "$R" rate); V[door_self_p50]=$(kv "$R" p50_ms); V[door_self_p99]=$(kv "$R" p99_ms); V[door_self_e]=$(kv "$R" errors)

# --- (b) never-seen missing files, THREADS at a time. The redirector
# takes seconds for each, so it gets one path per thread (two rounds).
profile_during xroot-missing-site site
profile_run xroot-missing door "" xo door_miss $DOOR -mode redirect -missing -pattern "/missing/r$$-%06d" -files $MISS_N -unique -d 60s -timeout 40s
V[door_miss_p50]=$(kv "$R" p50_ms); V[door_miss_p99]=$(kv "$R" p99_ms); V[door_miss_max]=$(kv "$R" max_ms); V[door_miss_n]=$(kv "$R" opens); V[door_miss_e]=$(kv "$R" errors)
xo redir_miss $REDIR -mode redirect -missing -pattern "/missing/x$$-%06d" -files $((THREADS * 2)) -unique -d 60s -timeout 40s
V[redir_miss_p50]=$(kv "$R" p50_ms); V[redir_miss_p99]=$(kv "$R" p99_ms); V[redir_miss_max]=$(kv "$R" max_ms); V[redir_miss_n]=$(kv "$R" opens); V[redir_miss_e]=$(kv "$R" errors)

# --- (c) xrdcp of the big file: from the data server directly, through
# the door (redirected to a data server), through the redirector, and
# through the door from the storage site (the door serves the bytes).
# Every path is read once first; then ROUNDS rounds, the order rotating;
# the table holds medians (MB/s, 10^6 bytes per second).
declare -A CP=(
  [direct]="root://127.0.0.1:$XD1//big/big.bin"
  [door]="root://$DOOR//big/big.bin"
  [redir]="root://$REDIR//big/big.bin"
  [proxied]="root://$DOOR//only-site/big.bin"
)
ORDER=(direct door redir proxied)
declare -A CPS # CPS[path]="rate rate ..."
cp_once() { # PATH -> MB/s, or fails
  local t0 t1
  t0=$(date +%s.%N)
  timeout 600 xrdcp -f -s "${CP[$1]}" /dev/null 2>>"$W/xrdcp.err" || { echo "xrdcp ${CP[$1]} failed: $(tail -3 "$W/xrdcp.err")" >&2; return 1; }
  t1=$(date +%s.%N)
  awk -v b=$((BIG_MB << 20)) -v a="$t0" -v z="$t1" 'BEGIN { printf "%.0f", b / (z - a) / 1e6 }'
}
L[xrdcp]=$(load1)
for p in "${ORDER[@]}"; do cp_once "$p" >/dev/null; done
for ((r = 0; r < ROUNDS; r++)); do
  line=""
  for ((i = 0; i < ${#ORDER[@]}; i++)); do
    p=${ORDER[$(((i + r) % ${#ORDER[@]}))]}
    v=$(cp_once "$p")
    CPS[$p]="${CPS[$p]:-} $v"
    line="$line $p=$v"
  done
  log "xrdcp round $((r + 1)) (MB/s):$line"
done
median() { tr ' ' '\n' <<<"$1" | grep . | sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
for p in "${ORDER[@]}"; do V[cp_$p]=$(median "${CPS[$p]}"); done

# --- the table
r() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "" && a != "nan" && b > 0) printf "%.2f", a / b; else print "n/a" }'; }
ok() { awk -v a="$1" -v b="$2" -v dir="$3" 'BEGIN { if (a == "" || a == "nan" || a == "n/a") print "?"; else if ((dir == ">=" && a >= b) || (dir == "<=" && a <= b)) print "met"; else print "MISSED" }'; }
DOORSTATS=$(curl -sf "http://127.0.0.1:$FP/api/xroot" | tr -d ' \n' || true)
echo
echo "root:// door benchmark: FILES=$FILES WARM=$WARM THREADS=$THREADS DUR=${DUR}s BIG=${BIG_MB}MiB ROUNDS=$ROUNDS, $(nproc) cores, load before $LOAD_BEFORE, after $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ)"
printf '%-50s %14s %14s %9s  %s\n' "figure ($THREADS client threads)" "lakefed door" "XRootD redir" "ratio" "load1 (door, redir)"
row() { printf '%-50s %14s %14s %9s  %s\n' "$@"; }
row "open+close via redirect, warm (opens/s)" "${V[door_open]}" "${V[redir_open]}" "$(r "${V[door_open]}" "${V[redir_open]}")x" "${L[door_open]} ${L[redir_open]}"
row "  p50 / p99 (ms)" "${V[door_open_p50]}/${V[door_open_p99]}" "${V[redir_open_p50]}/${V[redir_open_p99]}" "" ""
row "  opens per CPU-second of the front" "${C[door_open]}" "${C[redir_open]}" "$(r "${C[door_open]}" "${C[redir_open]}")x" ""
row "open+close at the door, no redirect, warm (opens/s)" "${V[door_self]}" "-" "$(r "${V[door_self]}" "${V[redir_open]}")x" "${L[door_self]} (ratio: vs redir open+close)"
row "  p50 / p99 (ms)" "${V[door_self_p50]}/${V[door_self_p99]}" "-" "" ""
row "redirect answer only, warm (opens/s)" "${V[door_redir]}" "${V[redir_redir]}" "$(r "${V[door_redir]}" "${V[redir_redir]}")x" "${L[door_redir]} ${L[redir_redir]}"
row "  opens per CPU-second of the front" "${C[door_redir]}" "${C[redir_redir]}" "$(r "${C[door_redir]}" "${C[redir_redir]}")x" ""
row "open+close via redirect, cold (opens/s)" "${V[door_open_cold]}" "${V[redir_open_cold]}" "$(r "${V[door_open_cold]}" "${V[redir_open_cold]}")x" "${L[door_open_cold]} ${L[redir_open_cold]}"
row "redirect answer only, cold (opens/s)" "${V[door_redir_cold]}" "${V[redir_redir_cold]}" "$(r "${V[door_redir_cold]}" "${V[redir_redir_cold]}")x" "${L[door_redir_cold]} ${L[redir_redir_cold]}"
row "missing file kXR_NotFound, p50 (ms)" "${V[door_miss_p50]}" "${V[redir_miss_p50]}" "$(r "${V[redir_miss_p50]}" "${V[door_miss_p50]}")x" "${L[door_miss]} ${L[redir_miss]}"
row "missing file kXR_NotFound, p99 / max (ms)" "${V[door_miss_p99]}/${V[door_miss_max]}" "${V[redir_miss_p99]}/${V[redir_miss_max]}" "" "n=${V[door_miss_n]}, ${V[redir_miss_n]}"
echo
printf '%-50s %14s %9s  %s\n' "xrdcp of ${BIG_MB} MiB to /dev/null (median MB/s)" "MB/s" "vs direct" "rounds"
crow() { printf '%-50s %14s %9s  %s\n' "$@"; }
crow "from the data server directly" "${V[cp_direct]}" "1.00x" "${CPS[direct]}"
crow "through the lakefed door (redirected)" "${V[cp_door]}" "$(r "${V[cp_door]}" "${V[cp_direct]}")x" "${CPS[door]}"
crow "through the XRootD redirector" "${V[cp_redir]}" "$(r "${V[cp_redir]}" "${V[cp_direct]}")x" "${CPS[redir]}"
crow "through the door, served by it (lakefed site)" "${V[cp_proxied]}" "$(r "${V[cp_proxied]}" "${V[cp_direct]}")x" "${CPS[proxied]}"
echo
printf '%-58s %12s %10s %8s\n' "goal" "measured" "ratio" "verdict"
goal() { printf '%-58s %12s %10s %8s\n' "$@"; }
OPEN_RATIO=$(r "${V[door_open]}" "${V[redir_open]}")
CP_RATIO=$(r "${V[cp_door]}" "${V[cp_direct]}")
goal "open+close rate >= 5x the redirector's (warm)" "${V[door_open]}/s" "${OPEN_RATIO}x" "$(ok "$OPEN_RATIO" 5 '>=')"
goal "  door's own open+close (no redirect) vs redirector's" "${V[door_self]}/s" "$(r "${V[door_self]}" "${V[redir_open]}")x" "-"
goal "  open+close per CPU-second of the front vs redirector's" "${C[door_open]}/s" "$(r "${C[door_open]}" "${C[redir_open]}")x" "-"
goal "  redirect answer alone vs redirector's" "${V[door_redir]}/s" "$(r "${V[door_redir]}" "${V[redir_redir]}")x" "-"
goal "missing file answered in <= 50 ms (p99)" "${V[door_miss_p99]} ms" "$(r 50 "${V[door_miss_p99]}")" "$(ok "${V[door_miss_p99]}" 50 '<=')"
goal "xrdcp ${BIG_MB} MiB through the door >= 1.0x direct" "${V[cp_door]} MB/s" "${CP_RATIO}x" "$(ok "$CP_RATIO" 1.0 '>=')"
echo "(errors: door open ${V[door_open_e]}/${V[door_self_e]}/${V[door_open_cold_e]}, redirect ${V[door_redir_e]}/${V[door_redir_cold_e]}, missing ${V[door_miss_e]}; redirector open ${V[redir_open_e]}/${V[redir_open_cold_e]}, redirect ${V[redir_redir_e]}/${V[redir_redir_cold_e]}, missing ${V[redir_miss_e]})"
echo "(door /api/xroot: $DOORSTATS)"

echo
echo "README snippet:"
cat <<MD

| root:// ($THREADS client threads, $(nproc) cores, load ~${L[door_open]}) | lakefed door | XRootD redirector | ratio | goal |
|---|---:|---:|---:|---|
| open+close via redirect, warm | ${V[door_open]}/s | ${V[redir_open]}/s | ${OPEN_RATIO}x | >= 5x |
| open+close served by the door (no redirect), warm | ${V[door_self]}/s | - | $(r "${V[door_self]}" "${V[redir_open]}")x | |
| redirect answer only, warm | ${V[door_redir]}/s | ${V[redir_redir]}/s | $(r "${V[door_redir]}" "${V[redir_redir]}")x | |
| opens per CPU-second of the front (warm open+close) | ${C[door_open]} | ${C[redir_open]} | $(r "${C[door_open]}" "${C[redir_open]}")x | |
| open+close via redirect, cold | ${V[door_open_cold]}/s | ${V[redir_open_cold]}/s | $(r "${V[door_open_cold]}" "${V[redir_open_cold]}")x | |
| missing file, p50 / p99 | ${V[door_miss_p50]} / ${V[door_miss_p99]} ms | ${V[redir_miss_p50]} / ${V[redir_miss_p99]} ms | $(r "${V[redir_miss_p50]}" "${V[door_miss_p50]}")x faster | <= 50 ms |
| xrdcp ${BIG_MB} MiB (vs ${V[cp_direct]} MB/s direct) | ${V[cp_door]} MB/s | ${V[cp_redir]} MB/s | ${CP_RATIO}x direct | >= 1.0x |

Measured with \`bench/xroot.sh\` (FILES=$FILES DUR=${DUR}s ROUNDS=$ROUNDS) on $(date -u +%F); the door's file-serving
path (a file only on a lakefed storage site, proxied) did ${V[cp_proxied]} MB/s.
MD

if profiling; then
  echo
  profile_during xroot-xrdcp-proxied-site site "$PROFILE_SECONDS"
  profile_loop xroot-xrdcp-proxied door cp_once proxied
fi
