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
