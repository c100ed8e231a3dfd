//go:build linux

package executor

// C10 of the checklist: an agent fills the disk through its bind-mounted checkout. Docker has no quota for a bind
// mount, so kewplan's disk watchdog (diskwatch.go) must kill the container while the filesystem still has its
// headroom. The tests never fill the real disk: they set the headroom just below the free space there is now.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kewplan/kewplan/executor/docker"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/planner"
)

// availableBytes is what an unprivileged writer can still use on the filesystem holding path.
func availableBytes(t testing.TB, path string) int64 {
	t.Helper()
	d, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(d.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// TestAdvDiskFill (C10): the agent writes into /work without end; the watchdog kills it at the headroom.
func TestAdvDiskFill(t *testing.T) {
	c := adv(t, "C10", "write into the bind-mounted checkout until the disk is full",
		"kewplan's disk watchdog kills the container while the filesystem keeps its headroom; the node fails closed naming the free space and the threshold; no container, no prompt, the checkout (and what was written) removed; ledger row failed")
	f := advFixture(t)
	// The agent could write 1 GiB; the watchdog must stop it about 256 MiB in (a margin other writers on a busy
	// machine do not eat between the measurement and the node's start).
	cfg := f.config(advNode("fill", "reviewer", "mode=diskfill\nmib=1024\nverdict=approve", "  timeout = \"5m\"\n"))
	const margin = 256 << 20
	before := availableBytes(t, f.dir)
	minFree := before - margin
	sum, _, err := f.apply(context.Background(), cfg, func(o *ApplyOptions) { o.MinFreeBytes = minFree })
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum.RunID)
	name := f.node("fill")
	res := resultOf(t, sum, name)
	c.check(res.Status == ledger.StatusFailed && strings.Contains(res.Reason, "killed by kewplan's disk watchdog") &&
		strings.Contains(res.Reason, "below the "+docker.FormatBytes(minFree)) && strings.Contains(res.Reason, "available") &&
		strings.Contains(res.Reason, "free space on that filesystem"),
		"node %s: %s", res.Status, res.Reason)
	c.check(res.ExitCode != nil && *res.ExitCode == 137, "the container was killed (SIGKILL, exit %v), not left to finish", deref(res.ExitCode))
	r := agentReport(t, res)
	state := "still writing"
	if reportString(r, "done") == "true" {
		state = "all it meant to write, then held"
	}
	c.observe("the agent had reported %s MiB written into /work (%s) when it was killed; the headroom was set %d MiB below the %d MiB available",
		mib(reportString(r, "bytes")), state, margin>>20, before>>20)
	c.check(reportString(r, "error") == "", "the agent's writes never failed (the disk was never full): %q", reportString(r, "error"))
	_, err = os.Lstat(f.checkoutOf(sum.RunID, name))
	c.check(errors.Is(err, os.ErrNotExist), "the checkout and its fill file are removed (lstat: %v)", err)
	_, nodes := f.ledgerRun(sum.RunID)
	c.check(nodes[name].Status == ledger.StatusFailed && nodes[name].Reason == res.Reason && nodes[name].ExitCode != nil,
		"ledger row: %s, exit %v, same reason", nodes[name].Status, deref(nodes[name].ExitCode))
	c.check(sum.Status == ledger.RunFailed, "run %s", sum.Status)
	c.observe("%d MiB available after the apply", availableBytes(t, f.dir)>>20)
}

// TestAdvDiskHeadroomUnmet (C10): a node does not start on a filesystem already below the headroom.
func TestAdvDiskHeadroomUnmet(t *testing.T) {
	c := adv(t, "C10", "start a node on a filesystem already below the disk headroom",
		"refused before any container is created, with a preflight-style reason; ledger row failed; nothing left behind")
	f := advFixture(t)
	cfg := f.config(advNode("short", "reviewer", "mode=diskfill\nverdict=approve", "  timeout = \"5m\"\n"))
	minFree := availableBytes(t, f.dir) + 1<<30
	since := time.Now().Add(-time.Second)
	sum, _, err := f.apply(context.Background(), cfg, func(o *ApplyOptions) { o.MinFreeBytes = minFree })
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum.RunID)
	name := f.node("short")
	res := resultOf(t, sum, name)
	c.check(res.Status == ledger.StatusFailed && strings.HasPrefix(res.Reason, "not started: ") &&
		strings.Contains(res.Reason, "below the "+docker.FormatBytes(minFree)) && strings.Contains(res.Reason, "apply again"),
		"node %s: %s", res.Status, res.Reason)
	c.check(res.ExitCode == nil && res.StdoutLog == "" && len(res.Argv) == 0, "no container ran: no exit code, no log, no argv")
	events, err := containerEventsOfRun(t, sum.RunID, since, time.Now().Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	c.check(len(events) == 0, "the engine reports no container event for the run (%s)", strings.Join(events, ", "))
	_, nodes := f.ledgerRun(sum.RunID)
	c.check(nodes[name].Status == ledger.StatusFailed && nodes[name].Reason == res.Reason, "ledger row: %s", nodes[name].Status)
}

// containerEventsOfRun lists the engine's container events ("create", "start", ...) for a run's label between
// since and until.
func containerEventsOfRun(t testing.TB, runID string, since, until time.Time) ([]string, error) {
	api := newEngineAPI(t)
	filters, _ := json.Marshal(map[string][]string{"type": {"container"}, "label": {planner.LabelRun + "=" + runID, planner.LabelNode}}) // agents, not the run's egress proxy
	q := fmt.Sprintf("/v1.41/events?since=%d&until=%d&filters=%s", since.Unix(), until.Unix()+1, url.QueryEscape(string(filters)))
	resp, err := api.c.Get(api.base + q)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("engine API GET %s: %s", q, resp.Status)
	}
	var out []string
	dec := json.NewDecoder(bufio.NewReader(resp.Body))
	for dec.More() {
		var ev struct {
			Action string `json:"Action"`
		}
		if err := dec.Decode(&ev); err != nil {
			return nil, err
		}
		out = append(out, ev.Action)
	}
	return out, nil
}

// mib shows a JSON number of bytes (decoded as a float64 and printed by reportString) in MiB.
func mib(bytes string) string {
	n, err := strconv.ParseFloat(bytes, 64)
	if err != nil {
		return "?"
	}
	return fmt.Sprint(int64(n) >> 20)
}
