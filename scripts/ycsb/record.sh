#!/usr/bin/env bash
# Record the real YCSB HdrHistogram interval logs of tests/data/formats/real/ycsb-hlog/:
# YCSB 0.17.0's own Client (hdrhistogram measurements, hdrhistogram.fileoutput=true) driving
# Debian's nginx on 127.0.0.1 through a one-operation HTTP binding (HttpDB.java, beside this
# script), at 1, 2, 4 and 8 threads, one YCSB run per step.  Every run is bounded by `timeout`;
# nginx is started here and stopped by its PID.
#
# YCSB 0.17.0 declares HdrHistogram 2.1.4, whose log writer needs javax.xml.bind (gone from
# Java 11+) and writes log format 1.1 with V1-encoded histograms; YCSB's master moved to
# HdrHistogram 2.1.12 "to support newer jdk versions" (commit ce741d3d), which writes log format
# 1.3 with V2-encoded histograms.  The steps are recorded with 2.1.12 on the classpath; one more
# 1-thread run with 2.1.4 (plus jaxb-api 2.3.1) gives the V1 log headroom refuses (bad-input/).
#
#   scripts/ycsb/record.sh [OUT]     (default: tests/data/formats/real/ycsb-hlog)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
out="${1:-$repo/tests/data/formats/real/ycsb-hlog}"
work="$(mktemp -d /tmp/ycsb-rec.XXXXXX)"
chmod 755 "$work"  # nginx's workers (user nobody) read the page
port="${YCSB_PORT:-18377}"
seconds="${YCSB_SECONDS:-3}"
ops="${YCSB_OPS:-100000}"

# 1. jars from Maven Central (through the local repository)
fetch() {  # fetch DIR ARTIFACT...
  local dir="$1"; shift
  mkdir -p "$dir"
  for a in "$@"; do
    timeout 300 mvn -B -q dependency:copy -Dartifact="$a" -DoutputDirectory="$dir" >/dev/null
  done
  ls "$dir"/*.jar | tr '\n' ':'
}
common=(site.ycsb:core:0.17.0 org.apache.htrace:htrace-core4:4.1.0-incubating
        org.codehaus.jackson:jackson-core-asl:1.9.4 org.codehaus.jackson:jackson-mapper-asl:1.9.4)
cp_new="$(fetch "$work/lib-2.1.12" "${common[@]}" org.hdrhistogram:HdrHistogram:2.1.12)"
cp_old="$(fetch "$work/lib-2.1.4" "${common[@]}" org.hdrhistogram:HdrHistogram:2.1.4 javax.xml.bind:jaxb-api:2.3.1)"

# 2. the binding
mkdir -p "$work/classes"
timeout 120 javac -d "$work/classes" -cp "$cp_new" "$here/HttpDB.java"

# 3. nginx serving one small static page (a missing path answers 404)
mkdir -p "$work/nginx/html" "$work/nginx/logs" "$work/nginx/tmp"
head -c 2048 /dev/zero | tr '\0' 'x' > "$work/nginx/html/page.html"
cat > "$work/nginx/nginx.conf" <<CONF
worker_processes 1;
pid $work/nginx/nginx.pid;
error_log $work/nginx/logs/error.log;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path $work/nginx/tmp;
  proxy_temp_path $work/nginx/tmp;
  fastcgi_temp_path $work/nginx/tmp;
  uwsgi_temp_path $work/nginx/tmp;
  scgi_temp_path $work/nginx/tmp;
  server { listen 127.0.0.1:$port; root $work/nginx/html; }
}
CONF
/usr/sbin/nginx -p "$work/nginx" -c "$work/nginx/nginx.conf" -g 'daemon off;' &
ngx=$!
trap 'kill "$ngx" 2>/dev/null || true; wait "$ngx" 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 50); do
  curl -fs -o /dev/null "http://127.0.0.1:$port/page.html" && break
  sleep 0.1
done
curl -fsS -o /dev/null "http://127.0.0.1:$port/page.html"

# 4. one YCSB run: reads only, every 20th read of a thread to a missing page (404, READ-FAILED)
ycsb() {  # ycsb CLASSPATH THREADS DIR
  mkdir -p "$3"
  timeout $((seconds + 60)) java -cp "$work/classes:$1" site.ycsb.Client -t -s \
    -db headroom.ycsb.HttpDB -P /dev/null -threads "$2" \
    -p workload=site.ycsb.workloads.CoreWorkload \
    -p recordcount=1000 -p operationcount="$ops" -p maxexecutiontime="$seconds" \
    -p readproportion=1 -p updateproportion=0 -p scanproportion=0 -p insertproportion=0 \
    -p measurementtype=hdrhistogram -p hdrhistogram.fileoutput=true \
    -p hdrhistogram.output.path="$3/" -p hdrhistogram.percentiles=50,90,95,99,99.9 \
    -p status.interval=1 \
    -p httpdb.url="http://127.0.0.1:$port/page.html" \
    -p httpdb.missingurl="http://127.0.0.1:$port/missing.html" -p httpdb.missingevery=20 \
    > "$3/stdout.txt" 2> "$3/stderr.txt"
}

mkdir -p "$out/ycsb-output" "$out/bad-input"
for c in 1 2 4 8; do
  d="$work/c$c"
  ycsb "$cp_new" "$c" "$d"
  cp "$d/READ.hdr" "$out/ycsb-c$c.hlog"
  cp "$d/stdout.txt" "$out/ycsb-output/ycsb-c$c.stdout.txt"
  cp "$d/READ-FAILED.hdr" "$out/ycsb-output/ycsb-c$c-READ-FAILED.hlog"
  sleep 1
done
ycsb "$cp_old" 1 "$work/v1"
cp "$work/v1/READ.hdr" "$out/bad-input/ycsb-hdr2.1.4-READ.hlog"
cp "$work/v1/stdout.txt" "$out/bad-input/ycsb-hdr2.1.4.stdout.txt"

# 5. the independent reading: HdrHistogram's own HistogramLogProcessor (Java) on every log
for f in "$out"/ycsb-c*.hlog "$out"/ycsb-output/*.hlog; do
  b="$(basename "$f" .hlog)"
  timeout 60 java -cp "$cp_new" org.HdrHistogram.HistogramLogProcessor -i "$f" -csv -outputValueUnitRatio 1 \
    -o "$out/ycsb-output/$b.processor"
done
echo "written: $out"
