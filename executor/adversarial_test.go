//go:build linux

package executor

// The adversarial suite: every attack and fault of the security notes' checklist (§6) that applies to
// kewplan, tried against the real engine where the item needs it. Each test records one row per item (id, attack,
// expected, observed, pass) into the JSON-lines file named by $KEWPLAN_ADV_REPORT (or only logs it when unset);
// `make adversarial` runs these tests together with the existing tests that already cover an item and prints the
// table (internal/testtools/advreport). This file holds the shared machinery: rows, the hostile agent's image, a raw view of
// the Engine API for the inspect oracles, and small helpers.

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kewplan/kewplan/executor/engine"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/planner"
)

// advReportEnv names the JSON-lines file the rows are appended to.
const advReportEnv = "KEWPLAN_ADV_REPORT"

// advRow is one line of the report; internal/testtools/advreport reads the same shape.
type advRow struct {
	ID       string `json:"id"`
	Attack   string `json:"attack"`
	Expected string `json:"expected"`
	Observed string `json:"observed"`
	Pass     bool   `json:"pass"`
	NotTried string `json:"not_tried,omitempty"`
	Test     string `json:"test"`
}

var advReportMu sync.Mutex

// advCase collects what one test observed about one checklist item and writes its row when the test ends: the
// row passes only if the test did not fail, so a t.Error anywhere in the test marks the item failed.
type advCase struct {
	t        testing.TB
	row      advRow
	mu       sync.Mutex
	observed []string
	notTried string
}

func adv(t testing.TB, id, attack, expected string) *advCase {
	t.Helper()
	c := &advCase{t: t, row: advRow{ID: id, Attack: attack, Expected: expected, Test: t.Name()}}
	t.Cleanup(c.write)
	return c
}

// observe adds a fact to the row's observed column.
func (c *advCase) observe(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.observed = append(c.observed, fmt.Sprintf(format, args...))
}

// check records a fact and fails the test when ok is false.
func (c *advCase) check(ok bool, format string, args ...any) {
	c.t.Helper()
	msg := fmt.Sprintf(format, args...)
	if ok {
		c.observe("%s", msg)
		return
	}
	c.observe("FAILED: %s", msg)
	c.t.Errorf("%s: %s", c.row.ID, msg)
}

// skip records the item as not tried, with the reason, and skips the test.
func (c *advCase) skip(format string, args ...any) {
	c.t.Helper()
	c.mu.Lock()
	c.notTried = fmt.Sprintf(format, args...)
	c.mu.Unlock()
	c.t.Skip(c.notTried)
}

func (c *advCase) write() {
	c.mu.Lock()
	row := c.row
	row.Observed = strings.Join(c.observed, "; ")
	row.NotTried = c.notTried
	c.mu.Unlock()
	if c.t.Skipped() && row.NotTried == "" {
		row.NotTried = "skipped (see the test log)"
	}
	row.Pass = !c.t.Failed() && row.NotTried == ""
	line, err := json.Marshal(row)
	if err != nil {
		c.t.Errorf("report row: %v", err)
		return
	}
	path := os.Getenv(advReportEnv)
	if path == "" {
		c.t.Logf("adversarial row: %s", line)
		return
	}
	advReportMu.Lock()
	defer advReportMu.Unlock()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		c.t.Errorf("report row: %v", err)
		return
	}
	defer f.Close()
	if _, err := f.Write(append(line, '\n')); err != nil {
		c.t.Errorf("report row: %v", err)
	}
}

var hostileAgent testAgentImage

// hostileImage builds executor/testdata/adversarial/hostileagent into an image holding only that binary, running as
// 1001:1001, with a setuid-root copy of itself at /suid.
func hostileImage(t testing.TB, eng *engine.Engine) string {
	t.Helper()
	changes := []string{"USER 1001:1001", "WORKDIR /work", `ENTRYPOINT ["/hostile"]`}
	return hostileAgent.get(t, eng, "hostileagent", "./testdata/adversarial/hostileagent", strings.Join(changes, "\n"),
		func(ctx context.Context, tag string, bin []byte) error {
			// Imported from a tarball rather than built: a build step's setuid bit does not survive every storage
			// driver, an imported layer's does.
			var rootfs bytes.Buffer
			tw := tar.NewWriter(&rootfs)
			for _, h := range []*tar.Header{
				{Name: "hostile", Mode: 0o755, Size: int64(len(bin)), Typeflag: tar.TypeReg},
				{Name: "suid", Mode: 0o4755, Size: int64(len(bin)), Typeflag: tar.TypeReg},
				{Name: "work/", Mode: 0o755, Typeflag: tar.TypeDir, Uid: 1001, Gid: 1001},
				{Name: "tmp/", Mode: 0o1777, Typeflag: tar.TypeDir},
				{Name: "home/agent/", Mode: 0o700, Typeflag: tar.TypeDir, Uid: 1001, Gid: 1001},
			} {
				if err := tw.WriteHeader(h); err != nil {
					return err
				}
				if h.Typeflag == tar.TypeReg {
					if _, err := tw.Write(bin); err != nil {
						return err
					}
				}
			}
			if err := tw.Close(); err != nil {
				return err
			}
			return eng.ImportImage(ctx, tag, &rootfs, changes)
		})
}

// advFixture is the apply fixture with the hostile agent as the claude-code image.
func advFixture(t testing.TB) *fixture {
	t.Helper()
	f := newFixture(t)
	f.image = hostileImage(t, f.eng)
	return f
}

// advNode is one node block for fixture.config: a reviewer (role "reviewer") or a worker, with the prompt's
// directives and any extra attributes.
func advNode(name, role, prompt, extra string) string {
	roleLine := ""
	if role != "" {
		roleLine = fmt.Sprintf("  role   = %q\n", role)
	}
	return fmt.Sprintf("\nnode \"%%[1]s%s\" {\n  runner = \"claude-code\"\n%s  model  = \"claude-sonnet-4-5\"\n  repo   = %%[2]q\n  prompt = %q\n%s}\n",
		name, roleLine, prompt, extra)
}

// agentReport returns the last "adv" report the hostile agent put in a node's stdout log.
func agentReport(t testing.TB, res ledger.NodeResult) map[string]any {
	t.Helper()
	if res.StdoutLog == "" {
		t.Fatalf("node %s never ran: %s: %s", res.Node, res.Status, res.Reason)
	}
	f, err := os.Open(res.StdoutLog)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var report map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var ev struct {
			Subtype string         `json:"subtype"`
			Report  map[string]any `json:"report"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Subtype == "adv" {
			report = ev.Report
		}
	}
	if report == nil {
		t.Fatalf("the hostile agent of %s reported nothing (status %s: %s)", res.Node, res.Status, res.Reason)
	}
	return report
}

func reportString(r map[string]any, key string) string {
	switch v := r[key].(type) {
	case string:
		return v
	case nil:
		return ""
	default:
		return fmt.Sprint(v)
	}
}

// engineAPI is a raw, read-only view of the Engine API for the inspect oracles (CIS-style checks read fields the
// executor's typed wrappers deliberately do not expose). It speaks HTTP over the socket DOCKER_HOST names.
type engineAPI struct {
	c    *http.Client
	base string
}

func newEngineAPI(t testing.TB) *engineAPI {
	t.Helper()
	host := os.Getenv("DOCKER_HOST")
	if host == "" {
		host = "unix:///var/run/docker.sock"
	}
	u, err := url.Parse(host)
	if err != nil {
		t.Fatalf("DOCKER_HOST %q: %v", host, err)
	}
	switch u.Scheme {
	case "unix":
		sock := u.Path
		tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}}
		return &engineAPI{c: &http.Client{Transport: tr, Timeout: time.Minute}, base: "http://docker"}
	case "tcp", "http":
		return &engineAPI{c: &http.Client{Timeout: time.Minute}, base: "http://" + u.Host}
	default:
		t.Skipf("skipping: the raw Engine API view supports unix:// and tcp:// hosts, not %q", host)
		return nil
	}
}

// get decodes GET path into v; it returns the HTTP status.
func (e *engineAPI) get(t testing.TB, path string, v any) int {
	t.Helper()
	status, err := e.tryGet(path, v)
	if err != nil {
		t.Fatal(err)
	}
	return status
}

// tryGet is get for goroutines other than the test's (hooks), which must not call t.Fatal.
func (e *engineAPI) tryGet(path string, v any) (int, error) {
	resp, err := e.c.Get(e.base + "/v1.41" + path)
	if err != nil {
		return 0, fmt.Errorf("engine API GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return 0, fmt.Errorf("engine API GET %s: %w", path, err)
	}
	if resp.StatusCode == http.StatusOK && v != nil {
		if err := json.Unmarshal(body, v); err != nil {
			return 0, fmt.Errorf("engine API GET %s: %w", path, err)
		}
	}
	return resp.StatusCode, nil
}

// containersOfRun lists the ids of the agent containers carrying a run's label (not its egress proxy's).
func (e *engineAPI) containersOfRun(runID string) ([]string, error) {
	filters, _ := json.Marshal(map[string][]string{"label": {"kewplan.run=" + runID, planner.LabelNode}})
	var list []struct {
		ID string `json:"Id"`
	}
	if _, err := e.tryGet("/containers/json?all=1&filters="+url.QueryEscape(string(filters)), &list); err != nil {
		return nil, err
	}
	ids := make([]string, len(list))
	for i, c := range list {
		ids[i] = c.ID
	}
	return ids, nil
}

// startRecorder keeps the environment warnings apply reports with the run's start, besides what the fixture's
// recorder keeps.
type startRecorder struct {
	*recorder
	mu       sync.Mutex
	warnings []string
}

func (s *startRecorder) ApplyStart(e ApplyStartEvent) {
	s.mu.Lock()
	s.warnings = append(s.warnings, e.Warnings...)
	s.mu.Unlock()
	s.recorder.ApplyStart(e)
}

func (s *startRecorder) text() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.warnings, "\n")
}

// withStartRecorder is an apply tweak installing a startRecorder around the fixture's recorder.
func withStartRecorder(sr *startRecorder) func(*ApplyOptions) {
	return func(o *ApplyOptions) {
		sr.recorder = o.Hooks[0].(*recorder)
		o.Hooks = []Hook{sr}
	}
}

// checkoutOf is the checkout directory apply uses for a node of a run.
func (f *fixture) checkoutOf(runID, node string) string {
	return filepath.Join(f.stateDir, "checkouts", runID, node)
}
