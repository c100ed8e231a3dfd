package egress

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The proxy in a process of its own, as in production (its own container). The benchmarks that measure the
// proxy's CPU time, or its latency while the agents and the stand-in are busy, run it there: the process's CPU is
// then the proxy's alone, and the proxy's goroutines are scheduled by a runtime of their own rather than
// interleaved with the stand-in's and the agents' in one.

// proxyProcEnv names, in the test binary's environment, a JSON file holding a proxyProcSpec: the binary then runs
// that proxy instead of its tests (TestMain).
const proxyProcEnv = "KEWPLAN_TEST_PROXY_PROC"

// proxyProfileEnv, set for a benchmark run, names a directory in which every proxy process writes the CPU profile
// of its whole life, as <name>.pprof (go tool pprof <test binary> <file>).
const proxyProfileEnv = "KEWPLAN_TEST_PROXY_PROFILE"

// proxyProcSpec is what a proxy process serves.
type proxyProcSpec struct {
	Config *Config `json:"config"`
	// NoMeter starts the proxy with the broker's meter off (its ModifyResponse does nothing): the baseline of the
	// metering benchmarks.
	NoMeter bool `json:"no_meter,omitempty"`
	// Decisions is the file the proxy writes its decision lines to.
	Decisions string `json:"decisions"`
	// Stamps has the proxy note when each of the stand-in's events reached it (upstreamStamps), for the "stamps"
	// command.
	Stamps bool `json:"stamps,omitempty"`
	// CPUProfile is where the process writes its CPU profile; none when empty.
	CPUProfile string `json:"cpu_profile,omitempty"`
}

func TestMain(m *testing.M) {
	if path := os.Getenv(proxyProcEnv); path != "" {
		if err := runProxyProc(path, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "proxy process:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runProxyProc is a proxy process: it serves the spec at path on loopback (every name resolving to 127.0.0.1, as
// benchProxy's), writes its address as the first line of stdout, and answers each line on stdin: "cpu" with its
// CPU time so far in nanoseconds, "meter on" and "meter off" (the broker's meter for the answers from then on)
// with "ok", "stamps" with the events' arrivals noted since it was last asked, as a JSON object (with
// spec.Stamps). It returns when stdin closes.
func runProxyProc(path string, stdin io.Reader, stdout io.Writer) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var spec proxyProcSpec
	if err := json.Unmarshal(data, &spec); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	spec.Config.Listen = "127.0.0.1:0"
	decisions, err := os.Create(spec.Decisions)
	if err != nil {
		return err
	}
	defer decisions.Close()
	opts := loopbackOptions()
	stamps := newUpstreamStamps()
	if spec.Stamps {
		opts.Dial = stamps.dial
	}
	s, err := NewServer(spec.Config, decisions, opts)
	if err != nil {
		return err
	}
	if spec.Stamps {
		stamps.wrap(s)
	}
	// The meter is switched by a command between answers: a flag its ModifyResponse reads once an answer.
	var metering atomic.Bool
	metering.Store(!spec.NoMeter)
	s.broker.unmetered.Store(spec.NoMeter) // no reservation and no settlement either: the baseline proxies plainly
	meter := s.broker.proxy.ModifyResponse
	s.broker.proxy.ModifyResponse = func(res *http.Response) error {
		if metering.Load() {
			return meter(res)
		}
		return nil
	}
	if spec.CPUProfile != "" {
		f, err := os.Create(spec.CPUProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	l, err := net.Listen("tcp", spec.Config.Listen)
	if err != nil {
		return err
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(l) }()
	fmt.Fprintln(stdout, l.Addr())
	lines := bufio.NewScanner(stdin)
	for lines.Scan() {
		switch lines.Text() {
		case "cpu":
			fmt.Fprintln(stdout, cpuTime().Nanoseconds())
		case "stamps":
			data, err := json.Marshal(stamps.take())
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "%s\n", data)
		case "meter on", "meter off":
			metering.Store(lines.Text() == "meter on")
			s.broker.unmetered.Store(lines.Text() != "meter on")
			fmt.Fprintln(stdout, "ok")
		default:
			return fmt.Errorf("unknown command %q", lines.Text())
		}
	}
	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	default:
	}
	return lines.Err()
}

// proxyProc is the parent's end of a proxy process.
type proxyProc struct {
	// addr is where the proxy listens ("127.0.0.1:port").
	addr          string
	decisionsPath string
	cmd           *exec.Cmd
	askMu         sync.Mutex // one command and its answer at a time
	stdin         io.WriteCloser
	stdout        *bufio.Reader
	stderr        bytes.Buffer // read once the process has ended

	stopOnce sync.Once
	stopErr  error
}

// startProxyProc starts the test binary itself as a proxy serving cfg (without its meter when noMeter) and stops
// it when the benchmark ends. name names its files: the spec and, under proxyProfileEnv, its CPU profile.
func startProxyProc(tb testing.TB, name string, cfg *Config, noMeter bool) *proxyProc {
	tb.Helper()
	return startProxyProcSpec(tb, name, proxyProcSpec{Config: cfg, NoMeter: noMeter})
}

// startProxyProcSpec is startProxyProc with the whole spec (its Decisions and CPUProfile are set here).
func startProxyProcSpec(tb testing.TB, name string, spec proxyProcSpec) *proxyProc {
	tb.Helper()
	dir := tb.TempDir()
	spec.Decisions = filepath.Join(dir, name+".decisions")
	if profiles := os.Getenv(proxyProfileEnv); profiles != "" {
		spec.CPUProfile = filepath.Join(profiles, name+".pprof")
	}
	data, err := json.Marshal(spec)
	if err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(dir, name+".json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		tb.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	p := &proxyProc{cmd: exec.Command(self, "-test.run=^$"), decisionsPath: spec.Decisions}
	p.cmd.Env = append(os.Environ(), proxyProcEnv+"="+path)
	p.cmd.Stderr = &p.stderr
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		tb.Fatal(err)
	}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	p.stdout = bufio.NewReader(out)
	if err := p.cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := p.stop(); err != nil {
			tb.Error(err)
		}
	})
	line, err := p.stdout.ReadString('\n')
	if err != nil {
		tb.Fatalf("proxy process %s did not start: %v", name, err) // the cleanup reports its stderr
	}
	p.addr = strings.TrimSpace(line)
	return p
}

// ask sends the proxy process a command and returns its answer.
func (p *proxyProc) ask(tb testing.TB, command string) string {
	tb.Helper()
	answer, err := p.tryAsk(command)
	if err != nil {
		tb.Fatal(err)
	}
	return answer
}

// tryAsk is ask for a goroutine other than the test's: it returns the error.
func (p *proxyProc) tryAsk(command string) (string, error) {
	p.askMu.Lock()
	defer p.askMu.Unlock()
	if _, err := io.WriteString(p.stdin, command+"\n"); err != nil {
		return "", fmt.Errorf("proxy process, %s: %w", command, err)
	}
	line, err := p.stdout.ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("proxy process, %s: %w", command, err)
	}
	return strings.TrimSpace(line), nil
}

// cpu is the proxy process's CPU time so far, user and system.
func (p *proxyProc) cpu(tb testing.TB) time.Duration {
	tb.Helper()
	answer := p.ask(tb, "cpu")
	ns, err := strconv.ParseInt(answer, 10, 64)
	if err != nil {
		tb.Fatalf("the proxy process's CPU time %q: %v", answer, err)
	}
	return time.Duration(ns)
}

// setMeter switches the broker's meter on or off for the answers from now on.
func (p *proxyProc) setMeter(tb testing.TB, on bool) {
	tb.Helper()
	if answer := p.ask(tb, map[bool]string{true: "meter on", false: "meter off"}[on]); answer != "ok" {
		tb.Fatalf("proxy process, meter %v: answered %q", on, answer)
	}
}

// arrivals are the stand-in's events' arrivals the proxy has noted since it was last asked (spec.Stamps).
func (p *proxyProc) arrivals() (map[int64]arrival, error) {
	answer, err := p.tryAsk("stamps")
	if err != nil {
		return nil, err
	}
	var at map[int64]arrival
	if err := json.Unmarshal([]byte(answer), &at); err != nil {
		return nil, fmt.Errorf("the proxy process's arrivals %q: %w", answer, err)
	}
	return at, nil
}

// decisions are the decision lines the proxy has written so far.
func (p *proxyProc) decisions(tb testing.TB) []Decision {
	tb.Helper()
	data, err := os.ReadFile(p.decisionsPath)
	if err != nil {
		tb.Fatal(err)
	}
	var ds []Decision
	for line := range strings.Lines(string(data)) {
		var d Decision
		if err := json.Unmarshal([]byte(line), &d); err != nil {
			tb.Fatalf("decision line %q: %v", line, err)
		}
		ds = append(ds, d)
	}
	return ds
}

// stop closes the process's stdin, which ends it, and waits for it; a process still there after 10 s is killed
// (that one, by its pid).
func (p *proxyProc) stop() error {
	p.stopOnce.Do(func() {
		_ = p.stdin.Close()
		waited := make(chan error, 1)
		go func() { waited <- p.cmd.Wait() }()
		select {
		case p.stopErr = <-waited:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-waited
			p.stopErr = fmt.Errorf("did not end within 10 s of its stdin closing: killed")
		}
		if p.stopErr != nil {
			p.stopErr = fmt.Errorf("proxy process: %w\n%s", p.stopErr, p.stderr.String())
		}
	})
	return p.stopErr
}
