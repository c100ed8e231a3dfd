package conform

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/kewplan/kewplan/planner"
)

// The probe is the executable conform places first on PATH, under the agent's own name, from inside the mount:
// /work/.kew-probe/bin/<agent>. An entrypoint that runs the agent by name runs the probe instead, and the probe
// records what the agent would have received.
//
// It is a POSIX sh script rather than a binary because kewplan runs on hosts of any OS and architecture while
// the image is Linux of its own architecture; a script runs on every image that has /bin/sh and cat, which every
// agent image has (the agent CLIs are Node.js and Python programs with shell-based tooling). An image without
// /bin/sh cannot run the probe: conform then says NOT VERIFIABLE for the rows that need it, never PASS.
const (
	probeDir       = ".kew-probe"        // in the checkout
	probeMountDir  = "/work/" + probeDir // in the container
	probeBinMount  = probeMountDir + "/bin"
	probeOutMount  = probeMountDir + "/out"
	probeVerdictIn = planner.WorkDir + "/" + planner.VerdictFilename
)

// agentShape is what an image of a built-in runner's kind runs: the agent binary and the fixed words the
// contract's entrypoint puts before "$@" (runners/<runner>.go documents each entrypoint line).
type agentShape struct {
	Binary string
	Verb   []string
	// Events are the stdout "type" values of the runner's vocabulary.
	Events []string
}

var agentShapes = map[string]agentShape{
	"claude-code": {Binary: "claude", Verb: []string{"--print"},
		Events: []string{"system", "assistant", "user", "result", "stream_event", "rate_limit_event"}},
	"opencode": {Binary: "opencode", Verb: []string{"run"},
		Events: []string{"step_start", "text", "reasoning", "tool_use", "step_finish", "error", "done"}},
	"pi":       {Binary: "pi", Events: piEvents},
	"lemonade": {Binary: "pi", Events: piEvents},
	"hermes": {Binary: "hermes", Verb: []string{"chat", "--query-file", "-"},
		Events: []string{"system", "text", "tool_use", "tool_result", "result"}},
}

var piEvents = []string{"session", "agent_start", "turn_start", "message_start", "message_update", "message_end",
	"turn_end", "agent_end", "tool_execution_start", "tool_execution_update", "tool_execution_end",
	"auto_retry_start", "auto_retry_end", "compaction_start", "compaction_end", "agent_settled"}

// probeStream is the probe's stdout: a short, complete run in the vocabulary's own words, so that what reaches
// kewplan's stdout can be checked against what the agent printed.
func probeStream(protocol, nonce string) []string {
	switch protocol {
	case "opencode":
		s := `"sessionID":"ses_kewprobe"`
		return []string{
			`{"type":"step_start","timestamp":1,` + s + `,"part":{"id":"prt_1","messageID":"msg_1",` + s + `,"type":"step-start"}}`,
			`{"type":"text","timestamp":2,` + s + `,"part":{"id":"prt_2","messageID":"msg_1",` + s + `,"type":"text","text":"` + nonce + `"}}`,
			`{"type":"step_finish","timestamp":3,` + s + `,"part":{"id":"prt_3","messageID":"msg_1",` + s + `,"type":"step-finish","reason":"stop","tokens":{"input":1,"output":1,"reasoning":0,"cache":{"read":0,"write":0}},"cost":0}}`,
		}
	case "pi", "lemonade":
		return []string{
			`{"type":"session","version":3,"id":"kewprobe","cwd":"/work"}`,
			`{"type":"agent_start"}`,
			`{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"` + nonce + `"}],"provider":"probe","model":"probe","usage":{"input":1,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":2,"cost":{"total":0}},"stopReason":"stop"}}`,
			`{"type":"agent_settled","aborted":false}`,
		}
	case "hermes":
		return []string{
			`{"type":"system","subtype":"init","model":"probe","session_id":"kewprobe","timestamp":1}`,
			`{"type":"text","text":"` + nonce + `","timestamp":2}`,
			`{"type":"result","session_id":"kewprobe","exit_code":0,"text":"` + nonce + `","tokens":{"input":1,"output":1,"total":2,"cache_read":0,"cache_write":0},"duration_ms":1,"timestamp":3}`,
		}
	default: // claude-code
		s := `"session_id":"kewprobe"`
		return []string{
			`{"type":"system","subtype":"init",` + s + `,"model":"probe","cwd":"/work","tools":[]}`,
			`{"type":"assistant",` + s + `,"parent_tool_use_id":null,"message":{"id":"msg_kewprobe","type":"message","role":"assistant","model":"probe","content":[{"type":"text","text":"` + nonce + `"}],"usage":{"input_tokens":1,"output_tokens":1}}}`,
			`{"type":"result","subtype":"success","is_error":false,"num_turns":1,` + s + `,"result":"` + nonce + `","total_cost_usd":0,"usage":{"input_tokens":1,"output_tokens":1,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}}`,
		}
	}
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// probeScript renders the probe. watch are the environment names whose presence it reports (never their values);
// verdict is what it writes to the reviewer sidecar path.
func probeScript(protocol, nonce string, watch []string, verdict string) (string, error) {
	var b strings.Builder
	b.WriteString(`#!/bin/sh
# kewplan conform probe. It stands in for the agent CLI: it records the argv and stdin it received, the git
# configuration of the fresh HOME and the names (never the values) of the credentials that reached it, writes the
# reviewer sidecar at the mount root, and prints a short NDJSON run on stdout. Diagnostics go to stderr.
out=` + probeOutMount + `
: >"$out/reached" || exit 70
for a in "$@"; do printf '%s\000' "$a"; done >"$out/argv"
cat >"$out/stdin"
printf '%s\n' "$(pwd)" >"$out/cwd"
printf '%s\n' "${HOME-}" >"$out/home"
if command -v git >/dev/null 2>&1; then
	git config --global --get-all safe.directory >"$out/git-safe-directory" 2>/dev/null
	git config --global --get user.name >"$out/git-user-name" 2>/dev/null
	git config --global --get user.email >"$out/git-user-email" 2>/dev/null
	git -C /work rev-parse --git-dir >/dev/null 2>"$out/git-repo-error" && : >"$out/git-repo-ok"
else
	: >"$out/git-missing"
fi
: >"$out/env"
`)
	for _, n := range watch {
		if !envName.MatchString(n) {
			return "", fmt.Errorf("probe: %q is not an environment variable name", n)
		}
		fmt.Fprintf(&b, "[ -n \"${%s+x}\" ] && printf '%%s\\n' %s >>\"$out/env\"\n", n, n)
	}
	if strings.ContainsAny(verdict, "'\n") {
		return "", errors.New("probe: the sidecar content must not contain a quote or a newline")
	}
	fmt.Fprintf(&b, "printf '%%s' '%s' 2>\"$out/verdict-error\" >%s && : >\"$out/verdict-written\"\n", verdict, probeVerdictIn)
	for _, line := range probeStream(protocol, nonce) {
		if strings.Contains(line, "'") {
			return "", errors.New("probe: an event line contains a quote")
		}
		fmt.Fprintf(&b, "printf '%%s\\n' '%s'\n", line)
	}
	b.WriteString("echo \"kew-probe: intercepted $0; the real agent did not run\" >&2\nexit 0\n")
	return b.String(), nil
}

// probeRecord is what the probe left in the checkout.
type probeRecord struct {
	Reached        bool
	Argv           []string
	Stdin          []byte
	Cwd, Home      string
	GitMissing     bool
	SafeDirectory  []string
	GitUserName    string
	GitUserEmail   string
	GitRepoOK      bool
	GitRepoError   string
	EnvNames       []string
	VerdictWritten bool
	VerdictError   string
}

// installProbe writes the probe into checkout as bin/<binary> and an empty, world-writable out/ directory (the
// container's uid is not the host's).
func installProbe(checkout, binary, script string) error {
	bin := filepath.Join(checkout, probeDir, "bin")
	out := filepath.Join(checkout, probeDir, "out")
	for _, d := range []string{bin, out} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("install probe: %w", err)
		}
	}
	if err := os.Chmod(out, 0o777); err != nil {
		return fmt.Errorf("install probe: %w", err)
	}
	if err := os.WriteFile(filepath.Join(bin, binary), []byte(script), 0o755); err != nil {
		return fmt.Errorf("install probe: %w", err)
	}
	return nil
}

// probeRecordLimit bounds each record file read back from the checkout (the image could have written anything).
const probeRecordLimit = 4 << 20

// readProbe reads the records of one run. A missing out/reached means the probe never ran.
func readProbe(checkout string) (*probeRecord, error) {
	out := filepath.Join(checkout, probeDir, "out")
	read := func(name string) ([]byte, bool, error) {
		p := filepath.Join(out, name)
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, err
		}
		if !fi.Mode().IsRegular() {
			return nil, false, fmt.Errorf("probe record %s is not a regular file", name)
		}
		if fi.Size() > probeRecordLimit {
			return nil, true, fmt.Errorf("probe record %s is larger than %d bytes", name, probeRecordLimit)
		}
		b, err := os.ReadFile(p)
		return b, err == nil, err
	}
	rec := &probeRecord{}
	var err error
	text := func(name string) string {
		b, _, e := read(name)
		if e != nil && err == nil {
			err = e
		}
		return strings.TrimRight(string(b), "\n")
	}
	exists := func(name string) bool {
		_, ok, e := read(name)
		if e != nil && err == nil {
			err = e
		}
		return ok
	}
	if rec.Reached = exists("reached"); !rec.Reached {
		return rec, err
	}
	if argv, ok, e := read("argv"); e != nil {
		err = e
	} else if ok {
		rec.Argv = splitNUL(argv)
	}
	if stdin, _, e := read("stdin"); e != nil {
		err = e
	} else {
		rec.Stdin = stdin
	}
	rec.Cwd, rec.Home = text("cwd"), text("home")
	rec.GitMissing = exists("git-missing")
	if s := text("git-safe-directory"); s != "" {
		rec.SafeDirectory = strings.Split(s, "\n")
	}
	rec.GitUserName, rec.GitUserEmail = text("git-user-name"), text("git-user-email")
	rec.GitRepoOK, rec.GitRepoError = exists("git-repo-ok"), text("git-repo-error")
	if s := text("env"); s != "" {
		rec.EnvNames = strings.Split(s, "\n")
	}
	rec.VerdictWritten, rec.VerdictError = exists("verdict-written"), text("verdict-error")
	return rec, err
}

func splitNUL(b []byte) []string {
	if len(b) == 0 {
		return []string{}
	}
	b = bytes.TrimSuffix(b, []byte{0})
	parts := bytes.Split(b, []byte{0})
	out := make([]string, len(parts))
	for i, p := range parts {
		out[i] = string(p)
	}
	return out
}
