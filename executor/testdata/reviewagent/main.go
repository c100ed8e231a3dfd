// Command reviewagent stands in for a reviewer (or a worker) in the reviewer end-to-end tests: a FROM scratch
// image entrypoint that reads the prompt file as the contract says and obeys its leading `key=value` lines:
//
//	commit=NAME          commit NAME (content=TEXT) at the repository root, as a worker would
//	require=NAME         write a reject verdict unless /work/NAME exists (proves which commit is checked out)
//	sidecar=BASE64       write these exact bytes to the sidecar (at sidecar_path=REL, default the root name)
//	sidecar_link=TARGET  make the sidecar a symbolic link to TARGET
//	sidecar_fifo=1       make the sidecar a named pipe
//	stdout=BASE64        print these bytes as one stdout line before the result event
//
// It always streams a claude-code init event and a successful result event, and exits 0, so that only the sidecar
// decides the node's outcome.
package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/kewplan/kewplan/internal/gitobj"
)

const sidecar = "/work/.kew-review-verdict.json"

func main() {
	path := os.Getenv("KEW_PROMPT_FILE")
	if path == "" {
		path = "/work/.kew-prompt.txt"
	}
	prompt, err := os.ReadFile(path)
	if err != nil || strings.TrimSpace(string(prompt)) == "" {
		fmt.Fprintf(os.Stderr, "reviewagent: prompt file %s is missing or empty: %v\n", path, err)
		os.Exit(64)
	}
	opts := map[string]string{}
	for _, line := range strings.Split(string(prompt), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok || k == "" || strings.ContainsAny(k, " \t") {
			break
		}
		opts[k] = v
	}
	emit(map[string]any{"type": "system", "subtype": "init", "session_id": "review-session", "model": "review-model"})

	if name := opts["commit"]; name != "" {
		if _, err := gitobj.CommitFile("/work", name, opts["content"]+"\n", "reviewagent: add "+name); err != nil {
			fail("commit: %v", err)
		}
	}
	target := sidecar
	if p := opts["sidecar_path"]; p != "" {
		target = filepath.Join("/work", p)
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			fail("%v", err)
		}
	}
	switch {
	case opts["require"] != "" && !exists(filepath.Join("/work", opts["require"])):
		write(target, []byte(`{"verdict":"reject","summary":"the commit under review is not checked out"}`))
	case opts["sidecar"] != "":
		b, err := base64.StdEncoding.DecodeString(opts["sidecar"])
		if err != nil {
			fail("sidecar: %v", err)
		}
		write(target, b)
	case opts["sidecar_link"] != "":
		if err := os.Symlink(opts["sidecar_link"], target); err != nil {
			fail("%v", err)
		}
	case opts["sidecar_fifo"] != "":
		if err := syscall.Mkfifo(target, 0o644); err != nil {
			fail("%v", err)
		}
	}
	if s := opts["stdout"]; s != "" {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			fail("stdout: %v", err)
		}
		os.Stdout.Write(append(b, '\n'))
	}
	emit(map[string]any{
		"type": "result", "subtype": "success", "is_error": false, "num_turns": 1, "session_id": "review-session",
		"usage": map[string]any{"input_tokens": 1, "output_tokens": 1}, "total_cost_usd": 0.001, "result": "done",
	})
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

func write(p string, b []byte) {
	if err := os.WriteFile(p, b, 0o644); err != nil {
		fail("%v", err)
	}
}

func emit(v any) {
	b, _ := json.Marshal(v)
	os.Stdout.Write(append(b, '\n'))
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "reviewagent: "+format+"\n", args...)
	os.Exit(5)
}
