package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/executor/statedir"
	"github.com/kewplan/kewplan/internal/redact"
	"github.com/kewplan/kewplan/runners"
	"github.com/kewplan/kewplan/transcript"
	"github.com/kewplan/kewplan/views"
)

// followInterval is how often --follow looks at the ledger and the logs for more, as tail -f does.
const followInterval = 200 * time.Millisecond

// runForm is `kewplan logs RUN [NODE…]`: the transcripts of a recorded run's nodes, read from the ledger and the
// logs under the state directory, read-only (an apply may be writing both).
func (c *LogsCmd) runForm(env *Env) error {
	if len(c.Args) == 0 {
		return errors.New("name a run (or latest): kewplan logs RUN [NODE…]; list the runs with kewplan runs; or render a recorded stream with --runner NAME FILE")
	}
	switch {
	case c.Model != "" || c.Node != "" || c.StderrFile != "":
		return errors.New("--model, --node and --stderr belong to a recorded stream (kewplan logs --runner NAME FILE); a run's nodes take theirs from the ledger")
	case c.Raw && c.JSON:
		return errors.New("--raw and --json cannot be combined: --raw prints the stream as stored, --json its normalised events")
	case c.Attempt < 0:
		return fmt.Errorf("--attempt %d: attempts are numbered from 1", c.Attempt)
	}
	dir := statedir.Dir{Root: c.StateDir}
	if dir.Root == "" {
		dir.Root = statedir.DefaultName
	}
	recoverState(env, dir.Root)
	l, err := openLedgerReadOnly(dir)
	if err != nil {
		return err
	}
	defer l.Close()
	runID, err := resolveRun(l, c.Args[0])
	if err != nil {
		return err
	}
	run, recs, err := recordedRun(l, runID)
	if err != nil {
		return err
	}
	names := c.Args[1:]
	if !c.Follow || run.Status != ledger.RunRunning {
		if err := checkNodeNames(runID, names, recs); err != nil {
			return err
		}
	}
	out := views.NewLogsOutput(env.streams(), views.LogsOutputOptions{Environ: env.Environ, NoPager: c.NoPager || c.Follow})
	lr := &logsRun{cmd: c, out: out, dir: dir, runID: runID, mask: credentialMasker(env.Environ)}
	if !c.Follow {
		// Both meters of the brokered attempts; a ledger from before the proxy metered has none to show.
		if ms, err := l.Meters(runID); err == nil {
			lr.meters = ms
		}
	}
	if c.Follow {
		err = lr.follow(l, names)
	} else {
		err = lr.show(selectNodes(recs, names))
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// openLedgerReadOnly opens an existing ledger for reading; it never creates one, never migrates, never locks.
func openLedgerReadOnly(dir statedir.Dir) (*ledger.Ledger, error) {
	path := dir.Ledger()
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("no run ledger at %s: nothing was applied with this state directory yet (use --state-dir to point at another)", path)
		}
		return nil, err
	}
	return ledger.OpenReadOnly(path)
}

// resolveRun turns `latest` into the newest run's id.
func resolveRun(l *ledger.Ledger, arg string) (string, error) {
	if arg != "latest" {
		return arg, nil
	}
	runs, err := l.Runs()
	if err != nil {
		return "", err
	}
	if len(runs) == 0 {
		return "", fmt.Errorf("no run recorded in %s yet: latest names nothing", l.Path())
	}
	return runs[0].ID, nil
}

// checkNodeNames reports a named node the run does not have, with the names it does.
func checkNodeNames(runID string, names []string, recs []ledger.NodeRecord) error {
	have := map[string]bool{}
	var all []string
	for _, r := range recs {
		have[r.Node] = true
		all = append(all, r.Node)
	}
	for _, n := range names {
		if !have[n] {
			if len(all) == 0 {
				return fmt.Errorf("run %s has no node %q: it recorded no node", runID, n)
			}
			return fmt.Errorf("run %s has no node %q; its nodes are %s", runID, n, strings.Join(all, ", "))
		}
	}
	return nil
}

// selectNodes keeps the named nodes in the ledger's order (the order they started, which is a dependency order:
// a node starts only after its dependencies ended), or all of them.
func selectNodes(recs []ledger.NodeRecord, names []string) []ledger.NodeRecord {
	if len(names) == 0 {
		return recs
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var out []ledger.NodeRecord
	for _, r := range recs {
		if want[r.Node] {
			out = append(out, r)
		}
	}
	return out
}

// nodeLogs returns where one attempt of a node's stdout and stderr are stored; attempt 0 is the node's last
// (its record's logs). The ledger records one pair of logs per node; a retried node's earlier attempts are
// stored beside them, where the state directory's layout (statedir) puts them.
func nodeLogs(dir statedir.Dir, rec ledger.NodeRecord, attempt int) (stdout, stderr string, err error) {
	stdout, stderr = rec.StdoutLog, rec.StderrLog
	if stdout == "" || !exists(stdout) {
		// A running node's row does not name its logs yet, and a relative state directory may have moved: the
		// layout finds them from the node's address, its latest attempt's first.
		stdout, stderr = dir.Logs(rec.RunID, rec.Node, "", 1)
		if last, lastErr := dir.Logs(rec.RunID, rec.Node, "", rec.Attempts); rec.Attempts > 1 && exists(last) {
			stdout, stderr = last, lastErr
		}
	}
	if attempt == 0 {
		return stdout, stderr, nil
	}
	if aOut, aErr := dir.Logs(rec.RunID, rec.Node, "", attempt); attempt > 1 && exists(aOut) {
		return aOut, aErr, nil
	}
	if attempt == 1 {
		first, firstErr := dir.Logs(rec.RunID, rec.Node, "", 1)
		if exists(first) {
			return first, firstErr, nil
		}
		return stdout, stderr, nil
	}
	return "", "", fmt.Errorf("node %s of run %s has no attempt %d: it ran once (attempt 1 is its only one)", rec.Node, rec.RunID, attempt)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// logsRun renders a run's nodes.
type logsRun struct {
	cmd   *LogsCmd
	out   *views.LogsOutput
	dir   statedir.Dir
	mask  *redact.Masker // applied to what the transcripts decode
	runID string
	// meters are the run's brokered attempts as both meters saw them (none when following, or in an older ledger).
	meters []ledger.NodeMeters
}

// header is what the ledger knows of a node before its transcript.
func (lr *logsRun) header(rec ledger.NodeRecord) views.LogsHeader {
	model := rec.ReportedModel
	if model == "" {
		model = rec.RoutedModel
	}
	h := views.LogsHeader{Node: rec.Node, Runner: rec.Runner, Model: model, Image: rec.Image, Status: rec.Status,
		Reason: rec.Reason, Attempt: lr.cmd.Attempt, Duration: rec.Duration()}
	for _, m := range lr.meters {
		if m.Node == rec.Node && (lr.cmd.Attempt == 0 || m.Attempt == lr.cmd.Attempt) {
			h.Meters = append(h.Meters, m)
		}
	}
	if rec.Status != ledger.StatusRunning && rec.Status != ledger.StatusPending && (rec.InputTokens+rec.OutputTokens > 0 || rec.CostUSD != nil) {
		h.Totals = &runners.RunTotals{InputTokens: rec.InputTokens, OutputTokens: rec.OutputTokens,
			CacheReadTokens: rec.CacheReadTokens, CacheWriteTokens: rec.CacheWriteTokens, CostUSD: rec.CostUSD}
	}
	return h
}

func footerExit(rec ledger.NodeRecord) *int {
	if rec.ExitCode == nil {
		return nil
	}
	code := int(*rec.ExitCode)
	return &code
}

// show renders each node's stored logs, one after another.
func (lr *logsRun) show(recs []ledger.NodeRecord) error {
	for _, rec := range recs {
		stdout, stderr, err := nodeLogs(lr.dir, rec, lr.cmd.Attempt)
		if err != nil {
			return err
		}
		if lr.cmd.Raw {
			if err := lr.raw(stdout); err != nil {
				return err
			}
			continue
		}
		if err := lr.transcript(rec, stdout, stderr); err != nil {
			return err
		}
	}
	return nil
}

func (lr *logsRun) raw(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil // a node that never ran has no stream
	}
	if err != nil {
		return fmt.Errorf("read log: %w", err)
	}
	defer f.Close()
	return lr.out.Raw(f)
}

func (lr *logsRun) transcript(rec ledger.NodeRecord, stdout, stderr string) error {
	view := lr.out.View(lr.cmd.JSON)
	if err := view.Header(lr.header(rec)); err != nil {
		return err
	}
	p, ok := transcript.New(rec.Node, rec.Protocol, rec.RoutedModel)
	if !ok {
		return fmt.Errorf("node %s: no transcript for protocol %q (render its log with kewplan logs --raw)", rec.Node, rec.Protocol)
	}
	p.Mask(lr.mask)
	footer := views.LogsFooter{ExitCode: footerExit(rec)}
	f, err := os.Open(stdout)
	switch {
	case errors.Is(err, os.ErrNotExist):
		// The node never started its container: its header (status and reason) is all there is.
		return view.Footer(views.LogsFooter{Totals: p.Totals(), ExitCode: footer.ExitCode})
	case err != nil:
		return fmt.Errorf("read log: %w", err)
	}
	err = transcript.Scan(f, p, view.Event)
	f.Close()
	if err != nil {
		return fmt.Errorf("read log %s: %w", stdout, err)
	}
	footer.Totals = p.Totals()
	if exists(stderr) {
		if err := readStderr(stderr, lr.cmd.JSON, p, view, &footer); err != nil {
			return err
		}
	}
	return view.Footer(footer)
}

// followed is one node of a run followed as it writes.
type followed struct {
	rec     ledger.NodeRecord
	view    views.LogsView
	parser  *transcript.Parser
	stream  *transcript.Stream
	stdout  *os.File // nil until the log exists
	stderr  string
	raw     []byte // --raw: the unterminated end of what was read
	started bool   // the header was printed
	done    bool
}

// follow streams the run's nodes as they write, until the run ends and every log is read to its end. It only
// reads: the ledger read-only (with a busy timeout), the logs from where it stopped, a bounded chunk at a time.
func (lr *logsRun) follow(l *ledger.Ledger, names []string) error {
	nodes := map[string]*followed{}
	var order []*followed
	var last *followed // the node whose lines were printed last
	defer func() {
		for _, n := range order {
			if n.stdout != nil {
				n.stdout.Close()
			}
		}
	}()
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	buf := make([]byte, 64<<10)
	for {
		// The statuses are read before the logs: a node already ended then has its whole log on disk, so
		// reading it to its end reads all of it.
		run, recs, err := l.Run(lr.runID)
		if err != nil {
			return err
		}
		runEnded := run.Status != ledger.RunRunning || !processAlive(run.PID)
		for _, rec := range recs {
			if len(want) > 0 && !want[rec.Node] {
				continue
			}
			n := nodes[rec.Node]
			if n == nil {
				n = &followed{}
				nodes[rec.Node] = n
				order = append(order, n)
			}
			n.rec = rec
		}
		for _, n := range order {
			if n.done {
				continue
			}
			ended := runEnded || (n.rec.Status != ledger.StatusRunning && n.rec.Status != ledger.StatusPending)
			if err := lr.pump(n, &last, buf); err != nil {
				return err
			}
			if ended {
				if err := lr.finish(n, &last); err != nil {
					return err
				}
			}
		}
		if runEnded {
			if len(names) > 0 {
				return checkNodeNames(lr.runID, names, recs)
			}
			return nil
		}
		time.Sleep(followInterval)
	}
}

// processAlive reports whether the apply that recorded a run as running still runs: a killed apply leaves its
// run `running` until the next command marks it interrupted, and following it must still end.
func processAlive(pid int) bool {
	if pid <= 0 {
		return true
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// start prints a node's header the first time it has something to show, or the short one when it takes the
// screen back from another node.
func (lr *logsRun) start(n *followed, last **followed) error {
	if *last == n {
		return nil
	}
	*last = n
	if lr.cmd.Raw {
		return nil
	}
	if n.view == nil {
		n.view = lr.out.View(lr.cmd.JSON)
	}
	if !n.started {
		n.started = true
		h := lr.header(n.rec)
		if n.rec.Status == ledger.StatusRunning {
			h.Duration, h.Reason = 0, ""
		}
		return n.view.Header(h)
	}
	return n.view.Header(views.LogsHeader{Node: n.rec.Node, Continued: true})
}

// pump reads what the node's stdout log holds beyond what was read, a chunk at a time.
func (lr *logsRun) pump(n *followed, last **followed, buf []byte) error {
	if n.stdout == nil {
		stdout, stderr, err := nodeLogs(lr.dir, n.rec, lr.cmd.Attempt)
		if err != nil {
			return err
		}
		f, err := os.Open(stdout)
		if errors.Is(err, os.ErrNotExist) {
			return nil // not started yet
		}
		if err != nil {
			return fmt.Errorf("read log: %w", err)
		}
		n.stdout, n.stderr = f, stderr
		if !lr.cmd.Raw {
			p, ok := transcript.New(n.rec.Node, n.rec.Protocol, n.rec.RoutedModel)
			if !ok {
				return fmt.Errorf("node %s: no transcript for protocol %q (follow its log with kewplan logs --raw --follow)", n.rec.Node, n.rec.Protocol)
			}
			p.Mask(lr.mask)
			n.parser, n.stream = p, transcript.NewStream(p)
		}
	}
	emit := func(e transcript.Event) error {
		if err := lr.start(n, last); err != nil {
			return err
		}
		return n.view.Event(e)
	}
	for {
		k, err := n.stdout.Read(buf)
		if k > 0 {
			if lr.cmd.Raw {
				if werr := lr.rawLines(n, last, buf[:k]); werr != nil {
					return werr
				}
			} else if werr := n.stream.Write(buf[:k], emit); werr != nil {
				return werr
			}
		}
		switch {
		case err == io.EOF || (k == 0 && err == nil):
			return nil
		case err != nil:
			return fmt.Errorf("read log %s: %w", n.stdout.Name(), err)
		}
	}
}

// rawLines prints whole lines of a followed raw stream, so that two nodes' lines never mix and an escape is
// never cut; a line longer than the read buffer is printed as it comes.
func (lr *logsRun) rawLines(n *followed, last **followed, chunk []byte) error {
	n.raw = append(n.raw, chunk...)
	cut := len(n.raw)
	if len(n.raw) < 64<<10 {
		cut = strings.LastIndexByte(string(n.raw), '\n') + 1
	}
	if cut == 0 {
		return nil
	}
	if err := lr.start(n, last); err != nil {
		return err
	}
	err := lr.out.RawChunk(n.raw[:cut])
	n.raw = append(n.raw[:0], n.raw[cut:]...)
	return err
}

// finish ends a node whose log was read to its end: the last line, the stream's end, stderr and the footer.
func (lr *logsRun) finish(n *followed, last **followed) error {
	n.done = true
	if lr.cmd.Raw {
		if len(n.raw) > 0 {
			if err := lr.start(n, last); err != nil {
				return err
			}
			err := lr.out.RawChunk(n.raw)
			n.raw = nil
			return err
		}
		return nil
	}
	if n.stream == nil {
		// It never wrote a log (skipped, or failed before its container): its header says why.
		p, ok := transcript.New(n.rec.Node, n.rec.Protocol, n.rec.RoutedModel)
		if !ok {
			p, _ = transcript.New(n.rec.Node, "claude-code", "")
		}
		p.Mask(lr.mask)
		n.parser, n.stream = p, transcript.NewStream(p)
	}
	emit := func(e transcript.Event) error {
		if err := lr.start(n, last); err != nil {
			return err
		}
		return n.view.Event(e)
	}
	if err := n.stream.End(emit); err != nil {
		return err
	}
	if err := lr.start(n, last); err != nil {
		return err
	}
	footer := views.LogsFooter{Totals: n.parser.Totals(), ExitCode: footerExit(n.rec), Status: n.rec.Status}
	if n.stderr != "" && exists(n.stderr) {
		if err := readStderr(n.stderr, lr.cmd.JSON, n.parser, n.view, &footer); err != nil {
			return err
		}
	}
	return n.view.Footer(footer)
}
