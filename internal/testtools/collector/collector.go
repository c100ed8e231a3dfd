// Package collector runs a real OpenTelemetry Collector for the telemetry tests: the one internal/testtools/otelcol
// builds (the OTLP receiver and the file exporter), built once into a cache keyed by that module's go.sum and
// source, started on loopback with a configuration that writes everything it receives to a file, and the file read
// back as OTLP JSON.
package collector

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kewplan/kewplan/internal/testtools/testkit"
)

// Binary builds the collector, or returns the one already built for the same module (go.sum and main.go): under
// $KEWPLAN_OTELCOL_CACHE, default ~/.cache/kewplan-otelcol/<hash>/otelcol. The first build takes minutes (the
// collector's modules come from the module proxy); it runs niced and under a lock, so that test binaries
// running at once build it once.
func Binary(t testing.TB) string {
	t.Helper()
	src, err := moduleDir()
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	for _, name := range []string{"go.mod", "go.sum", "main.go"} {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(h, "%s %d\n", name, len(b))
		h.Write(b)
	}
	root := os.Getenv("KEWPLAN_OTELCOL_CACHE")
	if root == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			t.Fatal(err)
		}
		root = filepath.Join(home, ".cache", "kewplan-otelcol")
	}
	dir := filepath.Join(root, hex.EncodeToString(h.Sum(nil))[:16])
	bin := filepath.Join(dir, "otelcol")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if _, err := os.Stat(bin); err == nil {
		return bin // built by another test binary while this one waited
	}
	start := time.Now()
	tmp := bin + ".tmp"
	cmd := exec.Command("nice", "-n", "10", "go", "build", "-trimpath", "-o", tmp, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the test collector (%s): %v\n%s", src, err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		t.Fatal(err)
	}
	t.Logf("built the test collector in %s: %s", time.Since(start).Round(time.Second), bin)
	return bin
}

// moduleDir is internal/testtools/otelcol of this checkout, found from the main module's go.mod.
func moduleDir() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("not inside kewplan's module (go env GOMOD is %q)", gomod)
	}
	return filepath.Join(filepath.Dir(gomod), "internal", "testtools", "otelcol"), nil
}

// Collector is a running collector: where it listens and the file its exporter writes.
type Collector struct {
	HTTPEndpoint string // http://127.0.0.1:PORT, for OTEL_EXPORTER_OTLP_ENDPOINT with http/protobuf
	GRPCEndpoint string // http://127.0.0.1:PORT, for grpc
	File         string
	cmd          *exec.Cmd
	log          *syncBuffer
	exited       chan struct{}
	stopOnce     sync.Once
}

const configTemplate = `receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %[1]s
      http:
        endpoint: %[2]s
exporters:
  file:
    path: %[3]s
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [file]
    metrics:
      receivers: [otlp]
      exporters: [file]
`

// Start builds (or finds) the collector and runs it on two free loopback ports, stopped when the test ends. It
// returns once the collector said it is ready.
func Start(t testing.TB) *Collector {
	t.Helper()
	bin := Binary(t)
	dir := t.TempDir()
	grpcAddr, httpAddr := freePort(t), freePort(t)
	c := &Collector{
		HTTPEndpoint: "http://" + httpAddr, GRPCEndpoint: "http://" + grpcAddr,
		File: filepath.Join(dir, "received.json"), log: &syncBuffer{}, exited: make(chan struct{}),
	}
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(configTemplate, grpcAddr, httpAddr, c.File)), 0o644); err != nil {
		t.Fatal(err)
	}
	c.cmd = exec.Command(bin, "--config", "file:"+cfg)
	stderr, err := c.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.cmd.Stdout = c.log
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		signalled := false
		for sc.Scan() {
			c.log.Write(append(sc.Bytes(), '\n'))
			if !signalled && strings.Contains(sc.Text(), "Everything is ready") {
				signalled = true
				close(ready)
			}
		}
		_ = c.cmd.Wait()
		close(c.exited)
	}()
	t.Cleanup(c.Stop)
	select {
	case <-ready:
	case <-c.exited:
		t.Fatalf("the test collector exited before it was ready:\n%s", c.log.String())
	case <-time.After(time.Minute):
		t.Fatalf("the test collector was not ready within a minute:\n%s", c.log.String())
	}
	return c
}

// Stop stops the collector (SIGTERM: it flushes its exporter) and waits for it to exit.
func (c *Collector) Stop() {
	c.stopOnce.Do(func() {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.exited:
		case <-time.After(30 * time.Second):
			_ = c.cmd.Process.Kill()
			<-c.exited
		}
	})
}

// Log is what the collector printed.
func (c *Collector) Log() string { return c.log.String() }

// Received stops the collector and returns everything it wrote: the raw bytes and the parsed batches.
func (c *Collector) Received(t testing.TB) ([]byte, *Data) {
	t.Helper()
	c.Stop()
	raw, err := os.ReadFile(c.File)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	d := &Data{}
	dec := json.NewDecoder(bytes.NewReader(raw))
	for {
		var line batch
		if err := dec.Decode(&line); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("collector file %s: %v", c.File, err)
		}
		for _, rs := range line.ResourceSpans {
			res := attrMap(rs.Resource.Attributes)
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					d.Spans = append(d.Spans, Span{
						TraceID: s.TraceID, SpanID: s.SpanID, ParentSpanID: s.ParentSpanID, Name: s.Name, Kind: s.Kind,
						Start: s.StartTimeUnixNano, End: s.EndTimeUnixNano, Attrs: attrMap(s.Attributes), Resource: res,
						Events: events(s.Events), Status: s.Status.Code,
					})
				}
			}
		}
		for _, rm := range line.ResourceMetrics {
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					for _, p := range append(append(m.Sum.DataPoints, m.Gauge.DataPoints...), m.Histogram.DataPoints...) {
						d.Points = append(d.Points, Point{Metric: m.Name, Unit: m.Unit, Attrs: attrMap(p.Attributes), Value: p.value(), Count: p.count()})
					}
				}
			}
		}
	}
	return raw, d
}

// Data is what the collector received: every span, every metric data point.
type Data struct {
	Spans  []Span
	Points []Point
}

// Span is one received span; attribute values are their JSON text (strings unquoted).
type Span struct {
	TraceID, SpanID, ParentSpanID, Name string
	Kind                                int
	Start, End                          string
	Attrs, Resource                     map[string]string
	Events                              []Event
	Status                              int // 0 unset, 1 ok, 2 error
}

// Event is a span's event.
type Event struct {
	Name  string
	Attrs map[string]string
}

// Point is one metric data point: a sum's or gauge's value, a histogram's sum and count.
type Point struct {
	Metric, Unit string
	Attrs        map[string]string
	Value        float64
	Count        uint64
}

type batch struct {
	ResourceSpans []struct {
		Resource   struct{ Attributes []kv } `json:"resource"`
		ScopeSpans []struct {
			Spans []struct {
				TraceID           string `json:"traceId"`
				SpanID            string `json:"spanId"`
				ParentSpanID      string `json:"parentSpanId"`
				Name              string `json:"name"`
				Kind              int    `json:"kind"`
				StartTimeUnixNano string `json:"startTimeUnixNano"`
				EndTimeUnixNano   string `json:"endTimeUnixNano"`
				Attributes        []kv   `json:"attributes"`
				Events            []struct {
					Name       string `json:"name"`
					Attributes []kv   `json:"attributes"`
				} `json:"events"`
				Status struct {
					Code int `json:"code"`
				} `json:"status"`
			} `json:"spans"`
		} `json:"scopeSpans"`
	} `json:"resourceSpans"`
	ResourceMetrics []struct {
		ScopeMetrics []struct {
			Metrics []struct {
				Name      string                    `json:"name"`
				Unit      string                    `json:"unit"`
				Sum       struct{ DataPoints []dp } `json:"sum"`
				Gauge     struct{ DataPoints []dp } `json:"gauge"`
				Histogram struct{ DataPoints []dp } `json:"histogram"`
			} `json:"metrics"`
		} `json:"scopeMetrics"`
	} `json:"resourceMetrics"`
}

type kv struct {
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
}

type dp struct {
	Attributes []kv            `json:"attributes"`
	AsInt      json.RawMessage `json:"asInt"`
	AsDouble   *float64        `json:"asDouble"`
	Sum        *float64        `json:"sum"`
	Count      json.RawMessage `json:"count"`
}

func (p dp) value() float64 {
	switch {
	case p.AsDouble != nil:
		return *p.AsDouble
	case p.Sum != nil:
		return *p.Sum
	case len(p.AsInt) > 0:
		var f float64
		_ = json.Unmarshal(bytes.Trim(p.AsInt, `"`), &f)
		return f
	}
	return 0
}

func (p dp) count() uint64 {
	var n uint64
	_ = json.Unmarshal(bytes.Trim(p.Count, `"`), &n)
	return n
}

// attrMap flattens OTLP JSON attributes: a string value as itself, anything else as its JSON (ints as their digits).
func attrMap(kvs []kv) map[string]string {
	m := map[string]string{}
	for _, a := range kvs {
		var v map[string]json.RawMessage
		_ = json.Unmarshal(a.Value, &v)
		for typ, raw := range v {
			switch typ {
			case "stringValue":
				var s string
				_ = json.Unmarshal(raw, &s)
				m[a.Key] = s
			case "intValue":
				m[a.Key] = strings.Trim(string(raw), `"`)
			default:
				m[a.Key] = string(raw)
			}
		}
	}
	return m
}

func events(evs []struct {
	Name       string `json:"name"`
	Attributes []kv   `json:"attributes"`
}) []Event {
	var out []Event
	for _, e := range evs {
		out = append(out, Event{Name: e.Name, Attrs: attrMap(e.Attributes)})
	}
	return out
}

// freePort is a loopback address nothing listens on now.
func freePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// ClosedEndpoint is an http:// loopback address where nothing listens: a collector that is down.
func ClosedEndpoint(t testing.TB) string { return "http://" + freePort(t) }

// Need skips the test (a failure under CI) when the collector cannot be built here: no go command.
func Need(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		testkit.Need(t, "it builds the test OpenTelemetry collector with the go command, which is not on PATH")
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
