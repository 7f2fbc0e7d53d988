// Command testserver is a small HTTP server for testing load-test tooling.
//
// Every request to / costs a known, controllable amount of CPU (-work),
// sleep (-delay) and heap (-alloc), and returns a body of a known size
// (-body). Faults can be switched on: the process exits when a given
// number of requests are in flight at once (-crash-at-concurrency) or when
// a given number of requests have arrived (-crash-after-requests); from
// such a moment every request to / blocks and never answers
// (-hang-at-concurrency, -hang-after-requests); or from a given request on
// every request to / is answered 503 (-fail-after-requests), or a request
// that makes too many in flight is (-fail-at-concurrency, load shedding). It serves Prometheus metrics on /metrics, the Go
// profiler on /debug/pprof/ and a liveness check on /healthz.
//
// See README.md next to this file for the flags, the cost of one unit of
// -work and exit codes.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Exit codes.
const (
	exitOK       = 0 // stopped by SIGTERM or SIGINT
	exitError    = 1 // could not listen, serve or write the port file
	exitUsage    = 2 // bad flags
	exitCrash    = 3 // -crash-at-concurrency reached
	exitLifetime = 4 // -max-lifetime reached
)

const usageText = `Usage: testserver [flags]

A small HTTP test server with knobs of known size. Each request to / does
-work rounds of SHA-256 (CPU), sleeps -delay, allocates and touches -alloc
bytes of heap, and answers 200 with a body of -body bytes. The SHA-256
result is sent in the X-Work-Sum header so the work cannot be optimised away.

Endpoints:
  /               the work above (any method; other paths are 404)
  /api/...        the same work (endpoints of a multi-endpoint workload); with
                  -slow-prefix, the paths under it do -slow-work more rounds
  /metrics        Prometheus metrics (Go runtime, process, testserver_*)
  /debug/pprof/   net/http/pprof, e.g. /debug/pprof/profile?seconds=5
  /healthz        200 "ok"

When it listens it prints one line to stdout:
  listening on http://127.0.0.1:PORT

Exit codes: 0 after SIGTERM/SIGINT (graceful shutdown), 1 on a listen or
serve error, 2 on bad flags, 3 when -crash-at-concurrency or
-crash-after-requests is reached, 4 when -max-lifetime is reached.

GOMAXPROCS is read from the environment as usual; by default it is the
number of CPUs the process may run on (e.g. under taskset).

Flags:
`

const usageExamples = `
Examples:
  testserver                                     # free port on 127.0.0.1, 1 KiB body, no work
  testserver -listen 127.0.0.1:8080 -work 7000   # about 0.5 ms of CPU per request (see README.md)
  testserver -delay 20ms -body 100               # 20 ms latency, almost no CPU
  testserver -alloc 1048576                      # 1 MiB of garbage per request
  testserver -alloc 262144 -pool                 # the same buffer reused through a sync.Pool
  testserver -regexp-per-request                 # compiles its route regexp on every request
  testserver -work 3000 -slow-prefix /api/v2/ -slow-work 3000   # /api/v2/* twice the CPU of the rest
  testserver -crash-at-concurrency 8             # exits with 3 when 8 requests are in flight
  testserver -hang-at-concurrency 8              # stops answering / when 8 requests are in flight
  testserver -crash-after-requests 400           # answers 400 requests to /, exits with 3 at the 401st
  testserver -hang-after-requests 400            # the 401st request to / and all later ones never answer
  testserver -fail-after-requests 400            # the 401st request to / and all later ones get 503
  testserver -fail-at-concurrency 6              # 503 to a request that makes 6 or more in flight
  GOMAXPROCS=1 taskset -c 1 testserver -port-file /tmp/port -work 4000
`

type config struct {
	listen          string
	portFile        string
	work            int
	delay           time.Duration
	alloc           int
	body            int
	crashAt         int64
	hangAt          int64
	crashAfter      int64
	hangAfter       int64
	failAfter       int64
	failAt          int64
	maxLifetime     time.Duration
	shutdownTimeout time.Duration
	regexpPerReq    bool
	pool            bool
	slowPrefix      string
	slowWork        int
}

// routePattern is matched against every request's User-Agent and path: a
// pattern of realistic size, so that compiling it costs tens of microseconds.
const routePattern = `^(?i)(?:hey|vegeta|oha|curl|go-http-client|python-urllib|mozilla)/[0-9]+(?:\.[0-9]+){0,3}(?: \([^)]*\))?(?: [a-z]+/[0-9.]+)*\|/(?:api/v[0-9]+/)?(?:[a-z0-9_-]+/?)*$`

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("testserver", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.listen, "listen", "127.0.0.1:0", "`address` to listen on (port 0: a free port)")
	fs.StringVar(&c.portFile, "port-file", "", "write the port number to this `file` (atomically) once listening")
	fs.IntVar(&c.work, "work", 0, "CPU work per request: `N` chained SHA-256 rounds over 32 bytes")
	fs.DurationVar(&c.delay, "delay", 0, "sleep per request (latency without CPU), a Go `duration`")
	fs.IntVar(&c.alloc, "alloc", 0, "heap `bytes` allocated and touched per request")
	fs.IntVar(&c.body, "body", 1024, "response body size in `bytes`")
	fs.Int64Var(&c.crashAt, "crash-at-concurrency", 0, "exit at once with code 3 when `C` requests to / are in flight (0: off)")
	fs.Int64Var(&c.hangAt, "hang-at-concurrency", 0, "from the moment `C` requests to / are in flight, no request to / ever answers (0: off)")
	fs.Int64Var(&c.crashAfter, "crash-after-requests", 0, "exit at once with code 3 when request `N`+1 to / arrives (after N arrived; 0: off)")
	fs.Int64Var(&c.hangAfter, "hang-after-requests", 0, "from request `N`+1 to / on, no request to / ever answers, those in flight included (0: off)")
	fs.Int64Var(&c.failAfter, "fail-after-requests", 0, "answer request `N`+1 to / and every later one with 503 Service Unavailable (0: off)")
	fs.Int64Var(&c.failAt, "fail-at-concurrency", 0, "answer 503 Service Unavailable at once to a request to / that makes `C` or more in flight: load shedding (0: off)")
	fs.DurationVar(&c.maxLifetime, "max-lifetime", 30*time.Minute, "exit by itself (code 4) after this `duration` (0: never)")
	fs.BoolVar(&c.regexpPerReq, "regexp-per-request", false, "compile the route regexp on every request (a known regression) instead of once")
	fs.StringVar(&c.slowPrefix, "slow-prefix", "", "requests whose path starts with this `prefix` (e.g. /api/v2/) do -slow-work more rounds: one endpoint made slower")
	fs.IntVar(&c.slowWork, "slow-work", 0, "extra SHA-256 `rounds` of a -slow-prefix request")
	fs.BoolVar(&c.pool, "pool", false, "take the -alloc buffer from a sync.Pool instead of allocating a fresh one per request")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 10*time.Second, "on SIGTERM, wait this `duration` for requests in flight, then close connections")
	fs.Usage = func() {
		fmt.Fprint(stderr, usageText)
		fs.PrintDefaults()
		fmt.Fprint(stderr, usageExamples)
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return c, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	switch {
	case c.work < 0, c.alloc < 0, c.body < 0, c.crashAt < 0, c.hangAt < 0, c.slowWork < 0:
		return c, errors.New("-work, -alloc, -body, -crash-at-concurrency, -hang-at-concurrency and -slow-work must be >= 0")
	case c.crashAfter < 0, c.hangAfter < 0, c.failAfter < 0, c.failAt < 0:
		return c, errors.New("-crash-after-requests, -hang-after-requests, -fail-after-requests and -fail-at-concurrency must be >= 0")
	case c.delay < 0, c.maxLifetime < 0, c.shutdownTimeout < 0:
		return c, errors.New("-delay, -max-lifetime and -shutdown-timeout must be >= 0")
	}
	return c, nil
}

// work does n chained SHA-256 rounds over 32 bytes (one compression each).
func work(n int) [32]byte {
	var sum [32]byte
	binary.LittleEndian.PutUint64(sum[:], 0x68656164726f6f6d) // "headroom"
	for i := 0; i < n; i++ {
		sum = sha256.Sum256(sum[:])
	}
	return sum
}

// allocate allocates n bytes on the heap and writes one byte in every 64
// (every cache line, so every page is touched), returning a checksum.
func allocate(n int) byte {
	if n == 0 {
		return 0
	}
	return fillBuffer(make([]byte, n))
}

// fillBuffer writes one byte in every 64 of b (every cache line, so every
// page is touched) and returns a checksum; b is not cleared first.
func fillBuffer(b []byte) byte {
	var x byte
	for i := 0; i < len(b); i += 64 {
		b[i] = byte(i >> 6)
		x ^= b[i]
	}
	return x ^ b[len(b)-1]
}

// matchRoute matches the request against routePattern, compiled now when
// perRequest (the regression) or else the copy compiled once at start.
func (s *server) matchRoute(r *http.Request, perRequest bool) bool {
	re := s.route
	if perRequest {
		re = regexp.MustCompile(routePattern)
	}
	return re.MatchString(r.UserAgent() + "|" + r.URL.Path)
}

// buffer does the -alloc work: a fresh slice per request, or one from the
// pool (-pool) that goes back after use.
func (s *server) buffer() byte {
	n := s.cfg.alloc
	if n == 0 {
		return 0
	}
	if !s.cfg.pool {
		return allocate(n)
	}
	bp := s.bufs.Get().(*[]byte)
	x := fillBuffer(*bp)
	s.bufs.Put(bp)
	return x
}

type server struct {
	route    *regexp.Regexp
	bufs     sync.Pool
	cfg      config
	body     []byte
	inFlight atomic.Int64
	arrived  atomic.Int64 // requests to / that arrived (the -*-after-requests faults count these)
	hung     atomic.Bool
	stopping chan struct{} // closed when shutdown starts; releases hung requests

	requests prometheus.Counter
	handler  prometheus.Histogram
}

func newServer(cfg config, reg *prometheus.Registry) *server {
	s := &server{cfg: cfg, body: make([]byte, cfg.body), stopping: make(chan struct{})}
	s.route = regexp.MustCompile(routePattern)
	s.bufs.New = func() any { b := make([]byte, cfg.alloc); return &b }
	for i := range s.body {
		s.body[i] = 'a' + byte(i%26)
	}
	s.requests = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "testserver_requests_total",
		Help: "Requests to / answered 200 (hung, crashed and -fail-after-requests 503 requests are not counted).",
	})
	s.handler = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "testserver_handler_seconds",
		Help:    "Time spent in the / handler for answered requests (work, delay, alloc and writing the body).",
		Buckets: prometheus.ExponentialBuckets(25e-6, 2, 20), // 25us .. 13s
	})
	inFlight := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "testserver_in_flight_requests",
		Help: "Requests to / in flight now (including hung ones).",
	}, func() float64 { return float64(s.inFlight.Load()) })
	hung := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "testserver_hung",
		Help: "1 once -hang-at-concurrency or -hang-after-requests was reached (requests to / no longer answer), else 0.",
	}, func() float64 {
		if s.hung.Load() {
			return 1
		}
		return 0
	})
	knobs := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "testserver_config_info",
		Help: "The knobs this server was started with, as labels; value 1.",
		ConstLabels: prometheus.Labels{
			"work":                 strconv.Itoa(cfg.work),
			"delay":                cfg.delay.String(),
			"alloc":                strconv.Itoa(cfg.alloc),
			"body":                 strconv.Itoa(cfg.body),
			"crash_at_concurrency": strconv.FormatInt(cfg.crashAt, 10),
			"hang_at_concurrency":  strconv.FormatInt(cfg.hangAt, 10),
			"crash_after_requests": strconv.FormatInt(cfg.crashAfter, 10),
			"hang_after_requests":  strconv.FormatInt(cfg.hangAfter, 10),
			"fail_after_requests":  strconv.FormatInt(cfg.failAfter, 10),
			"fail_at_concurrency":  strconv.FormatInt(cfg.failAt, 10),
			"regexp_per_request":   strconv.FormatBool(cfg.regexpPerReq),
			"pool":                 strconv.FormatBool(cfg.pool),
		},
	})
	knobs.Set(1)
	reg.MustRegister(s.requests, s.handler, inFlight, hung, knobs)
	return s
}

// hang blocks a request that must never answer. It returns only when the
// client goes away or the server shuts down, and then aborts the
// connection without writing a response.
func (s *server) hang(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-s.stopping:
	}
	panic(http.ErrAbortHandler)
}

func (s *server) serveRoot(w http.ResponseWriter, r *http.Request) {
	n := s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	k := s.arrived.Add(1)
	if s.cfg.crashAt > 0 && n >= s.cfg.crashAt {
		fmt.Fprintf(os.Stderr, "testserver: %d requests in flight, -crash-at-concurrency %d: exiting with code %d\n", n, s.cfg.crashAt, exitCrash)
		os.Exit(exitCrash)
	}
	if s.cfg.crashAfter > 0 && k > s.cfg.crashAfter {
		fmt.Fprintf(os.Stderr, "testserver: request %d arrived, -crash-after-requests %d: exiting with code %d\n", k, s.cfg.crashAfter, exitCrash)
		os.Exit(exitCrash)
	}
	if s.cfg.hangAt > 0 && n >= s.cfg.hangAt && !s.hung.Swap(true) {
		fmt.Fprintf(os.Stderr, "testserver: %d requests in flight, -hang-at-concurrency %d: requests to / no longer answer\n", n, s.cfg.hangAt)
	}
	if s.cfg.hangAfter > 0 && k > s.cfg.hangAfter && !s.hung.Swap(true) {
		fmt.Fprintf(os.Stderr, "testserver: request %d arrived, -hang-after-requests %d: requests to / no longer answer\n", k, s.cfg.hangAfter)
	}
	if s.hung.Load() {
		s.hang(r)
	}
	if s.cfg.failAfter > 0 && k > s.cfg.failAfter {
		http.Error(w, "testserver: -fail-after-requests reached", http.StatusServiceUnavailable)
		return
	}
	if s.cfg.failAt > 0 && n >= s.cfg.failAt {
		http.Error(w, "testserver: -fail-at-concurrency: too many requests in flight", http.StatusServiceUnavailable)
		return
	}
	start := time.Now()
	rounds := s.cfg.work
	if s.cfg.slowPrefix != "" && strings.HasPrefix(r.URL.Path, s.cfg.slowPrefix) {
		rounds += s.cfg.slowWork
	}
	sum := work(rounds)
	if s.cfg.delay > 0 {
		time.Sleep(s.cfg.delay)
	}
	check := s.buffer()
	routed := s.matchRoute(r, s.cfg.regexpPerReq)
	if s.hung.Load() { // the hang began while this request was working
		s.hang(r)
	}
	h := w.Header()
	h.Set("Content-Type", "text/plain")
	h.Set("Content-Length", strconv.Itoa(len(s.body)))
	h.Set("X-Work-Sum", hex.EncodeToString(sum[:]))
	h.Set("X-Alloc-Check", strconv.Itoa(int(check)))
	h.Set("X-Route-Match", strconv.FormatBool(routed))
	if r.Method != http.MethodHead {
		_, _ = w.Write(s.body)
	}
	s.handler.Observe(time.Since(start).Seconds())
	s.requests.Inc()
}

func (s *server) routes(reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/{$}", s.serveRoot)
	mux.HandleFunc("/api/", s.serveRoot) // endpoints of a multi-endpoint workload: the same work
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// writePortFile writes port to path atomically (a temporary file in the
// same folder, then rename).
func writePortFile(path string, port int) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(tmp, "%d\n", port)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
	}
	return err
}

func run(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintln(stderr, "testserver:", err)
		return exitUsage
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	s := newServer(cfg, reg)

	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		fmt.Fprintln(stderr, "testserver:", err)
		return exitError
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if cfg.portFile != "" {
		if err := writePortFile(cfg.portFile, port); err != nil {
			fmt.Fprintln(stderr, "testserver: port file:", err)
			return exitError
		}
	}
	// os.Stdout is unbuffered: the line is written (flushed) at once.
	fmt.Fprintf(stdout, "listening on http://%s\n", ln.Addr())

	srv := &http.Server{Handler: s.routes(reg), ReadHeaderTimeout: 10 * time.Second}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	var lifetime <-chan time.Time
	if cfg.maxLifetime > 0 {
		lifetime = time.After(cfg.maxLifetime)
	}

	code := exitOK
	select {
	case err := <-serveErr:
		fmt.Fprintln(stderr, "testserver: serve:", err)
		return exitError
	case got := <-sig:
		fmt.Fprintf(stderr, "testserver: %v: shutting down\n", got)
	case <-lifetime:
		fmt.Fprintf(stderr, "testserver: -max-lifetime %v reached: shutting down, exit code %d\n", cfg.maxLifetime, exitLifetime)
		code = exitLifetime
	}
	close(s.stopping)
	ctx, cancel := context.WithTimeout(context.Background(), cfg.shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		fmt.Fprintf(stderr, "testserver: requests still in flight after %v, closing connections: %v\n", cfg.shutdownTimeout, err)
		_ = srv.Close()
	}
	return code
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
