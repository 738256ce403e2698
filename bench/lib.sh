# shellcheck shell=bash
# Shared pieces of the bench/ scripts: a work directory whose processes
# are stopped on exit, free loopback ports, and the reference servers
# (nginx WebDAV, XRootD with XrdHttp) serving a directory. Source it.

# new_workdir PREFIX: W becomes a fresh directory; every pid added to PIDS
# is killed, and W removed, when the script exits.
new_workdir() {
  W=$(mktemp -d "/tmp/$1.XXXXXX")
  chmod 755 "$W"
  PIDS=()
  trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$W"' EXIT
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# wait_port PORT [SECONDS]: until something listens on 127.0.0.1:PORT
# (default 15 s).
wait_port() {
  for _ in $(seq $((${2:-15} * 10))); do (exec 3<>/dev/tcp/127.0.0.1/$1) 2>/dev/null && return 0; sleep 0.1; done
  echo "nothing on port $1" >&2
  return 1
}

# start_nginx DATA: nginx with WebDAV (dav + dav-ext) serving DATA on a
# free port, set in NP. Upload temp files go into DATA, so its renames stay
# on one file system, as lakefed's do.
start_nginx() {
  local data=$1 mod
  NP=$(free_port)
  mod=$(nginx -V 2>&1 | sed -n 's/.*--modules-path=\([^ ]*\).*/\1/p')
  mkdir -p "$W/nginx/logs"
  cat > "$W/nginx/nginx.conf" <<CFG
load_module $mod/ngx_http_dav_ext_module.so;
$([ "$(id -u)" = 0 ] && echo "user root root;")
worker_processes auto;
pid $W/nginx/nginx.pid;
error_log $W/nginx/logs/error.log warn;
events { worker_connections 1024; }
http {
  access_log off; sendfile on; tcp_nopush on; keepalive_requests 1000000;
  client_body_temp_path $data;
  server {
    listen 127.0.0.1:$NP; root $data; client_max_body_size 0;
    location / { dav_methods PUT DELETE MKCOL COPY MOVE; dav_ext_methods PROPFIND OPTIONS;
      create_full_put_path on; dav_access user:rw group:rw all:r; }
  }
}
CFG
  nginx -p "$W/nginx" -c "$W/nginx/nginx.conf" -g 'daemon off;' >"$W/nginx/logs/out.log" 2>&1 &
  PIDS+=($!)
}

# start_xrootd DATA: one XRootD data server exporting DATA, root:// on XP
# and XrdHttp on XHP. XRootD refuses to run as root: as root it drops to
# the xrootd user, who is given DATA.
start_xrootd() {
  local data=$1 runas=()
  XP=$(free_port); XHP=$(free_port)
  mkdir -p "$W/xrd/admin" "$W/xrd/run"
  cat > "$W/xrd/xrootd.cfg" <<CFG
all.export /
oss.localroot $data
xrd.port $XP
all.adminpath $W/xrd/admin
all.pidpath $W/xrd/run
xrd.protocol XrdHttp:$XHP libXrdHttp.so
CFG
  if [ "$(id -u)" = 0 ]; then runas=(-R xrootd); chown -R xrootd: "$W/xrd" "$data"; fi
  xrootd "${runas[@]}" -c "$W/xrd/xrootd.cfg" -l "$W/xrd/xrootd.log" >/dev/null 2>&1 &
  PIDS+=($!)
}

# CPU profiles. With PROFILE=1 a script gives every lakefed process it
# measures a pprof listener (pprof_flag) and takes a CPU profile of it
# during each measurement; profile_collect leaves NAME.pprof and its flame
# graph NAME.svg (bench/cmd/flamegraph) in PROFILE_DIR (default
# bench/results/profiles, relative to the repository, kept out of git) and
# prints their paths. Without PROFILE=1 every helper below does nothing
# (profile_run just runs its command): no listener, no cost.
PROFILE_DIR=${PROFILE_DIR:-bench/results/profiles}
PROFILE_SECONDS=${PROFILE_SECONDS:-10} # length of a profile_loop profile
declare -A PPROF_PORT=()              # lakefed process name → its pprof port
PROFILE_PENDING=()                    # pid name pid name ...: profiles under way

profiling() { [ "${PROFILE:-}" = 1 ]; }

# pprof_flag PROC: PPROF becomes the flags that give the lakefed process
# PROC a pprof listener on a free port (--pprof 127.0.0.1:PORT), and
# PPROF_PORT[PROC] that port; without PROFILE=1, PPROF is empty. It sets
# an array rather than printing the flags: $(pprof_flag) would run in a
# subshell, which cannot record the port. The first call also builds the
# flame graph program, before anything is measured. Needs W.
# shellcheck disable=SC2034 # PPROF is for the caller
pprof_flag() {
  PPROF=()
  profiling || return 0
  PPROF_PORT[$1]=$(free_port)
  PPROF=(--pprof "127.0.0.1:${PPROF_PORT[$1]}")
  [ -x "$W/profiles/flamegraph" ] || go build -o "$W/profiles/flamegraph" ./bench/cmd/flamegraph
}

# profile_during NAME PROC [SECONDS]: starts, in the background, a CPU
# profile of the lakefed process PROC for the measurement NAME: one of
# SECONDS, or, without SECONDS, profiles of PROFILE_CHUNK seconds (1) one
# after the other until profile_collect, for a load whose length is not
# known in advance. Call it as the load starts, profile_collect when it
# ends; several may run at once (one per process).
profile_during() {
  profiling || return 0
  local name=$1 proc=$2 secs=${3:-} url d
  url="http://127.0.0.1:${PPROF_PORT[$proc]:?no pprof_flag for $proc}/debug/pprof/profile"
  d=$W/profiles/$name
  rm -rf "$d"
  mkdir -p "$d"
  if [ -n "$secs" ]; then
    curl -sf -o "$d/0.pprof" "$url?seconds=$secs" &
  else
    ( # at least one, however short the load
      i=0
      while curl -sf -o "$d/$i.pprof" "$url?seconds=${PROFILE_CHUNK:-1}"; do
        [ -e "$d/stop" ] && break
        i=$((i + 1))
      done
    ) &
  fi
  PROFILE_PENDING+=("$!" "$name")
}

# profile_running: whether a profile profile_during started still runs.
profile_running() {
  local i
  for ((i = 0; i < ${#PROFILE_PENDING[@]}; i += 2)); do
    kill -0 "${PROFILE_PENDING[$i]}" 2>/dev/null && return 0
  done
  return 1
}

# profile_collect: ends the open-ended profiles, waits for the others,
# then for each measurement writes PROFILE_DIR/NAME.pprof (the chunks of
# an open-ended profile merged by go tool pprof) and its flame graph
# NAME.svg, and prints their paths on stderr.
profile_collect() {
  profiling || return 0
  local i name d out chunks c
  for ((i = 1; i < ${#PROFILE_PENDING[@]}; i += 2)); do touch "$W/profiles/${PROFILE_PENDING[$i]}/stop"; done
  mkdir -p "$PROFILE_DIR"
  for ((i = 0; i < ${#PROFILE_PENDING[@]}; i += 2)); do
    wait "${PROFILE_PENDING[$i]}" || true
    name=${PROFILE_PENDING[$((i + 1))]}
    d=$W/profiles/$name
    out=$PROFILE_DIR/$name
    chunks=()
    for c in "$d"/*.pprof; do [ -s "$c" ] && chunks+=("$c"); done
    if [ ${#chunks[@]} = 0 ]; then
      echo "profile $name: nothing received (did the process stop?)" >&2
      continue
    fi
    if [ ${#chunks[@]} = 1 ]; then
      cp "${chunks[0]}" "$out.pprof"
    else
      go tool pprof -proto "${chunks[@]}" >"$out.pprof" 2>"$d/merge.log" || { echo "profile $name: merge failed: $(tail -1 "$d/merge.log")" >&2; continue; }
    fi
    "$W/profiles/flamegraph" -title "$name" -o "$out.svg" "$out.pprof" || { echo "profile $name: no flame graph" >&2; continue; }
    echo "profile $name: $out.pprof $out.svg" >&2
  done
  PROFILE_PENDING=()
}

# profile_run NAME PROC SECONDS CMD...: runs CMD, the measurement NAME,
# under a CPU profile of the lakefed process PROC (SECONDS as in
# profile_during: "" for as long as CMD runs); without PROFILE=1 it just
# runs CMD. CMD runs in this shell, so the variables it sets stay set.
profile_run() {
  local name=$1 proc=$2 secs=$3
  shift 3
  profile_during "$name" "$proc" "$secs"
  "$@"
  profile_collect
}

# profile_loop NAME PROC CMD...: for a measurement too short to profile
# as it runs (one transfer), CMD again and again for PROFILE_SECONDS
# under a CPU profile of PROC, apart from the measured rounds.
profile_loop() {
  profiling || return 0
  local name=$1 proc=$2
  shift 2
  profile_during "$name" "$proc" "$PROFILE_SECONDS"
  while profile_running; do "$@" >/dev/null || true; done
  profile_collect
}
