// Command kew-demo-agent is a tiny stand-in for a coding agent, for kewplan's demo. It honours the container
// entrypoint contract without a shell, git or a model: it is the image's entrypoint (FROM scratch, uid 1001),
// reads the prompt from /work/.kew-prompt.txt (KEW_PROMPT_FILE overrides it; "-" reads stdin), takes the routed
// model from the `--model` argument, and prints NDJSON in claude-code's vocabulary ending with a `result` event.
//
// As a worker it commits a file (KEWPLAN_DEMO.md) to the mounted checkout by writing git objects itself. As a
// reviewer (its prompt names the verdict sidecar /work/.kew-review-verdict.json) it writes an approving verdict.
// Its token and cost figures are made up, derived from the prompt's size, so the ledger has something to show.
package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/kewplan/kewplan/internal/gitobj"
)

const sidecar = "/work/.kew-review-verdict.json"

func main() {
	prompt, err := readPrompt()
	if err != nil {
		fmt.Fprintln(os.Stderr, "kew-demo-agent:", err)
		os.Exit(64) // the contract's "no prompt" status
	}
	model := "unknown"
	for i, a := range os.Args {
		if a == "--model" && i+1 < len(os.Args) {
			model = os.Args[i+1]
		}
	}
	session := newSessionID()
	emit(map[string]any{"type": "system", "subtype": "init", "session_id": session, "model": model, "cwd": "/work",
		"tools": []string{"Write"}, "permissionMode": "bypassPermissions"})

	var text string
	if strings.Contains(prompt, sidecar) {
		text, err = review(prompt)
	} else {
		text, err = work(prompt)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kew-demo-agent:", err)
		emit(map[string]any{"type": "result", "subtype": "error_during_execution", "is_error": true, "session_id": session,
			"errors": []string{err.Error()}, "total_cost_usd": 0, "num_turns": 1})
		os.Exit(1)
	}
	in, out := int64(len(prompt)/4+1200), int64(len(text)/4+60)
	usage := map[string]any{"input_tokens": in, "output_tokens": 1, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}
	emit(map[string]any{"type": "assistant", "session_id": session, "parent_tool_use_id": nil, "message": map[string]any{
		"id": "msg_demo_1", "type": "message", "role": "assistant", "model": model, "stop_reason": nil,
		"content": []any{map[string]any{"type": "text", "text": text}}, "usage": usage}})
	cost := float64(in)*3e-6 + float64(out)*15e-6
	emit(map[string]any{"type": "result", "subtype": "success", "is_error": false, "num_turns": 1, "session_id": session,
		"result": text, "total_cost_usd": cost, "stop_reason": "end_turn", "terminal_reason": "completed",
		"usage":      map[string]any{"input_tokens": in, "output_tokens": out, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0},
		"modelUsage": map[string]any{model: map[string]any{"inputTokens": in, "outputTokens": out, "costUSD": cost}}})
}

func readPrompt() (string, error) {
	path := os.Getenv("KEW_PROMPT_FILE")
	if path == "" {
		path = "/work/.kew-prompt.txt"
	}
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(io.LimitReader(os.Stdin, 4<<20))
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return "", fmt.Errorf("prompt file %s: %w", path, err)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return "", fmt.Errorf("prompt file %s is empty", path)
	}
	return string(b), nil
}

// work commits KEWPLAN_DEMO.md, quoting the prompt's first line.
func work(prompt string) (string, error) {
	first, _, _ := strings.Cut(strings.TrimSpace(prompt), "\n")
	content := "# Written by kewplan's demo agent\n\nThe task was:\n\n> " + first + "\n"
	id, err := gitobj.CommitFile("/work", "KEWPLAN_DEMO.md", content, "demo: add KEWPLAN_DEMO.md\n\nWritten by kew-demo-agent inside a kewplan container.")
	if err != nil {
		return "", err
	}
	return "Committed KEWPLAN_DEMO.md as " + id + ".", nil
}

// review approves, writing the verdict sidecar at the mount root.
func review(prompt string) (string, error) {
	b, _ := json.Marshal(map[string]any{"verdict": "approve", "summary": "The demo change adds one documentation file; nothing to object to.", "findings": []any{}})
	if err := os.WriteFile(sidecar, b, 0o644); err != nil {
		return "", err
	}
	return "Approved; the verdict is in " + sidecar + ".", nil
}

func emit(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	os.Stdout.Write(append(b, '\n'))
}

func newSessionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
