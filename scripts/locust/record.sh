#!/bin/bash
# Record headroom's real Locust samples (tests/data/formats/real/locust/): scripts/locust/ramp.py
# (a LoadTestShape of LOCUST_STAGES users, LOCUST_STAGE_S s each) with headroom.locust enabled,
# against the Go test server (testserver/, built by tests/goserver.py) and Debian's nginx, on
# 127.0.0.1 only; one process, and a master with two workers.  Every run bounded by `timeout`;
# every server and worker stopped by its PID.
#
#   scripts/locust/record.sh [goserver] [nginx] [history]      (default: goserver nginx)
#
# history: one process against the Go test server with stages of 12 s and --csv-full-history
# (Locust's 10 s windows fit in a stage), for the stats-history reader.
#
# Needs locust (pip install locust==2.47.0; the one used is printed) and headroom importable
# (pip install -e .).  Per run, OUT/<target>-<mode>/ holds:
#   run/                headroom.locust's files (locust.csv, or locust-worker-0/1.csv), gzipped
#   locust-own/         Locust's own outputs: --csv (run_stats.csv, run_stats_history.csv, ...),
#                       --json-file (stats.json), its printed summary (stdout.txt), and
#                       stages.json: Locust's per-stage figures (own_stats.py over the snapshots)
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
OUT=${OUT:-$ROOT/tests/data/formats/real/locust}
export LOCUST_STAGES=${LOCUST_STAGES:-1,2,4,8}
export LOCUST_STAGE_S=${LOCUST_STAGE_S:-6}
PORT=${PORT:-18795}
MPORT=${MPORT:-18796}
WORK=$(mktemp -d)
chmod 755 "$WORK"
URL=http://127.0.0.1:$PORT
LIMIT=$((${LOCUST_STAGE_S%.*} * 5 + 60))
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  [ -n "${KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
locust --version

start_goserver() {
  local bin
  bin=$(cd "$ROOT" && python3 -c 'import sys; sys.path.insert(0, "tests"); from goserver import build; print(build())')
  # 10 ms of CPU-free delay per request: the server, not Locust's CPU, sets the pace (<= 800 req/s at 8 users)
  export LOCUST_WAIT_S=0
  "$bin" -listen "127.0.0.1:$PORT" -delay 10ms -work 2000 > "$WORK/server.log" 2>&1 &
  SERVER_PID=$!
  PIDS+=("$SERVER_PID")
  sleep 1
  head -1 "$WORK/server.log"
  SERVER_DESC="Go test server (testserver/, $(cd "$ROOT" && python3 -c 'import sys; sys.path.insert(0, "tests"); from goserver import source_hash; print("source " + source_hash())'), -delay 10ms -work 2000)"
}

start_nginx() {
  mkdir -p "$WORK/html" "$WORK/logs"
  echo hello > "$WORK/html/index.html"
  cat > "$WORK/nginx.conf" <<CONF
worker_processes 1;
pid $WORK/nginx.pid;
error_log $WORK/logs/error.log;
events { worker_connections 1024; }
http {
  access_log off;
  keepalive_requests 1000000;
  client_body_temp_path $WORK/logs; proxy_temp_path $WORK/logs;
  fastcgi_temp_path $WORK/logs; uwsgi_temp_path $WORK/logs; scgi_temp_path $WORK/logs;
  server {
    listen 127.0.0.1:$PORT;
    root $WORK/html;
    location = /missing { return 404; }
  }
}
CONF
  /usr/sbin/nginx -c "$WORK/nginx.conf" -p "$WORK"
  sleep 0.5
  SERVER_PID=$(cat "$WORK/nginx.pid")
  export LOCUST_WAIT_S=0.01  # users wait 10 ms between requests: nginx answers in well under 1 ms
  PIDS+=("$SERVER_PID")
  SERVER_DESC="nginx $(/usr/sbin/nginx -v 2>&1 | sed 's/.*\///') (Debian), one worker, a static page"
}

stop_server() {
  kill "$SERVER_PID" 2>/dev/null || true
  sleep 0.5
}

# one run: $1 target name, $2 mode (single|distributed), $3 more options of the master (or single)
run_locust() {
  local target=$1 mode=$2 d=$OUT/$1-$2${3:+-history} w=$WORK/$1-$2
  rm -rf "$d" "$w"
  mkdir -p "$d/locust-own" "$w"
  export LOCUST_OWN_DIR=$w/own
  local common=(-f "$HERE/ramp.py" --headless --host "$URL" --csv "$w/own/run" --json-file "$w/own/stats"
                --headroom-dir "$w/run" --stop-timeout 0 ${3:-})
  mkdir -p "$w/own"
  if [ "$mode" = single ]; then
    (cd "$w" && timeout "$LIMIT" locust "${common[@]}" > "$w/own/stdout.txt" 2>&1) || true
  else
    local wp=()
    for i in 1 2; do
      (cd "$w" && exec timeout "$LIMIT" locust -f "$HERE/ramp.py" --worker --master-host 127.0.0.1 \
        --master-port "$MPORT" > "$w/own/worker-$i.log" 2>&1) &
      wp+=($!)
      PIDS+=($!)
    done
    (cd "$w" && timeout "$LIMIT" locust "${common[@]}" --master --master-bind-host 127.0.0.1 \
      --master-bind-port "$MPORT" --expect-workers 2 > "$w/own/stdout.txt" 2>&1) || true
    for p in "${wp[@]}"; do wait "$p" || true; done
  fi
  (cd "$ROOT" && python3 "$HERE/own_stats.py" "$w/own") > "$w/own/stages.json"
  mkdir -p "$d/run"
  for f in "$w"/run/*.csv; do gzip -9 -c "$f" > "$d/run/$(basename "$f").gz"; done
  cp "$w"/own/run_*.csv "$w"/own/stats.json "$w"/own/stdout.txt "$w"/own/stages.json "$d/locust-own/"
  cp "$w"/own/snapshots-*.jsonl "$d/locust-own/"
  [ "$mode" = single ] || cp "$w"/own/worker-*.log "$d/locust-own/"
  echo "$SERVER_DESC" > "$d/locust-own/server.txt"
  echo "$target $mode: $(ls "$d/run")"
}

[ $# -gt 0 ] || set -- goserver nginx
for target in "$@"; do
  if [ "$target" = history ]; then
    start_goserver
    LOCUST_STAGE_S=12 LIMIT=120 run_locust goserver single --csv-full-history
    stop_server
    continue
  fi
  "start_$target"
  run_locust "$target" single
  run_locust "$target" distributed
  stop_server
done
