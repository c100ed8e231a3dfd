package views

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kewplan/kewplan/internal/testtools/golden"
	"github.com/kewplan/kewplan/transcript"
)

// renderLogs renders a recorded stream the way `kewplan logs --runner` does.
func renderLogs(t *testing.T, protocol string, in []byte, jsonLines bool, opts logsOptions) string {
	t.Helper()
	p, ok := transcript.New("node", protocol, "")
	if !ok {
		t.Fatalf("unknown protocol %q", protocol)
	}
	var out bytes.Buffer
	v := newLogsView(&out, jsonLines, opts)
	if err := v.Header(LogsHeader{Node: "node", Runner: protocol}); err != nil {
		t.Fatal(err)
	}
	if err := transcript.Scan(bytes.NewReader(in), p, v.Event); err != nil {
		t.Fatal(err)
	}
	if err := v.Footer(LogsFooter{Totals: p.Totals()}); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// TestLogsGolden renders every fixture stream of the transcript package as the human transcript, one golden
// file per stream (KEWPLAN_UPDATE=1 rewrites them).
func TestLogsGolden(t *testing.T) {
	files, _ := filepath.Glob("../transcript/testdata/streams/*/*.ndjson")
	if len(files) == 0 {
		t.Fatal("no fixture streams")
	}
	for _, file := range files {
		protocol := filepath.Base(filepath.Dir(file))
		name := protocol + "-" + strings.TrimSuffix(filepath.Base(file), ".ndjson")
		t.Run(name, func(t *testing.T) {
			in, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			got := renderLogs(t, protocol, in, false, logsOptions{})
			golden.Check(t, filepath.Join("testdata", "logs", name+".txt"), []byte(got))
		})
	}
}

// TestLogsHostileText: terminal escapes and bidi overrides from the stream are shown escaped in every place a
// stream string reaches the human view, never written raw; no colour unless asked.
func TestLogsHostileText(t *testing.T) {
	evil := "a\x1b]0;pwned\x07b\u202eevil\u2066c\u009bd"
	lines := []string{
		`{"type":"text","part":{"text":"` + jsonEscape(evil) + `\nline two\ttab"}}`,
		`{"type":"tool_use","part":{"tool":"bash","callID":"c","state":{"status":"error","input":{"command":"` + jsonEscape(evil) + `"},"output":"` + jsonEscape(evil) + `"}}}`,
		`{"type":"error","error":{"name":"X","data":{"message":"` + jsonEscape(evil) + `"}}}`,
		"garbage " + evil + "\xff",
	}
	got := renderLogs(t, "opencode", []byte(strings.Join(lines, "\n")+"\n"), false, logsOptions{})
	for _, bad := range []string{"\x1b", "\x07", "\u202e", "\u2066", "\u009b", "\xff"} {
		if strings.Contains(got, bad) {
			t.Errorf("output contains %q raw:\n%s", bad, got)
		}
	}
	for _, want := range []string{`a\x1b]0;pwned\x07b\u202eevil\u2066c\u009bd`, `\xff`, "line two\ttab", "▸ bash: a\\x1b", "✗ error: X: a\\x1b"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	colored := renderLogs(t, "opencode", []byte(lines[0]+"\n"), false, logsOptions{Color: true})
	if !strings.Contains(colored, "\x1b[1m") {
		t.Errorf("Color: true wrote no styling:\n%q", colored)
	}
}

func jsonEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteString(`\` + string(r))
		case r < 0x20:
			b.WriteString(`\u00` + string("0123456789abcdef"[r>>4]) + string("0123456789abcdef"[r&15]))
		default:
			b.WriteRune(r)
		}
	}
	return strings.ReplaceAll(b.String(), "\uFFFD", `\ufffd`)
}

func TestLogsToolResultTruncated(t *testing.T) {
	out := strings.Repeat("line\n", 12)
	var b bytes.Buffer
	v := newLogsView(&b, false, logsOptions{})
	v.Event(transcript.Event{Kind: transcript.KindToolResult, Output: out})
	want := strings.Repeat("    │ line\n", 5) + "    │ … 7 more lines\n"
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

func TestLogsFailedFooterShowsStderrTail(t *testing.T) {
	var b bytes.Buffer
	v := newLogsView(&b, false, logsOptions{})
	code := 1
	v.Footer(LogsFooter{ExitCode: &code, StderrTail: []string{"fatal: \x1b[2Jboom"}, StderrLines: 40})
	got := b.String()
	for _, want := range []string{"totals (failed)", "exit 1", "stderr, last 1 of 40 lines", `fatal: \x1b[2Jboom`} {
		if !strings.Contains(got, want) {
			t.Errorf("footer lacks %q:\n%s", want, got)
		}
	}
}
