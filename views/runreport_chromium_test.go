package views

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kewplan/kewplan/internal/testtools/testkit"
)

// chromium is Debian's headless Chromium (make test installs the package), or a skip (a failure under CI).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testkit.Need(t, "it opens the run report in headless Chromium, which is not installed (apt-get install chromium; make test installs it)")
	return ""
}

// runChromium runs headless Chromium on page with args, its console logged to stderr.
func runChromium(t *testing.T, bin, page string, args ...string) (stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
		"--user-data-dir=" + t.TempDir(), "--enable-logging=stderr", "--v=0", "--window-size=1400,2400"}
	cmd := exec.CommandContext(ctx, bin, append(append(base, args...), "file://"+page)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, errb.String())
	}
	return out.String(), errb.String()
}

var consoleMessage = regexp.MustCompile(`(?i)CONSOLE|Uncaught|Refused to|Content Security Policy|ERR_`)

// TestRunReportInChromium opens the report of a run with hostile node names and verdict texts in headless
// Chromium: the DOM Chromium built holds every node's name as text and no element the page did not write (no
// script, no image, no frame from an escaped string), nothing reaches the console (no script error, no refused
// fetch), and the screenshot shows the drawings (pixels of the status colours).
func TestRunReportInChromium(t *testing.T) {
	bin := chromium(t)
	r := syntheticReport(40)
	dir := t.TempDir()
	page := filepath.Join(dir, "run.html")
	if err := os.WriteFile(page, []byte(renderReport(t, r)), 0o644); err != nil {
		t.Fatal(err)
	}
	dom, logs := runChromium(t, bin, page, "--dump-dom")
	for _, bad := range []string{"<script", "<img", "<iframe"} {
		if strings.Contains(dom, bad) {
			t.Errorf("Chromium's DOM holds %s: an escaped string became markup", bad)
		}
	}
	for _, n := range r.Nodes {
		if strings.ContainsAny(n.Node, "\x1b\u202e") {
			continue // the page shows these through the escaper
		}
		if !strings.Contains(dom, escapeDOM(n.Node)) {
			t.Errorf("node %q is not in Chromium's DOM", n.Node)
		}
	}
	for _, line := range strings.Split(logs, "\n") {
		if consoleMessage.MatchString(line) {
			t.Errorf("Chromium's console: %s", line)
		}
	}
	shot := filepath.Join(dir, "run.png")
	_, logs = runChromium(t, bin, page, "--screenshot="+shot, "--hide-scrollbars")
	fh, err := os.Open(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v\n%s", err, logs)
	}
	defer fh.Close()
	img, err := png.Decode(fh)
	if err != nil {
		t.Fatal(err)
	}
	green, red := countColour(img, 0x3f, 0xb4, 0x63), countColour(img, 0xd6, 0x45, 0x45)
	if green < 500 || red < 100 {
		t.Errorf("the screenshot shows %d pixels of succeeded green and %d of failed red; the graph and timeline did not draw", green, red)
	}
	t.Logf("screenshot %dx%d: %d green, %d red pixels", img.Bounds().Dx(), img.Bounds().Dy(), green, red)
}

// escapeDOM is how Chromium serialises text: &, < and > escaped, quotes as they are.
func escapeDOM(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", "\u00a0", "&nbsp;").Replace(s)
}

// countColour counts the pixels within a small distance of r, g, b.
func countColour(img image.Image, r, g, b uint8) int {
	n := 0
	bd := img.Bounds()
	for y := bd.Min.Y; y < bd.Max.Y; y++ {
		for x := bd.Min.X; x < bd.Max.X; x++ {
			pr, pg, pb, _ := img.At(x, y).RGBA()
			if near(pr>>8, r) && near(pg>>8, g) && near(pb>>8, b) {
				n++
			}
		}
	}
	return n
}

func near(a uint32, b uint8) bool { d := int(a) - int(b); return d > -12 && d < 12 }
