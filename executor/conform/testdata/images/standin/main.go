// Command standin answers as an agent CLI inside kewplan's test images, where no provider is reachable. It reads
// the prompt from stdin the way the real CLI does and prints a short, well-formed stream in that CLI's vocabulary:
// run as `claude` it speaks claude-code's stream-json, run as `opencode` it speaks opencode's `run --format json`.
// Diagnostics go to stderr, never stdout.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

func main() { os.Exit(run(filepath.Base(os.Args[0]), os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

func run(name string, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	prompt, err := io.ReadAll(stdin)
	if err != nil {
		fmt.Fprintf(stderr, "%s (stand-in): read stdin: %v\n", name, err)
		return 1
	}
	if len(strings.TrimSpace(string(prompt))) == 0 {
		fmt.Fprintf(stderr, "Error: Input must be provided either through stdin or as a prompt argument\n")
		return 1
	}
	model := flagValue(args, "--model", "-m")
	fmt.Fprintf(stderr, "%s (stand-in): %d prompt bytes, model %q\n", name, len(prompt), model)
	enc := json.NewEncoder(stdout)
	emit := func(v any) {
		if err := enc.Encode(v); err != nil {
			fmt.Fprintf(stderr, "%s (stand-in): write stdout: %v\n", name, err)
			os.Exit(1)
		}
	}
	text := fmt.Sprintf("stand-in read %d prompt bytes", len(prompt))
	switch name {
	case "opencode":
		const session = "ses_standin"
		emit(map[string]any{"type": "step_start", "timestamp": 1, "sessionID": session,
			"part": map[string]any{"id": "prt_1", "messageID": "msg_1", "sessionID": session, "type": "step-start"}})
		emit(map[string]any{"type": "text", "timestamp": 2, "sessionID": session,
			"part": map[string]any{"id": "prt_2", "messageID": "msg_1", "sessionID": session, "type": "text", "text": text}})
		emit(map[string]any{"type": "step_finish", "timestamp": 3, "sessionID": session,
			"part": map[string]any{"id": "prt_3", "messageID": "msg_1", "sessionID": session, "type": "step-finish",
				"reason": "stop", "cost": 0,
				"tokens": map[string]any{"total": 12, "input": 10, "output": 2, "reasoning": 0,
					"cache": map[string]any{"read": 0, "write": 0}}}})
	default: // claude
		const session = "00000000-0000-4000-8000-000000000000"
		emit(map[string]any{"type": "system", "subtype": "init", "session_id": session, "model": model,
			"cwd": cwd(), "tools": []string{}, "permissionMode": "bypassPermissions"})
		emit(map[string]any{"type": "assistant", "session_id": session, "parent_tool_use_id": nil,
			"message": map[string]any{"id": "msg_standin", "type": "message", "role": "assistant", "model": model,
				"content": []any{map[string]any{"type": "text", "text": text}},
				"usage":   map[string]any{"input_tokens": 10, "output_tokens": 1}}})
		emit(map[string]any{"type": "result", "subtype": "success", "is_error": false, "num_turns": 1,
			"session_id": session, "result": text, "total_cost_usd": 0,
			"usage": map[string]any{"input_tokens": 10, "output_tokens": 2,
				"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}})
	}
	return 0
}

// flagValue returns the value of the first of names in args ("--model M" or "--model=M"), or "".
func flagValue(args []string, names ...string) string {
	for i, a := range args {
		for _, n := range names {
			if a == n && i+1 < len(args) {
				return args[i+1]
			}
			if v, ok := strings.CutPrefix(a, n+"="); ok {
				return v
			}
		}
	}
	return ""
}

func cwd() string {
	d, err := os.Getwd()
	if err != nil {
		return ""
	}
	return d
}
