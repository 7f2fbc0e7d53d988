#!/bin/bash
# Record real Gatling open-model logs at low arrival rates (OpenStagesSimulation: 20, 40, 60, 80 new
# users per second, 8 s each, every user one request) against a private nginx on 127.0.0.1, with
# Gatling 3.16.0 and 3.13.5 (binary simulation.log, gatling-maven-plugin 4.21.0) and 3.12.0 (text
# log, plugin 4.9.6).  Every run bounded with `timeout`; nginx stopped by its PID.
#
#   scripts/gatling/record_open.sh            (OUT: tests/data/formats/real/gatling-open)
#
# Per version V: gatlingV-OpenStagesSimulation.log.gz (the log as Gatling wrote it, gzip -9) and
# gatlingV-OpenStagesSimulation-summary.txt (Gatling's console output of the run).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$HERE/../../tests/data/formats/real/gatling-open}
PORT=${PORT:-18797}
STEP_S=${STEP_S:-8}
RATES=${RATES:-20,40,60,80}
VERSIONS=${VERSIONS:-3.16.0:4.21.0 3.13.5:4.21.0 3.12.0:4.9.6}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK=$(mktemp -d)
chmod 755 "$WORK"
mkdir -p "$WORK/html" "$WORK/logs"
echo hello > "$WORK/html/index.html"
cat > "$WORK/nginx.conf" <<CONF
worker_processes 1;
pid $WORK/nginx.pid;
error_log $WORK/logs/error.log;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $WORK/logs; proxy_temp_path $WORK/logs;
  fastcgi_temp_path $WORK/logs; uwsgi_temp_path $WORK/logs; scgi_temp_path $WORK/logs;
  server { listen 127.0.0.1:$PORT; root $WORK/html; }
}
CONF
/usr/sbin/nginx -c "$WORK/nginx.conf" -p "$WORK"
sleep 0.5
NGINX_PID=$(cat "$WORK/nginx.pid")
trap 'kill "$NGINX_PID" 2>/dev/null || true; rm -rf "$WORK" "$HERE/target"' EXIT
/usr/sbin/nginx -v 2>&1
java -version 2>&1 | head -1
for vp in $VERSIONS; do
  v=${vp%%:*} plugin=${vp##*:}
  rm -rf "$HERE/target/gatling"
  (cd "$HERE" && timeout 600 mvn -B -q gatling:test -Dgatling.version="$v" \
    -Dgatling-maven-plugin.version="$plugin" -Dgatling.simulationClass=headroom.OpenStagesSimulation \
    -DbaseUrl="http://127.0.0.1:$PORT" -DstepSeconds="$STEP_S" -Drates="$RATES" -Dgatling.noReports=true) \
    > "$OUT/gatling${v//./_}-OpenStagesSimulation-summary.txt" || true
  log=$(ls "$HERE"/target/gatling/*/simulation.log)
  gzip -9 -c "$log" > "$OUT/gatling${v//./_}-OpenStagesSimulation.log.gz"
  echo "$v: $(ls -la "$OUT/gatling${v//./_}-OpenStagesSimulation.log.gz")"
done
