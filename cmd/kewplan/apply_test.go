package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kewplan/kewplan/executor/engine"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/executor/statedir"
	"github.com/kewplan/kewplan/internal/testtools/testkit"
	"github.com/kewplan/kewplan/planner"
)

// These tests drive `kewplan apply` and `kewplan runs` against the real engine with the executor's fake agent.

func engineOrSkip(t *testing.T) *engine.Engine { return testkit.Engine(t) }

var agentImage struct {
	once sync.Once
	tag  string
	err  error
}

// fakeAgent builds the executor's fake agent image the same way the executor's tests do (same tag, so the engine
// caches it across packages).
func fakeAgent(t *testing.T, eng *engine.Engine) string {
	t.Helper()
	agentImage.once.Do(func() {
		dir, err := os.MkdirTemp("", "kewplan-fakeagent-")
		if err != nil {
			agentImage.err = err
			return
		}
		defer os.RemoveAll(dir)
		bin := filepath.Join(dir, "fakeagent")
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w -buildid=", "-o", bin, "./testdata/fakeagent")
		cmd.Dir = "../../executor"
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
		if out, err := cmd.CombinedOutput(); err != nil {
			agentImage.err = fmt.Errorf("build fake agent: %v\n%s", err, out)
			return
		}
		data, err := os.ReadFile(bin)
		if err != nil {
			agentImage.err = err
			return
		}
		dockerfile := "FROM scratch\nCOPY fakeagent /fakeagent\nUSER 1001:1001\nWORKDIR /work\nENTRYPOINT [\"/fakeagent\"]\n"
		sum := sha256.Sum256(append(data, dockerfile...))
		tag := "kewplan-test/fakeagent:" + hex.EncodeToString(sum[:6])
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		agentImage.tag = tag
		if _, err := eng.InspectImage(ctx, tag); err == nil {
			return
		}
		agentImage.err = eng.BuildImage(ctx, tag, map[string][]byte{"Dockerfile": []byte(dockerfile), "fakeagent": data}, map[string]bool{"fakeagent": true})
	})
	if agentImage.err != nil {
		t.Fatal(agentImage.err)
	}
	return agentImage.tag
}

func suffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// applyFixture writes a configuration using the fake agent on a test-unique internal network, with a local
// repository; nodes is HCL with %[1]s for the node prefix and %[2]s for the repository.
func applyFixture(t *testing.T, eng *engine.Engine, nodes string) (dir, prefix string) {
	t.Helper()
	image := fakeAgent(t, eng)
	network := "kewplan-test-" + suffix()
	if _, err := eng.CreateNetwork(context.Background(), network, true, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.RemoveNetwork(context.Background(), network) })
	dir = t.TempDir()
	repo := filepath.Join(dir, "origin")
	os.MkdirAll(repo, 0o755)
	os.WriteFile(filepath.Join(repo, "README.md"), []byte("test\n"), 0o644)
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "."}, {"-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-qm", "init"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	prefix = "c" + suffix() + "-"
	src := fmt.Sprintf("sandbox {\n  allowlist_network = %q\n  memory = \"256m\"\n  images = { \"claude-code\" = %q }\n}\n", network, image) +
		fmt.Sprintf(nodes, prefix, repo)
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, prefix
}

func TestApplyCommandJSONAndRuns(t *testing.T) {
	eng := engineOrSkip(t)
	// In process, the running executable is this test binary, which cannot be the egress proxy: no endpoint, so
	// no node is proxied (the signal tests run a static kewplan, proxy and all).
	dir, prefix := applyFixture(t, eng, `
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
  prompt = "mode=garbage"
}
`)
	t.Setenv("ANTHROPIC_API_KEY", "sk-canary-never-printed")
	state := filepath.Join(dir, "state")
	var stdout, stderr bytes.Buffer
	code := run([]string{"apply", dir, "--auto-approve", "--json", "--state-dir", state}, strings.NewReader(""), &stdout, &stderr)
	if code != 1 {
		t.Fatalf("exit %d, want 1 (b is held: no verdict)\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	if strings.Contains(stdout.String()+stderr.String(), "sk-canary") {
		t.Fatal("a credential value was printed")
	}
	var types []string
	var done map[string]any
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev map[string]any
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("stdout is not NDJSON: %q: %v", sc.Text(), err)
		}
		typ := ev["type"].(string)
		if typ == "node_progress" {
			continue
		}
		if typ == "node_done" {
			typ += " " + ev["node"].(string) + " " + ev["status"].(string)
		}
		if typ == "apply_done" {
			done = ev
		}
		types = append(types, typ)
	}
	// "policy" says no organisation policy was enforced (no --policy): the first thing apply says.
	want := []string{"policy", "apply_start", "node_start", "node_done " + prefix + "a approved", "node_start", "node_done " + prefix + "b held", "apply_done"}
	if strings.Join(types, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(types, "\n"), strings.Join(want, "\n"))
	}
	if done["status"] != "failed" {
		t.Errorf("apply_done status %v", done["status"])
	}
	// The garbage node printed terminal escapes on stdout and stderr; nothing of it reaches our output raw.
	if bytes.Contains(stdout.Bytes(), []byte("\x1b")) || bytes.Contains(stderr.Bytes(), []byte("\x1b")) {
		t.Error("an escape sequence reached kewplan's output")
	}
	runID, _ := done["run_id"].(string)

	stdout.Reset()
	if code := run([]string{"runs", "--state-dir", state}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("runs: exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), runID) || !strings.Contains(stdout.String(), "failed  1/2") {
		t.Errorf("runs:\n%s", stdout.String())
	}
	stdout.Reset()
	if code := run([]string{"runs", "show", runID, "--state-dir", state, "--json"}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("runs show: exit %d: %s", code, stderr.String())
	}
	var doc struct {
		Run   ledger.RunRecord    `json:"run"`
		Nodes []ledger.NodeRecord `json:"nodes"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Run.Status != "failed" || len(doc.Nodes) != 2 || doc.Nodes[0].Verdict != "approve" || doc.Nodes[0].InputTokens != 5 ||
		*doc.Nodes[0].CostUSD != 0.25 || doc.Nodes[1].Status != "held" {
		t.Errorf("runs show --json: %+v", doc)
	}
	stdout.Reset()
	if code := run([]string{"runs", "show", runID, "--state-dir", state}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("runs show: exit %d", code)
	}
	for _, want := range []string{"Run " + runID + ": failed", "verdict        approve", "held for a human", "Totals: 1 of 2 nodes succeeded"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("runs show lacks %q:\n%s", want, stdout.String())
		}
	}
	if bytes.Contains(stdout.Bytes(), []byte("\x1b")) {
		t.Error("an escape sequence reached runs show")
	}
}

// buildKewplan builds the command once per test binary, for the tests that must signal a real process.
var kewplanBin struct {
	once sync.Once
	path string
	err  error
}

func kewplanBinary(t *testing.T) string {
	t.Helper()
	kewplanBin.once.Do(func() {
		dir, err := os.MkdirTemp("", "kewplan-bin-")
		if err != nil {
			kewplanBin.err = err
			return
		}
		kewplanBin.path = filepath.Join(dir, "kewplan")
		build := exec.Command("go", "build", "-o", kewplanBin.path, ".")
		build.Env = append(os.Environ(), "CGO_ENABLED=0") // static, as `make build`: it is also the egress proxy
		if out, err := build.CombinedOutput(); err != nil {
			kewplanBin.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if kewplanBin.err != nil {
		t.Fatal(kewplanBin.err)
	}
	return kewplanBin.path
}

// TestApplyCommandSignals: SIGINT cancels (containers killed and removed, prompt files deleted, run cancelled,
// exit 130); a second signal exits at once after a last cleanup attempt.
func TestApplyCommandSignals(t *testing.T) {
	eng := engineOrSkip(t)
	bin := kewplanBinary(t)
	for _, twice := range []bool{false, true} {
		t.Run(fmt.Sprintf("twice=%v", twice), func(t *testing.T) {
			dir, prefix := applyFixture(t, eng, `
node "%[1]shang" {
  runner = "claude-code"
  role   = "reviewer"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  prompt = "mode=hang"
}
`)
			state := filepath.Join(dir, "state")
			cmd := exec.Command(bin, "apply", dir, "--auto-approve", "--json", "--state-dir", state)
			cmd.Env = append(os.Environ(), "ANTHROPIC_API_KEY=sk-test-dummy")
			var stderr lockedBuffer
			interrupted := make(chan struct{})
			errPipe, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			stderrDone := make(chan struct{})
			go func() {
				defer close(stderrDone)
				sc := bufio.NewScanner(errPipe)
				once := sync.Once{}
				for sc.Scan() {
					stderr.WriteString(sc.Text() + "\n")
					if strings.HasPrefix(sc.Text(), "Interrupted:") {
						once.Do(func() { close(interrupted) })
					}
				}
			}()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			killer := time.AfterFunc(3*time.Minute, func() { cmd.Process.Kill() }) // backstop only
			defer killer.Stop()
			runID := ""
			sc := bufio.NewScanner(out)
			signalled := false
			for sc.Scan() {
				var ev map[string]any
				if json.Unmarshal(sc.Bytes(), &ev) != nil {
					continue
				}
				if ev["type"] == "apply_start" {
					runID, _ = ev["run_id"].(string)
				}
				// The init event was metered: the container runs. Interrupt as a user would.
				if ev["type"] == "node_progress" && ev["session_id"] != "" && !signalled {
					signalled = true
					cmd.Process.Signal(syscall.SIGINT)
					if twice {
						// Signals do not queue: send the second once the first was handled.
						<-interrupted
						cmd.Process.Signal(syscall.SIGINT)
					}
				}
			}
			<-stderrDone
			err = cmd.Wait()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 130 {
				t.Fatalf("exit: %v, want status 130\nstderr:\n%s", err, stderr.String())
			}
			if !signalled || runID == "" {
				t.Fatalf("the container never ran (signalled %v, run %q)\nstderr:\n%s", signalled, runID, stderr.String())
			}
			left, err := eng.ListContainers(context.Background(), planner.LabelRun+"="+runID)
			if err != nil {
				t.Fatal(err)
			}
			if len(left) != 0 {
				t.Errorf("containers left behind: %+v", left)
			}
			_ = filepath.Walk(state, func(p string, info os.FileInfo, err error) error {
				if err == nil && info.Name() == planner.PromptFilename {
					t.Errorf("prompt file left behind: %s", p)
				}
				return nil
			})
			l, err := ledger.Open(statedir.Dir{Root: state}.Ledger())
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			r, nodes, err := l.Run(runID)
			if err != nil {
				t.Fatal(err)
			}
			if r.Status != ledger.RunCancelled {
				t.Errorf("run status %s, want cancelled", r.Status)
			}
			if !twice && (len(nodes) != 1 || nodes[0].Status != ledger.StatusCancelled || nodes[0].Node != prefix+"hang") {
				t.Errorf("node rows: %+v", nodes)
			}
			if twice && !strings.Contains(stderr.String(), "Interrupted again") {
				// The first interrupt's cleanup can win the race against the second signal; both end in 130
				// with nothing left behind, which is what is asserted above.
				t.Logf("the apply ended before the second signal arrived:\n%s", stderr.String())
			}
		})
	}
}

// lockedBuffer is a bytes.Buffer safe for one writer and concurrent readers.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) WriteString(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.WriteString(s)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestApplyCommandBudgetExceeded: a node over its max_usd is killed; apply --json streams a budget_warning and the
// node's budget_exceeded, exits 1, and runs show tells the cap, the figures and the estimated cost.
func TestApplyCommandBudgetExceeded(t *testing.T) {
	eng := engineOrSkip(t)
	dir, prefix := applyFixture(t, eng, `
# In process, the running executable is this test binary, which cannot be the egress proxy.
runner "claude-code" {
  endpoints = []
}
node "%[1]sfix" {
  runner  = "claude-code"
  model   = "claude-sonnet-4-5"
  repo    = %[2]q
  prompt  = "mode=turns\nturns=2\nusage=100000,20000\nsleep=1h"
  timeout = "5m"
  budget {
    max_usd = 1.0
    warn_at = 0.5
  }
}
`)
	t.Setenv("ANTHROPIC_API_KEY", "sk-canary-never-printed")
	state := filepath.Join(dir, "state")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"apply", dir, "--auto-approve", "--json", "--state-dir", state}, strings.NewReader(""), &stdout, &stderr); code != 1 {
		t.Fatalf("exit %d, want 1\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	var types []string
	runID := ""
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev map[string]any
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("stdout is not NDJSON: %q: %v", sc.Text(), err)
		}
		switch ev["type"] {
		case "budget_warning":
			types = append(types, fmt.Sprintf("budget_warning %v %v", ev["cap"], ev["warn_at"]))
		case "node_done":
			types = append(types, fmt.Sprintf("node_done %v %v", ev["status"], ev["cost_source"]))
		case "apply_done":
			runID, _ = ev["run_id"].(string)
			types = append(types, fmt.Sprintf("apply_done %v", ev["status"]))
		}
	}
	want := "budget_warning max_usd 0.5\nnode_done budget_exceeded estimated\napply_done failed"
	if got := strings.Join(types, "\n"); got != want {
		t.Errorf("events:\n%s\nwant:\n%s", got, want)
	}
	stdout.Reset()
	if code := run([]string{"runs", "show", runID, "--state-dir", state}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("runs show: exit %d: %s", code, stderr.String())
	}
	for _, w := range []string{`node "` + prefix + `fix": budget_exceeded`, "max_usd 1.00 reached at 1.20", "(estimated: tokens × price)", "estimated for " + prefix + "fix"} {
		if !strings.Contains(stdout.String(), w) {
			t.Errorf("runs show lacks %q:\n%s", w, stdout.String())
		}
	}
}
