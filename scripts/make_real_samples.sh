#!/bin/bash
# Make headroom's real load-test ramp samples (tests/data/formats/real/) with
# the real tools, against a private nginx on 127.0.0.1 (loopback only; every
# run bounded with `timeout`; nginx stopped by its PID at the end).
#
#   scripts/make_real_samples.sh [jmeter] [jmeter_stepping] [gatling] [gatling_binary] [k6] [vegeta] [oha] [ab]
#
# (no argument: all but gatling_binary, ab and hey, which were added later: name them).  Tools are fetched by their ordinary clients into
# $TOOLS (default ~/.cache/headroom-tools): JMeter 5.6.3 jars from Maven
# Central (scripts/jmeter/pom.xml), Gatling 3.11.5 through gatling-maven-plugin
# (scripts/gatling/), k6 and vegeta (module github.com/tsenart/vegeta/v12) with `go install`, oha with `cargo install`.
# STEP_S (default 8) is the hold time of every step.  Each tool's own summary
# goes to $OUT/<tool>-summary.txt; the READMEs quote them.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$HERE/../tests/data/formats/real}
TOOLS=${TOOLS:-$HOME/.cache/headroom-tools}
PORT=${PORT:-18790}
STEP_S=${STEP_S:-8}
K6_VERSION=${K6_VERSION:-latest}
VEGETA_VERSION=${VEGETA_VERSION:-latest}
export PATH=/usr/local/go/bin:$HOME/.cargo/bin:$PATH
mkdir -p "$OUT" "$TOOLS/bin"
OUT=$(cd "$OUT" && pwd)
WORK=$(mktemp -d)
chmod 755 "$WORK"
URL=http://127.0.0.1:$PORT

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
    location = /busy { return 503; }
  }
}
CONF
  nginx -c "$WORK/nginx.conf" -p "$WORK"
  sleep 0.5
  NGINX_PID=$(cat "$WORK/nginx.pid")
}
stop_nginx() {
  if [ -n "${NGINX_PID:-}" ]; then kill "$NGINX_PID" 2>/dev/null || true; fi
  [ -n "${KEEP:-}" ] || rm -rf "$WORK"
}
trap stop_nginx EXIT

# ---------------------------------------------------------------- JMeter 5.6.3
jmeter_home() {
  local home=$TOOLS/jmeter-5.6.3
  if [ ! -f "$home/lib/ext/jmeter-plugins-casutg-2.10.jar" ]; then
    rm -rf "$home"
    mvn -q -B -f "$HERE/jmeter/pom.xml" dependency:copy-dependencies -DoutputDirectory="$home/all"
    mkdir -p "$home/bin" "$home/lib/ext"
    mv "$home/all/ApacheJMeter-5.6.3.jar" "$home/bin/ApacheJMeter.jar"
    mv "$home"/all/ApacheJMeter_*.jar "$home"/all/jmeter-plugins-*.jar "$home/lib/ext/"
    mv "$home"/all/*.jar "$home/lib/"
    # jmeter.properties, saveservice.properties ... ship inside ApacheJMeter_config
    (cd "$home" && unzip -q -o lib/ext/ApacheJMeter_config-5.6.3.jar 'bin/*')
  fi
  JMETER_HOME=$home
}

run_jmeter() {
  jmeter_home
  local d=$WORK/jmeter
  mkdir -p "$d"
  sed -e "s/@PORT@/$PORT/g" -e "s#@XML@#$d/jmeter-stacked.xml#" \
    -e "s/@DELAY0@/0/; s/@DELAY1@/$STEP_S/; s/@DELAY2@/$((2 * STEP_S))/" \
    -e "s/@DELAY3@/$((3 * STEP_S))/; s/@DELAY4@/$((4 * STEP_S))/" \
    -e "s/@DUR0@/$((5 * STEP_S))/; s/@DUR1@/$((4 * STEP_S))/; s/@DUR2@/$((3 * STEP_S))/" \
    -e "s/@DUR3@/$((2 * STEP_S))/; s/@DUR4@/$STEP_S/" \
    "$HERE/jmeter/ramp.jmx.in" > "$d/ramp.jmx"
  # -l writes the CSV JTL with the shipped defaults of jmeter.properties
  (cd "$d" && timeout $((5 * STEP_S + 60)) java -jar "$JMETER_HOME/bin/ApacheJMeter.jar" \
    -n -t ramp.jmx -l jmeter-stacked.csv -j jmeter.log) | tee "$OUT/jmeter-summary.txt"
  cp "$d/ramp.jmx" "$OUT/jmeter-stacked.jmx"
  gzip -9 -c "$d/jmeter-stacked.csv" > "$OUT/jmeter-stacked.csv.gz"
  gzip -9 -c "$d/jmeter-stacked.xml" > "$OUT/jmeter-stacked.xml.gz"
}

# a stepping plan: jmeter-plugins' Concurrency Thread Group, 4, 8, 12, 16 threads
run_jmeter_stepping() {
  jmeter_home
  local d=$WORK/jmeter-stepping
  mkdir -p "$d"
  sed -e "s/@PORT@/$PORT/g" -e "s/@RAMP@/$((4 * STEP_S))/g" -e "s/@HOLD@/$STEP_S/g" \
    "$HERE/jmeter/concurrency.jmx.in" > "$d/stepping.jmx"
  (cd "$d" && timeout $((5 * STEP_S + 60)) java -jar "$JMETER_HOME/bin/ApacheJMeter.jar" \
    -n -t stepping.jmx -l jmeter-stepping.csv -j jmeter.log) | tee "$OUT/jmeter-stepping-summary.txt"
  cp "$d/stepping.jmx" "$OUT/jmeter-stepping.jmx"
  cp "$d/jmeter.log" "$OUT/jmeter-stepping.log"  # JMeter's own log: when the thread group started
  gzip -9 -c "$d/jmeter-stepping.csv" > "$OUT/jmeter-stepping.csv.gz"
}

# --------------------------------------------------------------- Gatling 3.11.5
run_gatling() {
  local sim
  for sim in ClosedRampSimulation OpenRampSimulation; do
    rm -rf "$HERE/gatling/target/gatling"
    (cd "$HERE/gatling" && timeout $((5 * STEP_S + 300)) mvn -B -q gatling:test \
      -Dgatling.simulationClass="headroom.$sim" -DbaseUrl="$URL" -DstepSeconds="$STEP_S" \
      -Dgatling.noReports=true) | tee "$OUT/gatling-$sim-summary.txt" || true
    local log run
    log=$(ls "$HERE"/gatling/target/gatling/*/simulation.log)
    gzip -9 -c "$log" > "$OUT/gatling-$sim.log.gz"
    # Gatling's own statistics of that log (Global Information: counts, percentiles)
    run=$(basename "$(dirname "$log")")
    (cd "$HERE/gatling" && timeout 300 mvn -B -q gatling:test -Dgatling.reportsOnly="$run") \
      | sed -n '/^Parsing log file/,$p' | grep -v 'Reports generated\|file:///' \
      > "$OUT/gatling-$sim-report.txt" || true
  done
  rm -rf "$HERE/gatling/target"
}

# ---------------------------------------------- Gatling 3.13+ (binary simulation.log)
# GATLING_BINARY_VERSIONS (default "3.16.0 3.13.5"), all with gatling-maven-plugin $GATLING_PLUGIN
# (4.21.0 resolves 3.16.0, which Maven Central's version list does not show).  The same two
# simulations as for 3.11; the log is kept as Gatling wrote it (gzip -9), Gatling's console summary
# (the run) and its report of the log (reportsOnly) beside it.
run_gatling_binary() {
  local sim v log run plugin=${GATLING_PLUGIN:-4.21.0}
  for v in ${GATLING_BINARY_VERSIONS:-3.16.0 3.13.5}; do
    for sim in ClosedRampSimulation OpenRampSimulation; do
      rm -rf "$HERE/gatling/target/gatling"
      (cd "$HERE/gatling" && timeout $((5 * STEP_S + 300)) mvn -B -q gatling:test \
        -Dgatling.version="$v" -Dgatling-maven-plugin.version="$plugin" \
        -Dgatling.simulationClass="headroom.$sim" -DbaseUrl="$URL" -DstepSeconds="$STEP_S" \
        -Dgatling.noReports=true) > "$OUT/gatling${v//./_}-$sim-summary.txt" || true
      log=$(ls "$HERE"/gatling/target/gatling/*/simulation.log)
      gzip -9 -c "$log" > "$OUT/gatling${v//./_}-$sim.log.gz"
      run=$(basename "$(dirname "$log")")
      (cd "$HERE/gatling" && timeout 300 mvn -B -q gatling:test -Dgatling.version="$v" \
        -Dgatling-maven-plugin.version="$plugin" -Dgatling.reportsOnly="$run") \
        | sed -n '/^Parsing log file/,$p' | grep -v 'Reports generated\|file:///' \
        > "$OUT/gatling${v//./_}-$sim-report.txt" || true
    done
  done
  rm -rf "$HERE/gatling/target"
}

# ------------------------------------------------------------------------- k6
run_k6() {
  [ -x "$TOOLS/bin/k6" ] || GOBIN=$TOOLS/bin nice go install "go.k6.io/k6@$K6_VERSION"
  local d=$WORK/k6 s
  mkdir -p "$d"
  for s in ramping-vus ramping-arrival-rate; do
    (cd "$d" && K6_CSV_TIME_FORMAT=rfc3339_nano BASE="$URL" STEP_S="$STEP_S" \
      timeout $((5 * STEP_S + 120)) "$TOOLS/bin/k6" run --no-color --quiet \
      --out "json=k6-$s.json" --out "csv=k6-$s.csv" "$HERE/k6/$s.js") \
      > "$OUT/k6-$s-summary.txt" 2> "$d/k6-$s.log" || true
    gzip -9 -c "$d/k6-$s.json" > "$OUT/k6-$s.json.gz"
    gzip -9 -c "$d/k6-$s.csv" > "$OUT/k6-$s.csv.gz"
  done
  "$TOOLS/bin/k6" version > "$OUT/k6-version.txt"
}

# --------------------------------------------------------------------- vegeta
run_vegeta() {
  [ -x "$TOOLS/bin/vegeta" ] || GOBIN=$TOOLS/bin nice go install "github.com/tsenart/vegeta/v12@$VEGETA_VERSION"
  local d=$WORK/vegeta r i files=""
  mkdir -p "$d"
  # 100 targets: 94 /, 3 /missing (404), 2 /busy (503), 1 refused port
  for i in $(seq 1 94); do echo "GET $URL/"; done > "$d/targets"
  for i in 1 2 3; do echo "GET $URL/missing"; done >> "$d/targets"
  for i in 1 2; do echo "GET $URL/busy"; done >> "$d/targets"
  echo "GET http://127.0.0.1:9/" >> "$d/targets"
  : > "$OUT/vegeta-summary.txt"
  for r in 250 500 1000 2000 4000; do
    timeout $((STEP_S + 30)) "$TOOLS/bin/vegeta" attack -targets "$d/targets" -rate "$r/s" \
      -duration "${STEP_S}s" -name "rate$r" -max-body 0 -timeout 5s > "$d/rate$r.bin"
    echo "== rate$r" >> "$OUT/vegeta-summary.txt"
    "$TOOLS/bin/vegeta" report "$d/rate$r.bin" >> "$OUT/vegeta-summary.txt"
    files="$files $d/rate$r.bin"
  done
  # shellcheck disable=SC2086
  "$TOOLS/bin/vegeta" encode -to csv $files | gzip -9 > "$OUT/vegeta-rates.csv.gz"
  # a `go install` build has no -version string: the module version is in the binary
  go version -m "$TOOLS/bin/vegeta" | awk '$1 == "mod" {print $2, $3}' > "$OUT/vegeta-version.txt"
}

# ------------------------------------------------------------------------ oha
run_oha() {
  # oha reaches one URL per run (no error mix) and prints no summary with --output-format csv:
  # one file per rate step, the rate in the name (oha-q<rate>.csv)
  local oha=$TOOLS/bin/oha r
  [ -x "$oha" ] || nice cargo install oha --locked --root "$TOOLS"
  mkdir -p "$OUT/oha-rates"
  for r in 250 500 1000 2000; do
    timeout $((STEP_S + 30)) "$oha" -z "${STEP_S}s" -q "$r" -c 16 --no-tui --output-format csv \
      "$URL/" > "$WORK/oha-q$r.csv"
    gzip -9 -c "$WORK/oha-q$r.csv" > "$OUT/oha-rates/oha-q$r.csv.gz"
  done
  "$oha" --version > "$OUT/oha-version.txt"
}

# ------------------------------------------------------------------------- ab
run_ab() {
  # ApacheBench (Debian apache2-utils) against testserver (-work $AB_WORK SHA-256 rounds per request,
  # about 1 ms of CPU; nginx answers in well under ab's 1 ms resolution, every latency would be 0):
  # one run per concurrency 1, 2, 4, 8, 16 of AB_S seconds (keep-alive, GET /), each with its `-g`
  # per-request file named by its concurrency (ab-steps/ab-c<C>.tsv.gz) and ab's own text summary
  # (stdout) in ab-summary.txt.  ab reaches one URL per run: no error mix.
  local c srv pid
  srv=$WORK/testserver
  (cd "$HERE/../testserver" && timeout 600 go build -trimpath -o "$srv" .)
  "$srv" -work "${AB_WORK:-12000}" -port-file "$WORK/ts.port" -max-lifetime 10m 2> "$WORK/ts.log" &
  pid=$!
  for _ in $(seq 50); do [ -s "$WORK/ts.port" ] && break; sleep 0.1; done
  local url=http://127.0.0.1:$(cat "$WORK/ts.port")/
  mkdir -p "$OUT/ab-steps"
  : > "$OUT/ab-summary.txt"
  for c in 1 2 4 8 16; do
    echo "== ab -k -t ${AB_S:-5} -n 1000000 -c $c -g ab-c$c.tsv $url" >> "$OUT/ab-summary.txt"
    timeout 120 ab -k -t "${AB_S:-5}" -n 1000000 -c "$c" -g "$WORK/ab-c$c.tsv" "$url" >> "$OUT/ab-summary.txt"
    gzip -9 -c "$WORK/ab-c$c.tsv" > "$OUT/ab-steps/ab-c$c.tsv.gz"
    sleep 1  # starts are whole seconds: no two runs share one (added after the samples were made)
  done
  kill "$pid"; wait "$pid" || true
  { dpkg-query -W apache2-utils; ab -V | head -1; } > "$OUT/ab-version.txt"
}

run_hey() {
  # hey (Debian) against testserver, two releases: -work 3000 (base) and 6000 (x2); each a ramp of
  # five 1 s runs at -c 1/2/4/8/16 (-q 200 per worker) appended to one CSV, as throughputramp does
  local v work c srv pid
  srv=$WORK/testserver
  (cd "$HERE/../testserver" && timeout 600 go build -trimpath -o "$srv" .)
  for v in base:3000 x2:6000; do
    work=${v#*:}
    rm -f "$WORK/ts.port"
    "$srv" -work "$work" -port-file "$WORK/ts.port" -max-lifetime 5m 2> "$WORK/ts.log" &
    pid=$!
    for _ in $(seq 50); do [ -s "$WORK/ts.port" ] && break; sleep 0.1; done
    : > "$WORK/hey-${v%%:*}.csv"
    for c in 1 2 4 8 16; do
      timeout 60 hey -z 1s -q 200 -c "$c" -o csv "http://127.0.0.1:$(cat "$WORK/ts.port")/" >> "$WORK/hey-${v%%:*}.csv"
    done
    kill "$pid"; wait "$pid" || true
    gzip -9 -c "$WORK/hey-${v%%:*}.csv" > "$OUT/hey-ramp-${v%%:*}.csv.gz"
  done
  dpkg-query -W hey > "$OUT/hey-version.txt"
}

start_nginx
[ $# -gt 0 ] || set -- jmeter jmeter_stepping gatling k6 vegeta oha
for tool in "$@"; do
  echo "== $tool $(date -u +%FT%TZ)" >&2
  "run_$tool"
done
