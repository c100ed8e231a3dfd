// Command fakeagent stands in for a coding agent in the executor's tests against the real engine. It is the
// image's entrypoint (FROM scratch, USER 1001:1001): it reads the prompt file the way the contract says
// (KEW_PROMPT_FILE, default /work/.kew-prompt.txt, exit 64 when missing or empty), and the prompt's first lines,
// `key=value`, choose what it does:
//
//	mode=succeed   stream claude-code NDJSON ending in a result event, exit 0 (the default)
//	mode=fail      stream an error result, say why on stderr, exit 3
//	mode=apierror  stream claude-code's answer to an overloaded API (a synthetic `API Error: 529` message and an
//	               error result with api_error_status 529), exit 1 as the CLI does
//	mode=hang      stream the init event, then block forever
//	mode=huge      print one 20 MiB line, then a normal run
//	mode=garbage   print invalid JSON, NULs, invalid UTF-8 and terminal escapes, then a normal run
//	mode=probe     probe the hardening from inside and report it in a system event, then a normal run
//	mode=leak      echo ANTHROPIC_API_KEY's value in the session id, the model and on stderr, exit 1
//	mode=echo      echo ANTHROPIC_API_KEY's value raw, base64- and URL-encoded in its text, a tool call and its
//	               result, and on stderr, then a normal run
//	mode=gate      say "waiting for the gate", then wait until the file /work/.kew-gate exists, then a normal run
//	mode=verdict   write /work/.kew-review-verdict.json with verdict=<v>, then a normal run
//	mode=egress    CONNECT through HTTPS_PROXY to targets=host:port,... and report (see egress.go), then a normal run
//	mode=commit    commit file=<name> with content=<text> by writing git objects itself, then a normal run
//	mode=turns     stream turns=N assistant messages (ids msg_turn_1…), each as blocks=K content blocks repeating the
//	               message's usage=I,O[,CR,CW] (real counts; "none" omits usage), pausing gap=D between turns, then a
//	               normal run (sleep=1h then makes it wait to be killed)
//	commits=N      with any mode, first: make N commits (work-1.txt … work-N.txt), as mode=commit does
//	edit=NAME:TEXT with any mode, first: write NAME with TEXT and leave it uncommitted
//	link=NAME:PATH with any mode, first: make NAME a symbolic link to PATH (a host path, say), uncommitted
//	fifo=NAME      with any mode, first: make NAME a FIFO, uncommitted
//	sparse=NAME:N  with any mode, first: make NAME a sparse file of N bytes, uncommitted
//	final_usage=none   the closing assistant message carries no usage
//	tokens=I,O,CR,CW   usage figures of the result event (default 11,22,33,44; "none" omits usage and modelUsage)
//	gate=first     with any mode, first (before every other directive): wait for the gate as mode=gate does
//	probe=1        with any mode: first report the probe (as mode=probe does), so one run both probes and works
//	dial=H:P,...   with any mode, first: report, in a system event "netprobe", whether a direct TCP connection (no
//	               proxy) to each target opens within 3 s, and with dns=SERVER:PORT whether that DNS server answers
//	               a query for dnsname=NAME (default kubernetes.default.svc.cluster.local)
//	cost=F             total_cost_usd of the result event (default 0.0125; "none" omits it)
//	session=S          session id (default "fake-session")
//	sleep=D            sleep D (a Go duration) before the result
//
// The routed model comes from the `--model` argument, as the contract's "$@" slot delivers it.
package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kewplan/kewplan/internal/gitobj"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "--noop" {
		os.Exit(0) // the probe executes a copy of itself to test exec permissions
	}
	if networkCommand(os.Args) {
		return
	}
	promptPath := os.Getenv("KEW_PROMPT_FILE")
	if promptPath == "" {
		promptPath = "/work/.kew-prompt.txt"
	}
	prompt, err := os.ReadFile(promptPath)
	if err != nil || len(bytes.TrimSpace(prompt)) == 0 {
		fmt.Fprintf(os.Stderr, "fakeagent: prompt file %s is missing or empty: %v\n", promptPath, err)
		os.Exit(64)
	}
	opts := parse(string(prompt))
	model := "unknown-model"
	for i, a := range os.Args {
		if a == "--model" && i+1 < len(os.Args) {
			model = os.Args[i+1]
		}
	}
	session := opts.get("session", "fake-session")
	if opts.get("mode", "") == "leak" {
		// A hostile agent echoes its credential where kewplan reads strings from it.
		secret := os.Getenv("ANTHROPIC_API_KEY")
		emit(map[string]any{"type": "system", "subtype": "init", "session_id": "leak-" + secret, "model": "m-" + secret})
		fmt.Fprintln(os.Stderr, "the key is", secret)
		os.Exit(1)
	}
	emit(map[string]any{"type": "system", "subtype": "init", "session_id": session, "model": model, "cwd": mustGetwd()})
	assistant := func(id string, content ...any) {
		emit(map[string]any{"type": "assistant", "session_id": session, "message": map[string]any{
			"id": id, "model": model, "content": content, "usage": map[string]any{"input_tokens": 1, "output_tokens": 1}}})
	}

	if opts.get("gate", "") == "first" {
		waitGate(assistant)
	}
	if opts.get("dial", "") != "" || opts.get("dns", "") != "" {
		emit(map[string]any{"type": "system", "subtype": "netprobe", "session_id": session, "netprobe": netprobe(opts)})
	}
	if opts.get("probe", "") == "1" {
		emit(map[string]any{"type": "system", "subtype": "probe", "session_id": session, "probe": probe()})
	}
	if err := leaveWork(opts); err != nil {
		fmt.Fprintln(os.Stderr, "fakeagent:", err)
		os.Exit(7)
	}
	switch mode := opts.get("mode", "succeed"); mode {
	case "succeed":
	case "fail":
		emitResult(opts, session, model, true)
		fmt.Fprintln(os.Stderr, "fakeagent: failing as asked")
		os.Exit(3)
	case "apierror":
		apiErrorExit(session)
	case "hang":
		fmt.Fprintln(os.Stderr, "fakeagent: hanging as asked")
		for {
			time.Sleep(time.Hour) // a bare select{} would be a detected deadlock, not a hang
		}
	case "huge":
		line := bytes.Repeat([]byte("x"), 20<<20)
		os.Stdout.Write(append(line, '\n'))
	case "garbage":
		os.Stdout.WriteString("this is not json\n")
		os.Stdout.Write([]byte("{\"type\":\"assistant\",\x00\"broken\n"))
		os.Stdout.Write([]byte{0xff, 0xfe, 0xfd, '\n'})
		os.Stdout.WriteString("\x1b[2J\x1b]52;c;ZXZpbA==\x07{\"type\":\"nonsense\"}\n")
		fmt.Fprintln(os.Stderr, "\x1b[31mred stderr\x1b[0m")
	case "echo":
		secret := os.Getenv("ANTHROPIC_API_KEY")
		forms := secret + " " + base64.StdEncoding.EncodeToString([]byte(secret)) + " " + url.QueryEscape(secret)
		assistant("msg_echo", map[string]any{"type": "text", "text": "my key: " + forms})
		assistant("msg_echo", map[string]any{"type": "tool_use", "id": "toolu_echo", "name": "Bash", "input": map[string]any{"command": "echo " + secret}})
		emit(map[string]any{"type": "user", "session_id": session, "message": map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "tool_result", "tool_use_id": "toolu_echo", "content": forms}}}})
		os.Stdout.WriteString("not json: " + forms + "\n")
		fmt.Fprintln(os.Stderr, "stderr:", forms)
	case "gate":
		waitGate(assistant)
	case "egress":
		egressMode(opts, session)
	case "model":
		modelMode(session, model)
		if v := opts.get("verdict", ""); v != "" {
			b, _ := json.Marshal(map[string]any{"verdict": v, "summary": "fake review", "findings": []any{}})
			if err := os.WriteFile("/work/.kew-review-verdict.json", b, 0o644); err != nil {
				fmt.Fprintln(os.Stderr, "fakeagent:", err)
				os.Exit(5)
			}
		}
	case "modelcalls":
		modelCallsMode(opts, session, model)
		if opts.get("then", "") == "apierror" {
			apiErrorExit(session)
		}
		if v := opts.get("verdict", ""); v != "" {
			b, _ := json.Marshal(map[string]any{"verdict": v, "summary": "fake review", "findings": []any{}})
			if err := os.WriteFile("/work/.kew-review-verdict.json", b, 0o644); err != nil {
				fmt.Fprintln(os.Stderr, "fakeagent:", err)
				os.Exit(5)
			}
		}
	case "hangup":
		hangupMode(opts, session, model)
	case "probe":
		emit(map[string]any{"type": "system", "subtype": "probe", "session_id": session, "probe": probe()})
	case "verdict":
		v := map[string]any{"verdict": opts.get("verdict", "approve"), "summary": "fake review", "findings": []any{}}
		b, _ := json.Marshal(v)
		if err := os.WriteFile("/work/.kew-review-verdict.json", b, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "fakeagent:", err)
			os.Exit(5)
		}
	case "turns":
		streamTurns(opts, session, model)
	case "commit":
		name, content := opts.get("file", "FAKE.md"), opts.get("content", "written by fakeagent")
		sha, err := gitobj.CommitFile(mustGetwd(), name, content+"\n", "fakeagent: add "+name)
		if err != nil {
			fmt.Fprintln(os.Stderr, "fakeagent: commit:", err)
			os.Exit(6)
		}
		emit(map[string]any{"type": "assistant", "session_id": session, "message": map[string]any{
			"id": "msg_commit", "model": model, "content": []any{map[string]any{"type": "text", "text": "committed " + sha}},
			"usage": map[string]any{"input_tokens": 1, "output_tokens": 1}}})
	default:
		fmt.Fprintf(os.Stderr, "fakeagent: unknown mode %q\n", mode)
		os.Exit(2)
	}
	if d := opts.get("sleep", ""); d != "" {
		if dur, err := time.ParseDuration(d); err == nil {
			time.Sleep(dur)
		}
	}
	final := map[string]any{"id": "msg_1", "model": model, "content": []any{map[string]any{"type": "text", "text": "done"}},
		"usage": map[string]any{"input_tokens": 1, "output_tokens": 1}}
	if opts.get("final_usage", "") == "none" {
		delete(final, "usage")
	}
	emit(map[string]any{"type": "assistant", "session_id": session, "message": final})
	emitResult(opts, session, model, false)
}

// streamTurns writes mode=turns' assistant messages: every block of one message carries the same id and usage, as
// Claude Code writes them.
func streamTurns(o options, session, model string) {
	turns, _ := strconv.Atoi(o.get("turns", "1"))
	blocks, _ := strconv.Atoi(o.get("blocks", "1"))
	var use map[string]any
	if u := o.get("usage", "none"); u != "none" {
		var tok [4]int64
		for i, f := range strings.SplitN(u, ",", 4) {
			tok[i], _ = strconv.ParseInt(f, 10, 64)
		}
		use = map[string]any{"input_tokens": tok[0], "output_tokens": tok[1], "cache_read_input_tokens": tok[2], "cache_creation_input_tokens": tok[3]}
	}
	gap, _ := time.ParseDuration(o.get("gap", "0s"))
	for t := 1; t <= turns; t++ {
		if t > 1 && gap > 0 {
			time.Sleep(gap)
		}
		for b := 1; b <= blocks; b++ {
			msg := map[string]any{"id": fmt.Sprintf("msg_turn_%d", t), "model": model,
				"content": []any{map[string]any{"type": "text", "text": fmt.Sprintf("turn %d, block %d", t, b)}}}
			if use != nil {
				msg["usage"] = use
			}
			emit(map[string]any{"type": "assistant", "session_id": session, "message": msg})
		}
	}
}

// apiErrorExit streams claude-code's answer to an overloaded API and exits 1, as the CLI does.
func apiErrorExit(session string) {
	emit(map[string]any{"type": "assistant", "session_id": session, "error": "unknown", "is_api_error_message": true,
		"message": map[string]any{"id": "x", "model": "<synthetic>", "content": []any{map[string]any{"type": "text",
			"text": `API Error: 529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`}},
			"usage": map[string]any{"input_tokens": 0, "output_tokens": 0}}})
	emit(map[string]any{"type": "result", "subtype": "success", "is_error": true, "terminal_reason": "api_error",
		"api_error_status": 529, "api_error_type": "overloaded_error", "result": "API Error: 529 Overloaded",
		"total_cost_usd": 0.001, "num_turns": 1, "session_id": session,
		"usage": map[string]any{"input_tokens": 5, "output_tokens": 0}})
	fmt.Fprintln(os.Stderr, "API Error: 529 Overloaded")
	os.Exit(1)
}

type options map[string]string

func (o options) get(k, def string) string {
	if v, ok := o[k]; ok {
		return v
	}
	return def
}

func parse(prompt string) options {
	o := options{}
	for _, line := range strings.Split(prompt, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok || strings.ContainsAny(k, " \t") || k == "" {
			break // directives are the leading key=value lines; the rest is prose
		}
		o[k] = v
	}
	return o
}

func emit(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	os.Stdout.Write(append(b, '\n'))
}

func emitResult(o options, session, model string, isError bool) {
	tok := [4]int64{11, 22, 33, 44}
	if t := o.get("tokens", ""); t != "" {
		for i, f := range strings.SplitN(t, ",", 4) {
			tok[i], _ = strconv.ParseInt(f, 10, 64)
		}
	}
	r := map[string]any{
		"type": "result", "subtype": "success", "is_error": isError, "num_turns": 2, "session_id": session,
		"usage":      map[string]any{"input_tokens": tok[0], "output_tokens": tok[1], "cache_read_input_tokens": tok[2], "cache_creation_input_tokens": tok[3]},
		"modelUsage": map[string]any{model: map[string]any{"inputTokens": tok[0], "outputTokens": tok[1]}},
		"result":     "fake result",
	}
	if o.get("tokens", "") == "none" {
		delete(r, "usage")
		delete(r, "modelUsage")
	}
	if c := o.get("cost", "0.0125"); c != "none" {
		f, _ := strconv.ParseFloat(c, 64)
		r["total_cost_usd"] = f
	}
	emit(r)
}

func mustGetwd() string {
	wd, _ := os.Getwd()
	return wd
}

// probe reports the hardening as seen from inside the container.
func probe() map[string]any {
	out := map[string]any{}
	out["uid"] = os.Getuid()
	out["gid"] = os.Getgid()
	out["cwd"] = mustGetwd()

	err := os.WriteFile("/kewplan-probe", []byte("x"), 0o644)
	out["root_write_error"] = errString(err)
	out["root_write_erofs"] = errors.Is(err, syscall.EROFS)
	// gVisor's Sentry answers a write to the read-only root with EACCES, runc's kernel with EROFS: either is a refusal.
	out["root_write_refused"] = errors.Is(err, syscall.EROFS) || errors.Is(err, syscall.EACCES)
	version, _ := os.ReadFile("/proc/version")
	out["proc_version"] = strings.TrimSpace(string(version))

	status, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(status), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch k {
		case "CapEff", "CapBnd", "CapPrm", "NoNewPrivs", "Seccomp":
			out[k] = strings.TrimSpace(v)
		}
	}

	self, _ := os.ReadFile("/proc/self/exe")
	out["home_exec"] = tryExec("/home/agent/fakeagent-copy", self)
	out["tmp_exec"] = tryExec("/tmp/fakeagent-copy", self)
	out["home_write"] = errString(os.WriteFile("/home/agent/probe.txt", []byte("x"), 0o600))
	out["work_write"] = errString(os.WriteFile("/work/.probe-write", []byte("x"), 0o644))
	_ = os.Remove("/work/.probe-write")

	var names []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		names = append(names, k)
	}
	sort.Strings(names)
	out["env_names"] = names
	// The pod's resolver, as the agent's tools would use it: on Kubernetes a proxied pod has none.
	rctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupHost(rctx, "kubernetes.default.svc.cluster.local")
	out["dns_addrs"], out["dns_error"] = addrs, errString(err)
	return out
}

// tryExec copies the agent binary to path and runs it; "ok" or the error.
func tryExec(path string, binary []byte) string {
	if err := os.WriteFile(path, binary, 0o755); err != nil {
		return "write: " + err.Error()
	}
	cmd := exec.Command(path, "--noop")
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Run(); err != nil {
		return "exec: " + err.Error()
	}
	return "ok"
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// leaveWork makes the commits and the uncommitted files the directives ask for, before the mode runs.
func leaveWork(o options) error {
	n, _ := strconv.Atoi(o.get("commits", "0"))
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("work-%d.txt", i)
		if _, err := gitobj.CommitFile(mustGetwd(), name, fmt.Sprintf("work %d\n", i), "fakeagent: add "+name); err != nil {
			return fmt.Errorf("commit %s: %w", name, err)
		}
	}
	if name, text, ok := strings.Cut(o.get("edit", ""), ":"); ok {
		if err := os.WriteFile(name, []byte(text+"\n"), 0o644); err != nil {
			return err
		}
	}
	if name, target, ok := strings.Cut(o.get("link", ""), ":"); ok {
		if err := os.Symlink(target, name); err != nil {
			return err
		}
	}
	if name := o.get("fifo", ""); name != "" {
		if err := syscall.Mkfifo(name, 0o644); err != nil {
			return fmt.Errorf("mkfifo %s: %w", name, err)
		}
	}
	if name, size, ok := strings.Cut(o.get("sparse", ""), ":"); ok {
		n, err := strconv.ParseInt(size, 10, 64)
		if err != nil {
			return err
		}
		f, err := os.Create(name)
		if err != nil {
			return err
		}
		defer f.Close()
		return f.Truncate(n)
	}
	return nil
}

// netprobe tries what a pod's own network allows, around its proxy: direct connections, and a DNS server by its
// address. Each result is "ok" or the error.
func netprobe(o options) map[string]any {
	dials := map[string]string{}
	for _, target := range strings.Split(o.get("dial", ""), ",") {
		if target == "" {
			continue
		}
		c, err := net.DialTimeout("tcp", target, 3*time.Second)
		if err == nil {
			c.Close()
		}
		dials[target] = okOr(err)
	}
	out := map[string]any{"dial": dials}
	if server := o.get("dns", ""); server != "" {
		r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "udp", server)
		}}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		addrs, err := r.LookupHost(ctx, o.get("dnsname", "kubernetes.default.svc.cluster.local"))
		out["dns"], out["dns_addrs"] = okOr(err), addrs
	}
	return out
}

func okOr(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// waitGate says "waiting for the gate", waits until the file /work/.kew-gate exists, and says "through the gate".
func waitGate(assistant func(id string, content ...any)) {
	assistant("msg_gate", map[string]any{"type": "text", "text": "waiting for the gate"})
	for {
		if _, err := os.Stat("/work/.kew-gate"); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond) // the agent's own wait for its input, like any process polling
	}
	assistant("msg_gate2", map[string]any{"type": "text", "text": "through the gate"})
}
