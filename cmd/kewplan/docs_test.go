package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestDocs keeps README.md, CONTRIBUTING.md and docs/*.md true (CONTRIBUTING.md, "The documentation and its
// test"): every offline kewplan command in their code blocks runs and exits as documented, every relative link
// resolves, and no page speaks of history.
func TestDocs(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	pages := docPages(t, root)
	t.Run("Commands", func(t *testing.T) { testDocCommands(t, root, pages) })
	t.Run("Links", func(t *testing.T) { testDocLinks(t, root, pages) })
	t.Run("History", func(t *testing.T) { testDocHistory(t, pages) })
}

// docPage is one markdown file of the documentation.
type docPage struct {
	rel   string // path relative to the repository root, e.g. docs/ci.md
	lines []string
}

func docPages(t *testing.T, root string) []docPage {
	t.Helper()
	names := []string{"README.md", "CONTRIBUTING.md"}
	more, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range more {
		names = append(names, filepath.ToSlash(strings.TrimPrefix(m, root+string(filepath.Separator))))
	}
	if len(more) == 0 {
		t.Fatal("no docs/*.md found")
	}
	var pages []docPage
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(root, n))
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, docPage{rel: n, lines: strings.Split(string(b), "\n")})
	}
	return pages
}

// codeBlock is a fenced code block: its info string, first line number (1-based) and lines, unindented.
type codeBlock struct {
	info  string
	line  int
	lines []string
}

var fencePattern = regexp.MustCompile("^(\\s*)(```+|~~~+)\\s*([A-Za-z0-9_+-]*)")

// splitPage returns a page's fenced code blocks and, for every line, whether it lies inside one (fences included).
func splitPage(p docPage) (blocks []codeBlock, inCode []bool) {
	inCode = make([]bool, len(p.lines))
	var cur *codeBlock
	var fence, indent string
	for i, line := range p.lines {
		if cur == nil {
			if m := fencePattern.FindStringSubmatch(line); m != nil {
				cur = &codeBlock{info: m[3], line: i + 2}
				indent, fence = m[1], m[2]
				inCode[i] = true
			}
			continue
		}
		inCode[i] = true
		if strings.HasPrefix(strings.TrimSpace(line), fence) && strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(line), fence[:1])) == "" {
			blocks = append(blocks, *cur)
			cur = nil
			continue
		}
		cur.lines = append(cur.lines, strings.TrimPrefix(line, indent))
	}
	return blocks, inCode
}

var (
	// assignmentsPattern matches the NAME=value words a shell line may start with.
	assignmentsPattern = regexp.MustCompile(`^(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)*`)
	// plainAssignment is a line that only sets a shell variable, kept as a prefix of the block's later commands.
	plainAssignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=\S*$`)
	// kewplanPrefix is how the docs invoke kewplan.
	kewplanPrefix = regexp.MustCompile(`^(?:kewplan|bin/kewplan|go run \./cmd/kewplan)(?:\s|$)`)
	// expectPattern is the convention for a documented exit status: a trailing comment starting "exit N" or "exits N".
	expectPattern = regexp.MustCompile(`^exits?\s+(\d+)\b`)
	// placeholderPattern finds words that stand for something the reader fills in.
	placeholderPattern = regexp.MustCompile(`(^|[\s=])(RUN|IMAGE|PATH|PLANFILE|FILE|NODE|NAME|DIR)(\s|$)|…|\$EDITOR`)
)

// docCommand is one kewplan command line of a code block.
type docCommand struct {
	where  string // file:line
	shell  string // what sh -c runs
	want   int    // the exit status the docs give
	skip   string // why it is not run; "" to run it
	source string
}

// blockCommands extracts a block's kewplan commands in order.
func blockCommands(page string, b codeBlock) []docCommand {
	switch b.info {
	case "", "sh", "bash", "shell", "console":
	default:
		return nil
	}
	var cmds []docCommand
	var prefix []string
	for i := 0; i < len(b.lines); i++ {
		start := i
		line := strings.TrimSpace(b.lines[i])
		for strings.HasSuffix(line, `\`) && i+1 < len(b.lines) {
			i++
			line = strings.TrimSuffix(line, `\`) + " " + strings.TrimSpace(b.lines[i])
		}
		code, comment := splitComment(line)
		if plainAssignment.MatchString(code) {
			prefix = append(prefix, code)
			continue
		}
		assigns := assignmentsPattern.FindString(code)
		rest := code[len(assigns):]
		loc := kewplanPrefix.FindStringIndex(rest)
		if loc == nil {
			continue
		}
		rest = strings.TrimSpace("kewplan " + rest[loc[1]:])
		c := docCommand{
			where:  fmt.Sprintf("%s:%d", page, b.line+start),
			shell:  strings.Join(append(append([]string{}, prefix...), assigns+rest), "; "),
			source: line,
		}
		if m := expectPattern.FindStringSubmatch(strings.TrimSpace(comment)); m != nil {
			c.want, _ = strconv.Atoi(m[1])
		}
		c.skip = skipReason(rest)
		cmds = append(cmds, c)
	}
	return cmds
}

// splitComment cuts a shell line at its first # that starts a word outside quotes.
func splitComment(line string) (code, comment string) {
	var quote rune
	for i, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t'):
			return strings.TrimSpace(line[:i]), line[i+1:]
		}
	}
	return strings.TrimSpace(line), ""
}

// offlineCommands are the subcommands that run without Docker, a cluster or a recorded run.
var offlineCommands = map[string]bool{
	"plan": true, "validate": true, "fmt": true, "show": true, "graph": true, "render": true, "diff": true,
	"telemetry": true, "logs": true, "runners": true, "pricing": true, "version": true, "help": true,
}

// skipReason says why a command is not run, or "" to run it.
func skipReason(cmd string) string {
	words := strings.Fields(cmd)
	sub := ""
	for _, w := range words[1:] {
		if !strings.HasPrefix(w, "-") {
			sub = w
			break
		}
	}
	switch {
	case sub == "":
		return "" // kewplan --help, kewplan --version
	case !offlineCommands[sub]:
		return sub + " needs Docker, a cluster or a recorded run"
	case sub == "logs" && !strings.Contains(cmd, "--runner") && !strings.Contains(cmd, "--protocol"):
		return "logs of a run needs a recorded run"
	case hasPipe(cmd):
		return "pipes into another program"
	case placeholderPattern.MatchString(cmd):
		return "has a placeholder"
	}
	return ""
}

// hasPipe reports whether a command line has a | outside quotes.
func hasPipe(line string) bool {
	var quote rune
	for _, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '|':
			return true
		}
	}
	return false
}

func testDocCommands(t *testing.T, root string, pages []docPage) {
	ran, skipped := 0, 0
	for _, p := range pages {
		blocks, _ := splitPage(p)
		for _, b := range blocks {
			cmds := blockCommands(p.rel, b)
			var dir string
			for _, c := range cmds {
				if c.skip != "" {
					skipped++
					t.Logf("skip %s: %s (%s)", c.where, c.source, c.skip)
					continue
				}
				if dir == "" {
					dir = t.TempDir()
					for _, d := range []string{"examples", "runners/testdata/streams"} {
						copyTree(t, filepath.Join(root, d), filepath.Join(dir, d))
					}
				}
				ran++
				t.Logf("run  %s: %s", c.where, c.shell)
				got, out := runDocCommand(t, dir, c.shell)
				if got != c.want {
					t.Errorf("%s: %s\nexit status %d, the docs say %d (mark another status with a trailing `# exit N`)\n%s",
						c.where, c.source, got, c.want, out)
				}
			}
		}
	}
	t.Logf("ran %d documented kewplan commands, skipped %d", ran, skipped)
	if ran == 0 {
		t.Error("no documented kewplan command was run")
	}
}

// runDocCommand runs one line with sh -c in dir; kewplan is on PATH through testscript.Main (see TestMain).
func runDocCommand(t *testing.T, dir, line string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", line)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NO_COLOR=1", "PAGER=cat", "KEWPLAN_DEBUG=")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &exit):
		return exit.ExitCode(), tail(string(out))
	default:
		t.Fatalf("run %q: %v", line, err)
		return -1, ""
	}
}

func tail(s string) string {
	if len(s) > 4000 {
		return "…" + s[len(s)-4000:]
	}
	return s
}

func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			if d.Name() == ".kewplan" || d.Name() == "work" {
				return filepath.SkipDir // state and repositories a local demo run left behind
			}
			return os.MkdirAll(dst, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

var (
	linkPattern       = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	inlineCodePattern = regexp.MustCompile("`[^`]*`")
	anchorTagPattern  = regexp.MustCompile(`<a id="([^"]+)">`)
	headingPattern    = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
)

// anchors returns the anchors of a page as GitHub makes them: each heading lower-cased, without punctuation but
// hyphens and underscores, spaces as hyphens, repeats numbered; and explicit <a id> tags.
func anchors(p docPage) map[string]bool {
	_, inCode := splitPage(p)
	set := map[string]bool{}
	seen := map[string]int{}
	for i, line := range p.lines {
		if inCode[i] {
			continue
		}
		for _, m := range anchorTagPattern.FindAllStringSubmatch(line, -1) {
			set[m[1]] = true
		}
		m := headingPattern.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
				b.WriteRune(r)
			}
		}
		slug := b.String()
		if n := seen[slug]; n > 0 {
			set[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			set[slug] = true
		}
		seen[slug]++
	}
	return set
}

func testDocLinks(t *testing.T, root string, pages []docPage) {
	byPath := map[string]docPage{}
	for _, p := range pages {
		byPath[p.rel] = p
	}
	checked := 0
	for _, p := range pages {
		_, inCode := splitPage(p)
		for i, line := range p.lines {
			if inCode[i] {
				continue
			}
			for _, m := range linkPattern.FindAllStringSubmatch(inlineCodePattern.ReplaceAllString(line, ""), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				where := fmt.Sprintf("%s:%d", p.rel, i+1)
				file, anchor, _ := strings.Cut(target, "#")
				rel := p.rel
				if file != "" {
					rel = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(p.rel), file)))
					if _, err := os.Stat(filepath.Join(root, rel)); err != nil {
						t.Errorf("%s: link %s: %v", where, target, err)
						continue
					}
				}
				if anchor == "" {
					continue
				}
				q, ok := byPath[rel]
				if !ok {
					b, err := os.ReadFile(filepath.Join(root, rel))
					if err != nil {
						t.Errorf("%s: link %s: %v", where, target, err)
						continue
					}
					q = docPage{rel: rel, lines: strings.Split(string(b), "\n")}
				}
				if !anchors(q)[anchor] {
					t.Errorf("%s: link %s: %s has no heading or <a id> for #%s", where, target, rel, anchor)
				}
			}
		}
	}
	t.Logf("checked %d relative links", checked)
}

var (
	historyPattern = regexp.MustCompile(`(?i)\bissue\s+#?[0-9]|\bthis session\b|\bprevious session\b`)
	hexPattern     = regexp.MustCompile(`\b[0-9a-f]{7,40}\b`)
	hasDigit       = regexp.MustCompile(`[0-9]`)
	hasHexLetter   = regexp.MustCompile(`[a-f]`)
)

func testDocHistory(t *testing.T, pages []docPage) {
	for _, p := range pages {
		_, inCode := splitPage(p)
		for i, line := range p.lines {
			where := fmt.Sprintf("%s:%d", p.rel, i+1)
			if m := historyPattern.FindString(line); m != "" {
				t.Errorf("%s: %q speaks of history; describe the software as it is (history belongs in git)", where, m)
			}
			if inCode[i] {
				continue
			}
			for _, h := range hexPattern.FindAllString(inlineCodePattern.ReplaceAllString(line, ""), -1) {
				if hasDigit.MatchString(h) && hasHexLetter.MatchString(h) {
					t.Errorf("%s: %q looks like a commit id; the docs describe the software, not its history", where, h)
				}
			}
		}
	}
}
