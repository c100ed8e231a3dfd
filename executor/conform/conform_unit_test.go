package conform

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kewplan/kewplan/runners"
)

func TestCredentialLike(t *testing.T) {
	got := map[string]bool{}
	for _, n := range []string{
		"ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "OPENROUTER_API_KEY", "GH_TOKEN", "GITHUB_PAT", "NPM_TOKEN",
		"AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "DB_PASSWORD", "ANTHROPIC_AUTH_TOKEN", "openai_apikey",
		"GIT_AUTHOR_NAME", "DISABLE_AUTOUPDATER", "GPG_KEY", "KEW_PROMPT_FILE", "PATH", "TOKENIZERS_PARALLELISM",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "HOME",
	} {
		got[n] = credentialLike(n)
	}
	want := map[string]bool{
		"ANTHROPIC_API_KEY": true, "CLAUDE_CODE_OAUTH_TOKEN": true, "OPENROUTER_API_KEY": true, "GH_TOKEN": true,
		"GITHUB_PAT": true, "NPM_TOKEN": true, "AWS_SECRET_ACCESS_KEY": true, "AWS_ACCESS_KEY_ID": true,
		"DB_PASSWORD": true, "ANTHROPIC_AUTH_TOKEN": true, "openai_apikey": true,
		"GIT_AUTHOR_NAME": false, "DISABLE_AUTOUPDATER": false, "GPG_KEY": false, "KEW_PROMPT_FILE": false,
		"PATH": false, "TOKENIZERS_PARALLELISM": false, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": false,
		"HOME": false,
	}
	// Every credential a built-in runner declares must look like one.
	for _, name := range runners.BuiltinNames() {
		r, _ := runners.Builtin(name)
		for _, n := range r.RequiredCredentials() {
			want[n], got[n] = true, credentialLike(n)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("credentialLike() mismatch (-want +got):\n%s", diff)
	}
}

func TestBakedHistoryCredentials(t *testing.T) {
	history := []string{ // newest first, as the engine returns it
		`/bin/sh -c #(nop)  ENTRYPOINT ["/usr/local/bin/kew-agent-entrypoint"]`,
		`/bin/sh -c #(nop)  ENV ANTHROPIC_API_KEY=sk-ant-secret`,
		`|2 NPM_TOKEN=npm_abc AGENT_INSTALL=npm /bin/sh -c npm install -g x`,
		`/bin/sh -c #(nop)  ENV GIT_AUTHOR_NAME=kew DISABLE_AUTOUPDATER=1`,
		`|1 GITHUB_TOKEN= /bin/sh -c true`,
		`/bin/sh -c export OPENROUTER_API_KEY="$KEY" && run`,
		`/bin/sh -c #(nop)  ENV ANTHROPIC_API_KEY=sk-ant-older`,
	}
	want := []string{"ANTHROPIC_API_KEY (build step 6 of 7)", "NPM_TOKEN (build step 5 of 7)"}
	if diff := cmp.Diff(want, bakedHistoryCredentials(history)); diff != "" {
		t.Errorf("bakedHistoryCredentials() mismatch (-want +got):\n%s", diff)
	}
}

// savedImage builds a `docker save` stream: each layer is name -> content, listed from the base up.
func savedImage(t *testing.T, gz bool, layers ...map[string]string) []byte {
	t.Helper()
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	var names []string
	for i, files := range layers {
		var layer bytes.Buffer
		lw := tar.NewWriter(&layer)
		for name, content := range files {
			if err := lw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg}); err != nil {
				t.Fatal(err)
			}
			lw.Write([]byte(content))
		}
		lw.Close()
		data := layer.Bytes()
		if gz {
			var z bytes.Buffer
			zw := gzip.NewWriter(&z)
			zw.Write(data)
			zw.Close()
			data = z.Bytes()
		}
		name := "blobs/sha256/" + strings.Repeat(string(rune('a'+i)), 64)
		names = append(names, name)
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg})
		tw.Write(data)
	}
	config := []byte(`{"architecture":"amd64","config":{}}`)
	tw.WriteHeader(&tar.Header{Name: "blobs/sha256/config", Mode: 0o644, Size: int64(len(config)), Typeflag: tar.TypeReg})
	tw.Write(config)
	manifest, _ := json.Marshal([]map[string]any{{"Config": "blobs/sha256/config", "Layers": names}})
	tw.WriteHeader(&tar.Header{Name: "manifest.json", Mode: 0o644, Size: int64(len(manifest)), Typeflag: tar.TypeReg})
	tw.Write(manifest)
	tw.Close()
	return out.Bytes()
}

func TestScanSaved(t *testing.T) {
	for _, gz := range []bool{false, true} {
		img := savedImage(t, gz,
			map[string]string{"etc/passwd": "root:x:0:0::/root:/bin/bash\n", "usr/bin/git": "ELF"},
			map[string]string{
				"./home/agent/.claude/.credentials.json": `{"claudeAiOauth":{}}`,
				"root/.npmrc":                            "registry=https://registry.npmjs.org/\n",
				"home/agent/.npmrc":                      "//registry.npmjs.org/:_authToken=npm_x\n",
				"etc/passwd":                             "root:x:0:0::/root:/bin/bash\nagent:x:1001:1001::/home/agent:/bin/bash\n",
				"home/agent/.ssh/id_ed25519.pub":         "ssh-ed25519 AAAA",
			},
			map[string]string{"home/agent/.claude/.wh..credentials.json": "", "home/agent/.git-credentials": "https://u:p@h"},
		)
		scan, err := scanSaved(bytes.NewReader(img))
		if err != nil {
			t.Fatal(err)
		}
		want := []string{
			"/home/agent/.claude/.credentials.json: Claude Code login credentials (layer 2 of 3)",
			"/home/agent/.npmrc: npm registry token (layer 2 of 3)",
			"/home/agent/.git-credentials: git credential store (layer 3 of 3)",
		}
		got := scan.CredentialFiles
		if diff := cmp.Diff(slices.Sorted(slices.Values(want)), slices.Sorted(slices.Values(got))); diff != "" {
			t.Errorf("scanSaved(gzip=%v) credential files mismatch (-want +got):\n%s", gz, diff)
		}
		if uid, ok := passwdUID(scan.Passwd, "agent"); !ok || uid != "1001" || scan.Layers != 3 {
			t.Errorf("scanSaved(gzip=%v): agent uid %q %v, %d layers; want the top-most /etc/passwd (uid 1001) of 3 layers", gz, uid, ok, scan.Layers)
		}
	}
}

// The probe's stream is what a real agent of each vocabulary prints: every line a JSON object that the runner's
// own meter reads, with a type the conform vocabulary check knows, ending in the terminal event where the
// vocabulary has one.
func TestProbeStreamSpeaksEachVocabulary(t *testing.T) {
	for _, name := range runners.BuiltinNames() {
		r, _ := runners.Builtin(name)
		shape, ok := agentShapes[r.Protocol()]
		if !ok {
			t.Errorf("runner %s (protocol %s) has no agent shape", name, r.Protocol())
			continue
		}
		m := r.NewMeter("routed")
		for _, line := range probeStream(r.Protocol(), "nonce") {
			var obj struct{ Type string }
			if err := json.Unmarshal([]byte(line), &obj); err != nil {
				t.Errorf("%s: probe line is not JSON: %v: %s", name, err, line)
			}
			if !slices.Contains(shape.Events, obj.Type) {
				t.Errorf("%s: probe line type %q is not in the vocabulary %v", name, obj.Type, shape.Events)
			}
			m.Line([]byte(line))
		}
		tot := m.Totals()
		if tot.UnparsedLines != 0 || tot.Events == 0 || tot.IsError {
			t.Errorf("%s: meter totals %+v: want events, no unparsed line, no error", name, tot)
		}
		if (r.Protocol() == "claude-code" || r.Protocol() == "hermes" || r.Protocol() == "pi" || r.Protocol() == "lemonade") && !tot.Finished {
			t.Errorf("%s: the probe stream does not end with the vocabulary's terminal event", name)
		}
	}
}

// The probe script runs on the host's sh against a checkout laid out like /work, so its records and what
// readProbe makes of them are checked without an engine.
func TestProbeScriptRecords(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh on this host")
	}
	root := t.TempDir()
	work := filepath.Join(root, "work")
	script, err := probeScript("claude-code", "n0nce", []string{"ANTHROPIC_API_KEY", "OPENROUTER_API_KEY"}, `{"v":"n0nce"}`)
	if err != nil {
		t.Fatal(err)
	}
	// Run it with /work rewritten to the temporary checkout.
	script = strings.ReplaceAll(script, "/work", work)
	if err := installProbe(work, "claude", script); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(root, "home")
	os.MkdirAll(home, 0o700)
	cmd := exec.Command(sh, filepath.Join(work, probeDir, "bin", "claude"), "--print", "--model", "m", "two words", "")
	cmd.Stdin = strings.NewReader("the prompt\n")
	cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "ANTHROPIC_API_KEY=dummy", "GIT_CONFIG_NOSYSTEM=1"}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("probe: %v\n%s", err, stderr.String())
	}
	rec, err := readProbe(work)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"--print", "--model", "m", "two words", ""}, rec.Argv); diff != "" {
		t.Errorf("probe argv mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"ANTHROPIC_API_KEY"}, rec.EnvNames); diff != "" {
		t.Errorf("probe env names mismatch (-want +got):\n%s", diff)
	}
	if string(rec.Stdin) != "the prompt\n" || !rec.Reached || rec.Home != home || !rec.VerdictWritten {
		t.Errorf("probe record %+v: want the prompt on stdin, reached, HOME %s, verdict written", rec, home)
	}
	if b, _ := os.ReadFile(filepath.Join(work, ".kew-review-verdict.json")); string(b) != `{"v":"n0nce"}` {
		t.Errorf("sidecar = %q", b)
	}
	want := strings.ReplaceAll(strings.Join(probeStream("claude-code", "n0nce"), "\n")+"\n", "/work", work)
	if diff := cmp.Diff(want, stdout.String()); diff != "" {
		t.Errorf("probe stdout mismatch (-want +got):\n%s", diff)
	}
}

func TestProbeScriptRefusesBadNames(t *testing.T) {
	if _, err := probeScript("claude-code", "n", []string{"A; rm -rf /"}, "{}"); err == nil {
		t.Error("probeScript accepted a name that is not an environment variable name")
	}
	if _, err := probeScript("claude-code", "n", nil, "it's"); err == nil {
		t.Error("probeScript accepted a sidecar with a quote")
	}
}

func TestIndexSeq(t *testing.T) {
	for _, tc := range []struct {
		s, seq []string
		want   int
	}{
		{[]string{"--print", "a", "b"}, []string{"a", "b"}, 1},
		{[]string{"a", "x", "b"}, []string{"a", "b"}, -1},
		{[]string{"a"}, []string{"a", "b"}, -1},
		{[]string{"a"}, nil, 0},
	} {
		if got := indexSeq(tc.s, tc.seq); got != tc.want {
			t.Errorf("indexSeq(%q, %q) = %d, want %d", tc.s, tc.seq, got, tc.want)
		}
	}
}
