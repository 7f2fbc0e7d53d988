#!/bin/sh
# Make the small real sample files in tests/data/formats/ with the real load
# generators against nginx on 127.0.0.1 (loopback only, every run bounded to a
# few seconds, nginx stopped by its PID at the end).
#   hey (Debian), vegeta (~/go/bin), oha (~/.cargo/bin), k6 (~/go/bin, go install
#   go.k6.io/k6), jmeter (Debian jmeter 2.13).  A tool that is missing is skipped.
# Whole ramps from JMeter 5.6.3, Gatling 3.11.5, k6, vegeta and oha (8 s steps,
# with 404s, 503s and refused connections) are made by make_real_samples.sh
# into tests/data/formats/real/.
set -eu
OUT=${1:-tests/data/formats}
PORT=${PORT:-18765}
VEGETA=${VEGETA:-$HOME/go/bin/vegeta}
OHA=${OHA:-$HOME/.cargo/bin/oha}
K6=${K6:-$HOME/go/bin/k6}
mkdir -p "$OUT"
WORK=$(mktemp -d)
chmod 755 "$WORK"
mkdir -p "$WORK/html" "$WORK/logs"
echo hello > "$WORK/html/index.html"
cat > "$WORK/nginx.conf" <<CONF
worker_processes 1;
pid $WORK/nginx.pid;
error_log $WORK/logs/error.log;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path $WORK/logs; proxy_temp_path $WORK/logs;
  fastcgi_temp_path $WORK/logs; uwsgi_temp_path $WORK/logs; scgi_temp_path $WORK/logs;
  server {
    listen 127.0.0.1:$PORT;
    root $WORK/html;
    location = /missing { return 404; }
  }
}
CONF
nginx -c "$WORK/nginx.conf" -p "$WORK"
sleep 0.5
trap 'kill "$(cat "$WORK/nginx.pid")" 2>/dev/null || true; [ -n "${KEEP:-}" ] || rm -rf "$WORK"' EXIT
URL=http://127.0.0.1:$PORT/
BAD=http://127.0.0.1:$PORT/missing

# hey: a ramp of three 1-second steps (concurrency 1, 2, 4; -q 100 req/s per
# worker), each run appended to one file as throughputramp does (every section
# with its own header and offsets from 0); step 2 hits /missing: all its
# requests are HTTP 404.
: > "$OUT/hey-ramp.csv"
hey -z 1s -q 100 -c 1 -o csv "$URL" >> "$OUT/hey-ramp.csv"
hey -z 1s -q 100 -c 2 -o csv "$BAD" >> "$OUT/hey-ramp.csv"
hey -z 1s -q 100 -c 4 -o csv "$URL" >> "$OUT/hey-ramp.csv"
# every connection refused: hey writes only its header
hey -n 5 -c 1 -o csv http://127.0.0.1:1/ > "$OUT/hey-refused.csv" || true

if [ -x "$VEGETA" ]; then
  # a rate ramp: three attacks of 1 s at 50, 100, 200 req/s, one named per step;
  # every 10th target is a 404
  for r in 50 100 200; do
    printf 'GET %s\nGET %s\nGET %s\nGET %s\nGET %s\nGET %s\nGET %s\nGET %s\nGET %s\nGET %s\n' \
      "$URL" "$URL" "$URL" "$URL" "$URL" "$URL" "$URL" "$URL" "$URL" "$BAD" \
      | "$VEGETA" attack -rate "$r" -duration 1s -name "rate$r" -max-body 0 > "$WORK/vegeta-$r.bin"
  done
  B="$WORK/vegeta-50.bin $WORK/vegeta-100.bin $WORK/vegeta-200.bin"
  "$VEGETA" encode -to csv $B > "$OUT/vegeta.csv"
  "$VEGETA" encode -to json $B > "$OUT/vegeta.json"
  head -c 4000 "$WORK/vegeta-50.bin" > "$OUT/vegeta.gob"
fi

if [ -x "$OHA" ]; then
  "$OHA" -z 2s -q 150 -c 4 --no-tui --output-format csv "$URL" > "$OUT/oha.csv"
  # a ramp as a folder of one file per step (concurrency in the file name)
  mkdir -p "$OUT/oha-ramp"
  for c in 1 2 4; do
    "$OHA" -z 1s -q $((60 * c)) -c $c --no-tui --output-format csv "$URL" > "$OUT/oha-ramp/oha-c$c.csv"
  done
  "$OHA" -n 50 -c 2 --no-tui --output-format json "$URL" > "$OUT/oha.json"
fi

if [ -x "$K6" ]; then
  cat > "$WORK/ramp.js" <<'JS'
import http from 'k6/http';
import { sleep } from 'k6';
export const options = {
  // one scenario per step: the scenario tag of every sample names its step
  scenarios: {
    c1: { executor: 'constant-vus', vus: 1, duration: '2s', startTime: '0s', gracefulStop: '0s' },
    c2: { executor: 'constant-vus', vus: 2, duration: '2s', startTime: '2s', gracefulStop: '0s' },
    c4: { executor: 'constant-vus', vus: 4, duration: '2s', startTime: '4s', gracefulStop: '0s' },
  },
};
export default function () {
  http.get(__ENV.URL);
  if (__ITER % 10 === 9) { http.get(__ENV.BAD); }
  sleep(0.05);
}
JS
  K6_NO_USAGE_REPORT=true "$K6" run -q --summary-mode=disabled -e URL="$URL" -e BAD="$BAD" \
    --out json="$WORK/k6.json" --out csv="fileName=$WORK/k6.csv,timeFormat=rfc3339_nano" "$WORK/ramp.js"
  K6_NO_USAGE_REPORT=true "$K6" run -q --summary-mode=disabled -e URL="$URL" -e BAD="$BAD" --duration 1s --vus 1 \
    --out csv="$WORK/k6-unix.csv" "$WORK/ramp.js" || true
  # keep only what headroom reads, to stay small: http_req_duration and vus
  grep -E '"type":"Metric"|"metric":"(http_req_duration|vus)"' "$WORK/k6.json" > "$OUT/k6.json"
  head -1 "$WORK/k6.csv" > "$OUT/k6.csv"
  grep -E '^(http_req_duration|vus),' "$WORK/k6.csv" >> "$OUT/k6.csv"
  head -1 "$WORK/k6-unix.csv" > "$OUT/k6-unix-seconds.csv"
  grep -E '^http_req_duration,' "$WORK/k6-unix.csv" | head -50 >> "$OUT/k6-unix-seconds.csv"
fi

if command -v jmeter > /dev/null; then
  for fmt in csv xml; do
    cat > "$WORK/plan.jmx" <<JMX
<?xml version="1.0" encoding="UTF-8"?>
<jmeterTestPlan version="1.2" properties="2.8">
  <hashTree>
    <TestPlan guiclass="TestPlanGui" testclass="TestPlan" testname="ramp" enabled="true">
      <boolProp name="TestPlan.serialize_threadgroups">true</boolProp>
      <elementProp name="TestPlan.user_defined_variables" elementType="Arguments"><collectionProp name="Arguments.arguments"/></elementProp>
    </TestPlan>
    <hashTree>
JMX
    for n in 1 2 4; do
      cat >> "$WORK/plan.jmx" <<JMX
      <ThreadGroup guiclass="ThreadGroupGui" testclass="ThreadGroup" testname="step$n" enabled="true">
        <stringProp name="ThreadGroup.on_sample_error">continue</stringProp>
        <elementProp name="ThreadGroup.main_controller" elementType="LoopController">
          <boolProp name="LoopController.continue_forever">false</boolProp>
          <stringProp name="LoopController.loops">$((120 / n))</stringProp>
        </elementProp>
        <stringProp name="ThreadGroup.num_threads">$n</stringProp>
        <stringProp name="ThreadGroup.ramp_time">0</stringProp>
      </ThreadGroup>
      <hashTree>
        <HTTPSamplerProxy guiclass="HttpTestSampleGui" testclass="HTTPSamplerProxy" testname="index" enabled="true">
          <stringProp name="HTTPSampler.domain">127.0.0.1</stringProp>
          <stringProp name="HTTPSampler.port">$PORT</stringProp>
          <stringProp name="HTTPSampler.path">/</stringProp>
          <stringProp name="HTTPSampler.method">GET</stringProp>
          <elementProp name="HTTPsampler.Arguments" elementType="Arguments"><collectionProp name="Arguments.arguments"/></elementProp>
        </HTTPSamplerProxy>
        <hashTree/>
        <HTTPSamplerProxy guiclass="HttpTestSampleGui" testclass="HTTPSamplerProxy" testname="missing" enabled="true">
          <stringProp name="HTTPSampler.domain">127.0.0.1</stringProp>
          <stringProp name="HTTPSampler.port">$PORT</stringProp>
          <stringProp name="HTTPSampler.path">/missing</stringProp>
          <stringProp name="HTTPSampler.method">GET</stringProp>
          <elementProp name="HTTPsampler.Arguments" elementType="Arguments"><collectionProp name="Arguments.arguments"/></elementProp>
        </HTTPSamplerProxy>
        <hashTree/>
      </hashTree>
JMX
    done
    cat >> "$WORK/plan.jmx" <<JMX
    </hashTree>
  </hashTree>
</jmeterTestPlan>
JMX
    timeout 120 jmeter -n -t "$WORK/plan.jmx" -l "$OUT/jmeter.$fmt" -j "$WORK/jmeter.log" \
      -Jjmeter.save.saveservice.output_format=$fmt \
      -Jjmeter.save.saveservice.thread_counts=true \
      -Jjmeter.save.saveservice.timestamp_format=ms \
      -Jsampleresult.timestamp.start=true > "$WORK/jmeter-$fmt.out" || cat "$WORK/jmeter-$fmt.out" "$WORK/jmeter.log" >&2
  done
fi
ls -l "$OUT"

# Hand-made files (NOT made by the real tools): JMeter 2.13 from Debian fails
# to load any test plan here (xstream ForbiddenClassException), and Gatling is
# not installed.  These follow the documented formats (docs/formats.md) and
# are generated with a fixed seed, so they are reproducible.
python3 - "$OUT" <<'PY'
import random, sys
out = sys.argv[1]
rnd = random.Random(9)
t0 = 1795430000000  # ms since the epoch
# JMeter CSV JTL (default columns with thread_counts=true), steps of 1, 2, 4 threads
head = ("timeStamp,elapsed,label,responseCode,responseMessage,threadName,dataType,success,"
        "failureMessage,bytes,sentBytes,grpThreads,allThreads,URL,Latency,IdleTime,Connect")
rows, xml = [head], ['<?xml version="1.0" encoding="UTF-8"?>', '<testResults version="1.2">']
t = t0
for k, n in enumerate((1, 2, 4)):
    for i in range(60 * n):
        ts = t + i * 1000 // (60 * n) * 1 + rnd.randrange(0, 5)
        el = rnd.randrange(1, 20) + k
        ok = i % 15 != 14
        code, msg = ("200", "OK") if ok else ("404", "Not Found")
        if k == 1 and i == 7:
            code, msg, ok = ("Non HTTP response code: org.apache.http.conn.HttpHostConnectException",
                             "Non HTTP response message: Connection refused", False)
        thread = f"step{n} 1-{i % n + 1}"
        rows.append(f'{ts},{el},index,{code},"{msg}",{thread},text,{str(ok).lower()},,153,120,{n},{n},'
                    f'http://127.0.0.1:18765/,{el},0,0')
        xml.append(f'<httpSample t="{el}" it="0" lt="{el}" ct="0" ts="{ts}" s="{str(ok).lower()}" lb="index" '
                   f'rc="{code}" rm="{msg}" tn="{thread}" dt="text" by="153" sby="120" sc="1" ec="{0 if ok else 1}" '
                   f'ng="{n}" na="{n}"/>')
    # a transaction controller's parent sample: not a request of its own
    rows.append(f'{t + 500},{30},tx,200,"Number of samples in transaction : 2, number of failing samples : 0",'
                f'step{n} 1-1,,true,,306,240,{n},{n},null,30,0,0')
    xml.append(f'<sample t="30" it="0" lt="0" ct="0" ts="{t + 500}" s="true" lb="tx" rc="200" '
               f'rm="Number of samples in transaction : 2, number of failing samples : 0" tn="step{n} 1-1" dt="" '
               f'by="306" sby="240" sc="2" ec="0" ng="{n}" na="{n}">')
    for j in range(2):
        xml.append(f'  <httpSample t="{10 + j}" it="0" lt="9" ct="0" ts="{t + 500 + 15 * j}" s="true" lb="in-tx" '
                   f'rc="200" rm="OK" tn="step{n} 1-1" dt="text" by="153" sby="120" sc="1" ec="0" ng="{n}" na="{n}"/>')
    xml.append('</sample>')
    t += 1200
xml.append('</testResults>')
open(f"{out}/jmeter.csv", "w").write("\n".join(rows) + "\n")
open(f"{out}/jmeter.xml", "w").write("\n".join(xml) + "\n")
# Gatling 3.4-3.11 simulation.log: users start 1, then 2, then 4 at a time
lines = ["RUN\tdemo.RampSimulation\trampsimulation\t%d\t \t3.9.5" % t0]
t = t0 + 10
for k, n in enumerate((1, 2, 4)):
    for u in range(n):
        lines.append(f"USER\tramp\tSTART\t{t}")
    for i in range(50 * n):
        s = t + 5 + i * 900 // (50 * n)
        e = s + rnd.randrange(1, 25)
        ok = i % 20 != 19
        msg = " " if ok else "status.find.in(200,201,202,203,204,205,206,207,208,209,304), but actually found 404"
        lines.append(f"REQUEST\t\tindex\t{s}\t{e}\t{'OK' if ok else 'KO'}\t{msg}")
    t += 1000
    for u in range(n):
        lines.append(f"USER\tramp\tEND\t{t - 1}")
# two REQUEST records in the 3.0-3.3 layout (scenario and user id before the groups), in the last step
lines.insert(-4, f"REQUEST\tramp\t7\t\tlegacy\t{t - 600}\t{t - 590}\tOK\t ")
lines.insert(-4, f"REQUEST\tramp\t8\t\tlegacy\t{t - 500}\t{t - 480}\tKO\tj.n.ConnectException: Connection refused")
open(f"{out}/gatling-simulation.log", "w").write("\n".join(lines) + "\n")
PY
ls -l "$OUT"
