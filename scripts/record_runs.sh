#!/usr/bin/env bash
# Re-record the `headroom ramp` runs in data/runs/ (see data/runs/README.md,
# section "Runs recorded with headroom ramp").
#
#   scripts/record_runs.sh                       # all runs, in the recorded order
#   scripts/record_runs.sh nginx-ka-aa1-a ...    # some of them
#
# Each run gets a fresh pair of nginx servers on loopback, started from
# data/runs/configs/ramp-*.conf in a temporary folder (paths and free ports
# filled in), stopped by their PIDs afterwards.  The load generator (headroom
# ramp driving hey) is pinned to CPU $GEN_CPU and both nginx to CPU
# $SERVER_CPU with taskset.  Every ramp is bounded in time (headroom ramp
# kills a generator that overruns its step).
#
# Environment: OUT (data/runs), CONC (1:40:3), STEP (2s), PAUSE seconds between
# runs (60), GEN_CPU (0), SERVER_CPU (1), NGINX (nginx on PATH or /usr/sbin/nginx),
# PYTHON (python3).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

OUT=${OUT:-data/runs}
CONC=${CONC:-1:40:3}
STEP=${STEP:-2s}
PAUSE=${PAUSE:-60}
GEN_CPU=${GEN_CPU:-0}
SERVER_CPU=${SERVER_CPU:-1}
PYTHON=${PYTHON:-python3}
NGINX=${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}
ALL_RUNS=(nginx-ka-aa1-a nginx-ka-aa1-b nginx-large-buffering-on nginx-large-buffering-off nginx-ka-aa2-a nginx-ka-aa2-b)

for tool in "$NGINX" hey taskset gzip; do
  command -v "$tool" >/dev/null 2>&1 || { echo "record_runs.sh: $tool not found" >&2; exit 2; }
done
nginx_version=$("$NGINX" -v 2>&1 | sed 's|.*nginx/||')
hey_version=$(dpkg-query -W -f='${Version}' hey 2>/dev/null || echo unknown)

work=$(mktemp -d /tmp/headroom-record.XXXXXX)
backend_pid=""
proxy_pid=""

free_port() {
  "$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

stop_pid() {  # stop one nginx master by its PID: SIGQUIT (graceful), SIGKILL after 10 s
  local pid=$1
  [ -n "$pid" ] || return 0
  kill -QUIT "$pid" 2>/dev/null || return 0
  for _ in $(seq 100); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
}

stop_servers() {
  stop_pid "$proxy_pid"
  stop_pid "$backend_pid"
  wait 2>/dev/null || true
  proxy_pid=""
  backend_pid=""
}

cleanup() {
  stop_servers
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

render() {  # render PROXY_BUFFERING TEMPLATE OUT: a config with this run's folder and ports
  local user=""
  [ "$(id -u)" = 0 ] && user="user root;"  # the workers must read the 0700 temporary folder
  sed -e "s|@DIR@|$work|g" -e "s|@BACKEND_PORT@|$backend_port|g" -e "s|@PROXY_PORT@|$proxy_port|g" \
    -e "s|@PROXY_BUFFERING@|$1|g" -e "s|@USER@|$user|g" "$2" >"$3"
}

wait_for() {  # wait until a URL answers 200 (at most 10 s)
  "$PYTHON" - "$1" <<'EOF'
import sys, time, urllib.request
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
deadline = time.monotonic() + 10
while True:
    try:
        with opener.open(sys.argv[1], timeout=1) as r:
            r.read()
            if r.status == 200:
                break
    except OSError:
        pass
    if time.monotonic() > deadline:
        sys.exit(f"record_runs.sh: {sys.argv[1]} does not answer")
    time.sleep(0.05)
EOF
}

start_servers() {  # start_servers PROXY_BUFFERING
  mkdir -p "$work/www" "$work/backend-tmp" "$work/proxy-tmp"
  head -c 1023 /dev/zero | tr '\0' 'x' >"$work/www/index.html" && echo >>"$work/www/index.html"  # 1024 bytes
  head -c 262144 /dev/zero | tr '\0' 'y' >"$work/www/large.bin"                                      # 256 KiB
  backend_port=$(free_port)
  proxy_port=$(free_port)
  render "$1" data/runs/configs/ramp-backend.conf "$work/backend.conf"
  render "$1" data/runs/configs/ramp-proxy-keepalive.conf "$work/proxy.conf"
  taskset -c "$SERVER_CPU" "$NGINX" -p "$work" -c "$work/backend.conf" -e "$work/backend-error.log" &
  backend_pid=$!
  taskset -c "$SERVER_CPU" "$NGINX" -p "$work" -c "$work/proxy.conf" -e "$work/proxy-error.log" &
  proxy_pid=$!
  wait_for "http://127.0.0.1:$proxy_port/index.html"
}

record() {  # record NAME PROXY_BUFFERING PATH WHAT
  local name=$1 buffering=$2 path=$3 what=$4
  if [ -e "$OUT/$name" ]; then
    echo "record_runs.sh: $OUT/$name exists; remove it to re-record" >&2
    return 1
  fi
  start_servers "$buffering"
  local desc="nginx $nginx_version reverse proxy (1 worker, upstream keepalive 64, proxy_buffering $buffering) in front of a backend nginx (1 worker) serving $what; proxy and backend pinned to CPU $SERVER_CPU, headroom ramp and hey (Debian $hey_version) to CPU $GEN_CPU; machine shared with other work"
  echo "== $name: $what, proxy_buffering $buffering" >&2
  local rc=0
  taskset -c "$GEN_CPU" "$PYTHON" -m headroom ramp "http://127.0.0.1:$proxy_port$path" -o "$OUT/$name" \
    --concurrency "$CONC" --step-duration "$STEP" --cpu-pid "$proxy_pid" --cpu-pid "$backend_pid" \
    --label "$name" --description "$desc" --progress || rc=$?
  stop_servers
  [ -f "$OUT/$name/perfResults.csv" ] && gzip -9 "$OUT/$name/perfResults.csv"
  return "$rc"
}

run_one() {
  case "$1" in
    nginx-ka-aa1-a | nginx-ka-aa1-b | nginx-ka-aa2-a | nginx-ka-aa2-b)
      record "$1" on /index.html "a 1024-byte static file" ;;
    nginx-large-buffering-on)
      record "$1" on /large.bin "a 262144-byte static file" ;;
    nginx-large-buffering-off)
      record "$1" off /large.bin "a 262144-byte static file" ;;
    *)
      echo "record_runs.sh: unknown run $1 (known: ${ALL_RUNS[*]})" >&2
      return 2 ;;
  esac
}

runs=("$@")
[ ${#runs[@]} -gt 0 ] || runs=("${ALL_RUNS[@]}")
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"
first=1
for r in "${runs[@]}"; do
  [ $first = 1 ] || sleep "$PAUSE"
  first=0
  run_one "$r"
done
