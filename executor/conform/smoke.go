package conform

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/executor/engine"
	"github.com/kewplan/kewplan/planner"
	"github.com/kewplan/kewplan/runners"
)

// Status is the verdict of one smoke element or conform row.
type Status string

// The three verdicts. NOT VERIFIABLE is never a pass: it says the check could not observe what it needs.
const (
	Pass          Status = "PASS"
	Fail          Status = "FAIL"
	NotVerifiable Status = "NOT VERIFIABLE"
)

// Check is one verdict with the evidence behind it, in whole sentences. Evidence never holds a credential value.
type Check struct {
	ID       int      `json:"id"`
	Title    string   `json:"title"`
	Status   Status   `json:"status"`
	Evidence []string `json:"evidence"`
}

// ProbeOptions are shared by Smoke and Conform.
type ProbeOptions struct {
	Image  string
	Runner string // a built-in runner name; its container args fill the "$@" slot
	// Model is the routed model placed in the container args; "" uses DefaultProbeModel.
	Model string
	// PidsLimit, Memory and CPUs are the sandbox limits to run under; zero values mean the sandbox defaults.
	PidsLimit    int64
	Memory, CPUs string
	// Runtime is the container runtime (isolation tier) to run under, such as "runsc"; "" is the engine's default.
	// A runtime the engine has not registered is refused before anything runs.
	Runtime string
	// Timeout bounds each container; 0 means DefaultProbeTimeout.
	Timeout time.Duration
	// Progress, when set, is told what is about to happen (for a live status line).
	Progress func(step string)
}

// DefaultProbeModel is the routed model smoke and conform pass: recognisable, and no provider serves it.
const DefaultProbeModel = "kewplan-probe-model"

// DefaultProbeTimeout bounds one smoke or conform container.
const DefaultProbeTimeout = 2 * time.Minute

// ProbeNetwork is the network smoke and conform containers join: none. Neither the smoke script nor the conform
// probe needs one, and an agent the probe failed to intercept must not reach a provider (or anything else) with
// the dummy credentials conform hands it. Every other flag is apply's.
const ProbeNetwork = "none"

// captureLimit bounds each output stream kept from a probe container.
const captureLimit = 1 << 20

func (o *ProbeOptions) defaults() (runners.Runner, error) {
	if o.Image == "" {
		return nil, errors.New("no image given: name the image to check, for example kew-agent:latest")
	}
	if o.Runner == "" {
		return nil, errors.New("no runner given: name the built-in runner whose container args and vocabulary the image serves, for example --runner claude-code")
	}
	r, ok := runners.Builtin(o.Runner)
	if !ok {
		return nil, fmt.Errorf("unknown runner %q: the built-in runners are %s", o.Runner, strings.Join(runners.BuiltinNames(), ", "))
	}
	if o.Model == "" {
		o.Model = DefaultProbeModel
	}
	if o.PidsLimit <= 0 {
		o.PidsLimit = config.DefaultPidsLimit
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultProbeTimeout
	}
	return r, nil
}

func (o *ProbeOptions) progress(format string, args ...any) {
	if o.Progress != nil {
		o.Progress(fmt.Sprintf(format, args...))
	}
}

// probeContainer is the planner.Container a probe runs as: apply's shape, with a throwaway checkout, a unique
// name and the probe network. Everything the Engine API receives is derived from it by ContainerConfig.
func probeContainer(o *ProbeOptions, kind, checkout string, args, env []string) *planner.Container {
	id := nonce()[:12]
	return &planner.Container{
		Name:      planner.ContainerPrefix + kind + "-" + id,
		Node:      kind,
		RunID:     kind + "-" + id,
		Checkout:  checkout,
		Image:     o.Image,
		Network:   ProbeNetwork,
		PidsLimit: o.PidsLimit,
		Memory:    o.Memory,
		CPUs:      o.CPUs,
		Runtime:   o.Runtime,
		Env:       env,
		Args:      args,
	}
}

// scratchCheckout makes a temporary checkout: a git repository when git is available on the host (apply's
// checkouts are clones, and the git bootstrap only matters against one), readable and writable by the
// container's uid, which is not the host's.
func scratchCheckout(kind string) (string, func(), error) {
	dir, err := os.MkdirTemp("", "kewplan-"+kind+"-")
	if err != nil {
		return "", nil, fmt.Errorf("create a scratch checkout: %w", err)
	}
	cleanup := func() { _ = os.RemoveAll(dir) }
	if git, err := exec.LookPath("git"); err == nil {
		cmd := exec.Command(git, "init", "-q", dir)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			cleanup()
			return "", nil, fmt.Errorf("git init the scratch checkout: %v: %s", err, bytes.TrimSpace(out))
		}
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("scratch checkout: %w", err)
	}
	return dir, cleanup, nil
}

func nonce() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return hex.EncodeToString(b[:])
}

// SmokeReport is the result of Smoke: elements 1-3 of the container entrypoint contract.
type SmokeReport struct {
	Image   string   `json:"image"`
	ImageID string   `json:"image_id"`
	Runner  string   `json:"runner"`
	Argv    []string `json:"argv"` // the docker run equivalent of what ran (the checkout is a scratch directory)
	Checks  []Check  `json:"checks"`
	Passed  bool     `json:"passed"`
}

// smokeScript replaces the entrypoint: it reports where it runs and the args it received on stderr, then prints
// the prompt file on stdout, byte for byte.
const smokeScript = `m=no
while read -r _ _ _ _ mp _; do [ "$mp" = /work ] && m=yes; done </proc/self/mountinfo
printf 'kew-smoke: cwd=%s\n' "$(pwd)" >&2
printf 'kew-smoke: mount=%s\n' "$m" >&2
printf 'kew-smoke: argc=%s\n' "$#" >&2
for a in "$@"; do printf 'kew-smoke: arg=%s\n' "$a" >&2; done
exec cat /work/.kew-prompt.txt`

// smokePrompt is multi-line, non-ASCII and full of shell metacharacters, so a handoff that mangles anything
// shows. The nonce makes each run's prompt unique.
func smokePrompt(n string) []byte {
	return []byte("kewplan smoke " + n + "\n" +
		"Quotes ' \" and `backticks`, $HOME, $(not run), a tab\tand ünïcødé.\n" +
		"\n" +
		"The last line has no newline")
}

// Smoke runs the image under apply's hardening with its entrypoint replaced by a /bin/sh script that prints
// /work/.kew-prompt.txt back, and checks elements 1-3 of the contract: the mounted checkout, the prompt file, and
// the "$@" slot. The agent never runs. An error means the check could not be made at all (no engine, no image).
func Smoke(ctx context.Context, eng *engine.Engine, o ProbeOptions) (*SmokeReport, error) {
	runner, err := o.defaults()
	if err != nil {
		return nil, err
	}
	o.progress("inspecting %s", o.Image)
	info, err := eng.InspectImage(ctx, o.Image)
	if err != nil {
		return nil, err
	}
	if err := eng.CheckRuntime(ctx, o.Runtime); err != nil {
		return nil, err
	}
	checkout, cleanup, err := scratchCheckout("smoke")
	if err != nil {
		return nil, err
	}
	defer cleanup()
	prompt := smokePrompt(nonce())
	if err := os.WriteFile(checkout+"/"+planner.PromptFilename, prompt, 0o644); err != nil {
		return nil, fmt.Errorf("write the prompt file: %w", err)
	}
	args := runner.ContainerArgs(o.Model)
	c := probeContainer(&o, "smoke", checkout, args, nil)
	spec, err := engine.ContainerConfig(c, nil)
	if err != nil {
		return nil, err
	}
	spec.SetEntrypoint([]string{"/bin/sh", "-c", smokeScript, "kew-smoke"}, args)
	rep := &SmokeReport{Image: o.Image, ImageID: info.ID, Runner: runner.Name(), Argv: overriddenArgv(c, "/bin/sh")}

	o.progress("running %s with the entrypoint replaced", o.Image)
	res, runErr := eng.RunCapture(ctx, spec, o.Timeout, captureLimit)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	mount := Check{ID: 1, Title: "Mounted checkout at /work, the working directory"}
	handoff := Check{ID: 2, Title: "Prompt file readable at /work/.kew-prompt.txt"}
	slot := Check{ID: 3, Title: `Container args reach the entrypoint as "$@"`}
	if runErr != nil || res.TimedOut {
		why := "the container did not start: " + errString(runErr)
		if runErr == nil {
			why = fmt.Sprintf("the container did not finish within %s and was killed", o.Timeout)
		} else if strings.Contains(runErr.Error(), "/bin/sh") {
			why += "; smoke replaces the entrypoint with /bin/sh -c, so the image needs /bin/sh"
		}
		for _, ch := range []*Check{&mount, &handoff, &slot} {
			ch.Status, ch.Evidence = Fail, []string{why}
		}
		rep.Checks = []Check{mount, handoff, slot}
		return rep, nil
	}
	rep.Checks = judgeSmoke(res, prompt, args, runner.Name(), mount, handoff, slot)
	rep.Passed = true
	for _, ch := range rep.Checks {
		if ch.Status != Pass {
			rep.Passed = false
		}
	}
	return rep, nil
}

// parseSmokeOutput reads the "kew-smoke: key=value" lines the smoke script wrote on stderr: the args it received
// (argc is -1 when the script never ran) and every other fact by key.
func parseSmokeOutput(stderr []byte) (facts map[string]string, gotArgs []string, argc int) {
	facts = map[string]string{}
	argc = -1
	for _, line := range strings.Split(string(stderr), "\n") {
		kv, ok := strings.CutPrefix(line, "kew-smoke: ")
		if !ok {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "arg":
			gotArgs = append(gotArgs, v)
		case "argc":
			fmt.Sscan(v, &argc)
		default:
			facts[k] = v
		}
	}
	return facts, gotArgs, argc
}

// judgeSmoke gives the three smoke elements their verdicts from what the smoke script reported.
func judgeSmoke(res *engine.CaptureResult, prompt []byte, args []string, runnerName string, mount, handoff, slot Check) []Check {
	facts, gotArgs, argc := parseSmokeOutput(res.Stderr)
	tail := stderrTail(res.Stderr, "kew-smoke: ")

	// Element 1: the checkout is a bind mount at /work, and /work is where the container starts.
	switch {
	case facts["cwd"] == "" && facts["mount"] == "":
		mount.Status = Fail
		mount.Evidence = []string{fmt.Sprintf("The smoke script did not run (exit %d).%s", res.ExitCode, tail)}
	case facts["cwd"] != planner.WorkDir:
		mount.Status = Fail
		mount.Evidence = []string{fmt.Sprintf("The working directory was %q, not /work.", facts["cwd"])}
	case facts["mount"] != "yes":
		mount.Status = Fail
		mount.Evidence = []string{"/work is not a mount point inside the container, so the checkout did not arrive there."}
	default:
		mount.Status = Pass
		mount.Evidence = []string{"The scratch checkout was bind-mounted at /work, and /work was the working directory."}
	}

	// Element 2: the prompt file reads back byte for byte.
	switch {
	case bytes.Equal(res.Stdout, prompt):
		handoff.Status = Pass
		handoff.Evidence = []string{fmt.Sprintf("The %d-byte prompt read back from /work/.kew-prompt.txt byte for byte (multi-line, non-ASCII, shell metacharacters).", len(prompt))}
	default:
		handoff.Status = Fail
		ev := fmt.Sprintf("Read back %d bytes instead of the %d-byte prompt", len(res.Stdout), len(prompt))
		if i := firstDifference(res.Stdout, prompt); i >= 0 && len(res.Stdout) > 0 {
			ev += fmt.Sprintf("; the first difference is at byte %d", i)
		}
		handoff.Evidence = []string{fmt.Sprintf("%s (exit %d).%s", ev, res.ExitCode, tail)}
	}

	// Element 3: the args arrive as "$@", unmodified.
	switch {
	case argc < 0:
		slot.Status = Fail
		slot.Evidence = []string{fmt.Sprintf("The smoke script did not run (exit %d).%s", res.ExitCode, tail)}
	case argc == len(args) && slices.Equal(gotArgs, args):
		slot.Status = Pass
		slot.Evidence = []string{fmt.Sprintf("The %d container args of runner %s arrived unmodified: %s.", len(args), runnerName, strings.Join(args, " "))}
	default:
		slot.Status = Fail
		slot.Evidence = []string{fmt.Sprintf("Sent %d args (%s) and the container received %d (%s).", len(args), strings.Join(args, " "), argc, strings.Join(gotArgs, " "))}
	}
	return []Check{mount, handoff, slot}
}

// overriddenArgv is the docker run argv of c with the entrypoint override smoke and conform apply.
func overriddenArgv(c *planner.Container, entrypoint string) []string {
	argv := c.Argv()
	for i, w := range argv {
		if w == c.Image {
			return append(append(append([]string{}, argv[:i]...), "--entrypoint", entrypoint), argv[i:]...)
		}
	}
	return argv
}

func firstDifference(a, b []byte) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// stderrTail quotes the last few stderr lines (skipping those with prefix) as " Its stderr ended: …", or "".
func stderrTail(stderr []byte, skip string) string {
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(string(stderr), "\n"), "\n") {
		if l == "" || (skip != "" && strings.HasPrefix(l, skip)) {
			continue
		}
		lines = append(lines, l)
	}
	if len(lines) == 0 {
		return ""
	}
	if len(lines) > 3 {
		lines = lines[len(lines)-3:]
	}
	return " Its stderr ended: " + quoteExcerpt(strings.Join(lines, " | "), 300)
}

// quoteExcerpt renders untrusted container output safely: control characters escaped, at most max bytes.
func quoteExcerpt(s string, max int) string {
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	q := fmt.Sprintf("%q", s)
	return q
}
