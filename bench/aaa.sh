#!/usr/bin/env bash
# The CMS AAA scale tests at full scale against a federator in front of
# three storage sites (lakefed demo) on this machine, then the highest open
# rate and read job count tried that stay "ok".
#
#   bench/aaa.sh
#   OPEN_SPEEDS="10 20 40" READ_JOBS="1200 2400" bench/aaa.sh
#   PROFILE=1 bench/aaa.sh      # also a CPU profile of the demo during each test
#
# Full scale is the AAA shape: open test 50 jobs x 2 Hz = 100 Hz; read test
# 600 jobs each reading 2.5 MiB every 10 s (150 MB/s). Only the ramps are
# shortened (stages of 3 s and 10 s instead of 30 s and 60 s) so one run
# takes minutes, not an hour; periods and rates are the AAA ones. Higher
# open rates use --speed (periods divided, rates multiplied) with 500 jobs;
# higher read loads add jobs at the AAA period.
# PROFILE=1 (bench/lib.sh): a CPU profile of lakefed demo (its sites and
# federator are one process) during each test, each a .pprof and a flame
# graph .svg in PROFILE_DIR (bench/results/profiles): aaa-open, aaa-read,
# aaa-open-speedN and aaa-read-N (jobs).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh # free_port, pprof_flag, profile_run
OPEN_SPEEDS=${OPEN_SPEEDS:-"10 20"}
READ_JOBS=${READ_JOBS:-"1200 2400"}
W=$(mktemp -d /tmp/lakefed-aaa.XXXXXX)
PID=
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null; rm -rf "$W"; }
trap cleanup EXIT

go build -o "$W/lakefed" ./cmd/lakefed
port=$(free_port)
pprof_flag demo
"$W/lakefed" demo --dir "$W/demo" --listen "127.0.0.1:$port" --no-bench "${PPROF[@]}" >"$W/demo.log" 2>&1 &
PID=$!
for _ in $(seq 300); do grep -q "Ctrl-C" "$W/demo.log" 2>/dev/null && break; sleep 0.1; done
FED=http://127.0.0.1:$port/
DB=$W/aaa.db
b() { "$W/lakefed" bench "$@" --db "$DB" "$FED" 2>/dev/null | tail -n +1; }
echo "federator $FED (3 storage sites); load average $(cut -d' ' -f1-3 /proc/loadavg)"

echo; echo "== open test, full AAA scale: 50 jobs x 2 Hz = 100 Hz"
profile_run aaa-open demo "" b open --jobs 50 --ramp-step 5 --ramp-every 3s --hold 10s --seed 1
echo; echo "== read test, full AAA scale: 600 jobs x 2.5 MiB / 10 s"
profile_run aaa-read demo "" b read --jobs 600 --ramp-step 100 --ramp-every 10s --hold 20s --file-size 5MiB --seed 2
for s in $OPEN_SPEEDS; do
  echo; echo "== open test, 500 jobs at --speed $s: $((1000 * s)) Hz expected"
  profile_run "aaa-open-speed$s" demo "" b open --jobs 500 --ramp-step 100 --ramp-every 30s --hold 60s --speed "$s" --seed 3
done
for j in $READ_JOBS; do
  echo; echo "== read test, $j jobs x 2.5 MiB / 10 s"
  profile_run "aaa-read-$j" demo "" b read --jobs "$j" --ramp-step $((j / 4)) --ramp-every 10s --hold 20s --file-size 5MiB --seed 4
done
echo; echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
"$W/lakefed" bench list --db "$DB"
