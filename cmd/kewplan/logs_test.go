package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/executor/statedir"
)

// TestLogsLatestAfterApply: after an apply, `kewplan logs latest` shows each node's transcript in the order they
// ran, with a header from the ledger; --json is one event per line with a kind; --attempt 1 is the node's run and
// any other attempt is refused; a named node shows alone.
func TestLogsLatestAfterApply(t *testing.T) {
	eng := engineOrSkip(t)
	dir, prefix := applyFixture(t, eng, `
# In process, the running executable is this test binary, which cannot be the egress proxy.
runner "claude-code" {
  endpoints = []
}
node "%[1]sa" {
  runner = "claude-code"
  role   = "reviewer"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  prompt = "mode=verdict\ntokens=5,6,7,8\ncost=0.25"
}
node "%[1]sb" {
  runner = "claude-code"
  role   = "reviewer"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  ref    = node.%[1]sa.commit
  prompt = "mode=fail"
}
`)
	t.Setenv("ANTHROPIC_API_KEY", "sk-test-logs-latest")
	state := filepath.Join(dir, "state")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"apply", dir, "--auto-approve", "--json", "--state-dir", state}, strings.NewReader(""), &stdout, &stderr); code != 1 {
		t.Fatalf("apply: exit %d, want 1 (b fails)\n%s\n%s", code, stdout.String(), stderr.String())
	}

	logs := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if code := run(append([]string{"logs", "--state-dir", state}, args...), nil, &out, &errb); code != 0 {
			t.Fatalf("logs %v: exit %d: %s", args, code, errb.String())
		}
		return out.String()
	}
	human := logs("latest")
	for _, want := range []string{
		"── " + prefix + "a · claude-code · claude-sonnet-4-5 · image kewplan-test/fakeagent:",
		"approved", "  done\n", "■ done: ", "── totals: 5 in · 6 out · 7 cache read · 8 cache write · $0.25",
		"── " + prefix + "b · claude-code", "failed", "── totals (failed):", "exit 3", "fakeagent: failing as asked",
	} {
		if !strings.Contains(human, want) {
			t.Errorf("logs latest lacks %q:\n%s", want, human)
		}
	}
	if strings.Index(human, "── "+prefix+"a") > strings.Index(human, "── "+prefix+"b") {
		t.Errorf("nodes out of order:\n%s", human)
	}

	js := logs("latest", "--json")
	sc := bufio.NewScanner(strings.NewReader(js))
	kinds := map[string]int{}
	for sc.Scan() {
		var ev struct {
			Node string `json:"node"`
			Kind string `json:"kind"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil || ev.Kind == "" || ev.Node == "" {
			t.Fatalf("--json line %q: %v", sc.Text(), err)
		}
		kinds[ev.Node+" "+ev.Kind]++
	}
	for _, want := range []string{prefix + "a text", prefix + "a result", prefix + "b stderr", prefix + "b result"} {
		if kinds[want] == 0 {
			t.Errorf("--json has no %q event: %v", want, kinds)
		}
	}

	only := logs("latest", prefix+"b", "--attempt", "1")
	if strings.Contains(only, prefix+"a") || !strings.Contains(only, "attempt 1") {
		t.Errorf("logs latest %sb --attempt 1:\n%s", prefix, only)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"logs", "--state-dir", state, "latest", prefix + "b", "--attempt", "2"}, nil, &out, &errb); code != 1 ||
		!strings.Contains(errb.String(), "has no attempt 2: it ran once") {
		t.Errorf("--attempt 2: exit %d: %s", code, errb.String())
	}
	errb.Reset()
	if code := run([]string{"logs", "--state-dir", state, "latest", "nope"}, nil, &out, &errb); code != 1 ||
		!strings.Contains(errb.String(), `has no node "nope"; its nodes are `+prefix+"a, "+prefix+"b") {
		t.Errorf("unknown node: exit %d: %s", code, errb.String())
	}
}

// TestLogsMasksEchoedCredential: an agent that echoes its credential raw, base64- and URL-encoded on stdout and
// stderr leaves none of them in the stored logs, in any `kewplan logs` mode, in the ledger, or in apply's output;
// the stored stream re-meters to the ledger's totals.
func TestLogsMasksEchoedCredential(t *testing.T) {
	eng := engineOrSkip(t)
	dir, prefix := applyFixture(t, eng, `
# In process, the running executable is this test binary, which cannot be the egress proxy.
runner "claude-code" {
  endpoints = []
}
node "%[1]secho" {
  runner = "claude-code"
  role   = "reviewer"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  prompt = "mode=echo\ntokens=9,8,7,6"
}
`)
	secret := "sk-canary-Zq8+/x=y&z?" + suffix()
	t.Setenv("ANTHROPIC_API_KEY", secret)
	forms := []string{secret, base64.StdEncoding.EncodeToString([]byte(secret)), url.QueryEscape(secret), "Zq8+/x=y"}
	leaks := func(what string, b []byte) {
		t.Helper()
		for _, f := range forms {
			if bytes.Contains(b, []byte(f)) {
				t.Errorf("%s holds the credential (form %q):\n%s", what, f, b)
			}
		}
	}
	state := filepath.Join(dir, "state")
	var stdout, stderr bytes.Buffer
	code := run([]string{"apply", dir, "--auto-approve", "--json", "--state-dir", state}, strings.NewReader(""), &stdout, &stderr)
	if code != 1 { // held: the reviewer wrote no verdict
		t.Fatalf("apply: exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	leaks("apply's stdout", stdout.Bytes())
	leaks("apply's stderr", stderr.Bytes())

	logDir := filepath.Join(state, "logs")
	stored := map[string][]byte{}
	_ = filepath.Walk(logDir, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			b, _ := os.ReadFile(p)
			stored[filepath.Base(p)] = b
			leaks("stored log "+p, b)
		}
		return nil
	})
	so, se := stored[prefix+"echo.stdout.log"], stored[prefix+"echo.stderr.log"]
	if !bytes.Contains(so, []byte("my key: [MASKED] [MASKED] [MASKED]")) || !bytes.Contains(se, []byte("stderr: [MASKED] [MASKED] [MASKED]")) {
		t.Errorf("the stored logs are not masked as expected:\n%s\n%s", so, se)
	}

	for _, mode := range [][]string{{}, {"--json"}, {"--raw"}, {"--follow"}, {"--raw", "--follow"}} {
		var out, errb bytes.Buffer
		args := append([]string{"logs", "latest", "--state-dir", state}, mode...)
		if code := run(args, nil, &out, &errb); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errb.String())
		}
		if out.Len() == 0 {
			t.Errorf("%v printed nothing", args)
		}
		leaks(strings.Join(args, " "), append(out.Bytes(), errb.Bytes()...))
	}

	l, err := ledger.Open(statedir.Dir{Root: state}.Ledger())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	runs, err := l.Runs()
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs: %v %v", runs, err)
	}
	_, nodes, err := l.Run(runs[0].ID)
	if err != nil || len(nodes) != 1 {
		t.Fatalf("run: %v %v", nodes, err)
	}
	rec, _ := json.Marshal(nodes[0])
	leaks("the ledger's record", rec)

	// The stored stream re-meters to what the live meter recorded.
	var out, errb bytes.Buffer
	if code := run([]string{"telemetry", "--runner", "claude-code", "--json", nodes[0].StdoutLog}, nil, &out, &errb); code != 0 {
		t.Fatalf("telemetry: exit %d: %s", code, errb.String())
	}
	var tel struct {
		InputTokens      int64    `json:"input_tokens"`
		OutputTokens     int64    `json:"output_tokens"`
		CacheReadTokens  int64    `json:"cache_read_tokens"`
		CacheWriteTokens int64    `json:"cache_write_tokens"`
		Events           int64    `json:"events"`
		UnparsedLines    int64    `json:"unparsed_lines"`
		CostUSD          *float64 `json:"cost_usd"`
	}
	if err := json.Unmarshal(out.Bytes(), &tel); err != nil {
		t.Fatalf("telemetry --json: %v\n%s", err, out.String())
	}
	n := nodes[0]
	if tel.InputTokens != n.InputTokens || tel.OutputTokens != n.OutputTokens || tel.CacheReadTokens != n.CacheReadTokens ||
		tel.CacheWriteTokens != n.CacheWriteTokens || tel.Events != n.Events || tel.UnparsedLines != n.UnparsedLines ||
		tel.CostUSD == nil || n.CostUSD == nil || *tel.CostUSD != *n.CostUSD || n.InputTokens != 9 {
		t.Errorf("telemetry of the stored log %+v differs from the ledger's %+v", tel, n)
	}
}

// TestLogsFollowPrintsBeforeTheNodeEnds: `kewplan logs RUN --follow` beside a running apply prints the agent's
// first line while the agent is still waiting (it goes on only once the test has seen that line), then the rest,
// and ends when the run ends.
func TestLogsFollowPrintsBeforeTheNodeEnds(t *testing.T) {
	eng := engineOrSkip(t)
	bin := kewplanBinary(t)
	dir, prefix := applyFixture(t, eng, `
node "%[1]sgate" {
  runner = "claude-code"
  role   = "reviewer"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  prompt = "mode=gate"
}
`)
	state := filepath.Join(dir, "state")
	apply := exec.Command(bin, "apply", dir, "--auto-approve", "--json", "--state-dir", state)
	apply.Env = append(os.Environ(), "ANTHROPIC_API_KEY=sk-test-follow")
	applyOut, err := apply.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var applyErr lockedBuffer
	apply.Stderr = writerFunc(func(b []byte) (int, error) { applyErr.WriteString(string(b)); return len(b), nil })
	if err := apply.Start(); err != nil {
		t.Fatal(err)
	}
	killer := time.AfterFunc(3*time.Minute, func() { apply.Process.Kill() }) // backstop only
	defer killer.Stop()
	applyDone := make(chan error, 1)
	runID := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(applyOut)
		sc.Buffer(nil, 1<<20)
		sent := false
		for sc.Scan() {
			var ev map[string]any
			if json.Unmarshal(sc.Bytes(), &ev) == nil && ev["type"] == "apply_start" && !sent {
				sent = true
				id, _ := ev["run_id"].(string)
				runID <- id
			}
		}
		if !sent {
			close(runID)
		}
		applyDone <- apply.Wait()
	}()
	id, ok := <-runID
	if !ok || id == "" {
		t.Fatalf("the apply never started a run: %v\n%s", <-applyDone, applyErr.String())
	}

	pr, pw := io.Pipe()
	followDone := make(chan int, 1)
	var followErr bytes.Buffer
	go func() {
		code := run([]string{"logs", id, "--follow", "--state-dir", state}, nil, pw, &followErr)
		pw.Close()
		followDone <- code
	}()
	var seen []string
	sc := bufio.NewScanner(pr)
	gated := false
	for sc.Scan() {
		seen = append(seen, sc.Text())
		if !gated && strings.Contains(sc.Text(), "waiting for the gate") {
			gated = true
			// The agent is blocked until this file exists: the line was printed before the node ended.
			gate := filepath.Join(state, "checkouts", id, prefix+"gate", ".kew-gate")
			if err := os.WriteFile(gate, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if code := <-followDone; code != 0 {
		t.Fatalf("logs --follow: exit %d: %s", code, followErr.String())
	}
	if err := <-applyDone; err != nil {
		var ee *exec.ExitError
		if !(errors.As(err, &ee) && ee.ExitCode() == 1) { // held: no verdict
			t.Fatalf("apply: %v\n%s\nlogs --follow printed:\n%s", err, applyErr.String(), strings.Join(seen, "\n"))
		}
	}
	text := strings.Join(seen, "\n")
	if !gated {
		t.Fatalf("logs --follow never printed the agent's first line:\n%s\napply:\n%s", text, applyErr.String())
	}
	for _, want := range []string{"── " + prefix + "gate · claude-code", "through the gate", "■ done: ", "held, totals: "} {
		if !strings.Contains(text, want) {
			t.Errorf("logs --follow lacks %q:\n%s", want, text)
		}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// TestLogsForEachAttempts: the logs of an instance's attempts are found where apply wrote them (named by the
// instance's slug, fix-web.a2.stdout.log, never by its address fix["web"]), with --attempt and when the node's row
// names no logs yet (a running node, or a state directory that moved).
func TestLogsForEachAttempts(t *testing.T) {
	state := t.TempDir()
	dir := statedir.Dir{Root: state}
	l, err := ledger.Open(dir.Ledger())
	if err != nil {
		t.Fatal(err)
	}
	const run, node, slug = "20261203T000000Z-abcdef", `fix["web"]`, "fix-web"
	now := time.Now()
	if err := l.StartRun(ledger.RunRecord{ID: run, StartedAt: now}); err != nil {
		t.Fatal(err)
	}
	line := func(text string) string {
		return `{"type":"assistant","message":{"id":"m","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"` + text + `"}]}}` + "\n"
	}
	for attempt, text := range map[int]string{1: "first attempt speaking", 2: "second attempt speaking"} {
		out, errLog := dir.Logs(run, node, slug, attempt)
		if err := os.MkdirAll(filepath.Dir(out), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(out, []byte(line(text)), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(errLog, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := l.RecordAttempt(ledger.AttemptRecord{RunID: run, Node: node, Attempt: attempt, Status: ledger.StatusFailed, StdoutLog: out, StderrLog: errLog}); err != nil {
			t.Fatal(err)
		}
	}
	// The node's row names no logs: the layout must find them from the address.
	if err := l.RecordNode(&ledger.NodeResult{RunID: run, Node: node, Runner: "claude-code", Protocol: "claude-code", Status: ledger.StatusFailed, Started: now, Ended: now, Attempts: 2}); err != nil {
		t.Fatal(err)
	}
	if err := l.FinishRun(run, ledger.RunFailed, now); err != nil {
		t.Fatal(err)
	}
	l.Close()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--attempt", "2"}, "second attempt speaking"},
		{[]string{"--attempt", "1"}, "first attempt speaking"},
		{nil, "second attempt speaking"}, // the node's last attempt
	} {
		var out, errb bytes.Buffer
		args := append([]string{"logs", "--state-dir", state, run, node}, tc.args...)
		if code := run_(args, &out, &errb); code != 0 || !strings.Contains(out.String(), tc.want) {
			t.Errorf("logs %v: exit %d, want the text %q:\n%s%s", tc.args, code, tc.want, out.String(), errb.String())
		}
	}
}

func run_(args []string, stdout, stderr io.Writer) int { return run(args, nil, stdout, stderr) }
