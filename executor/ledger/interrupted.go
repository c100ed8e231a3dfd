package ledger

import (
	"database/sql"
	"fmt"
	"os"
	"time"
)

// interruptedMigration records who runs an apply (host, boot id and process start time beside the pid, so that a
// later command can tell a dead apply from a live one) and, on each node, what is needed to keep its work should
// that apply die: the repository it cloned and its path name under the state directory.
const interruptedMigration = `ALTER TABLE runs ADD COLUMN host TEXT NOT NULL DEFAULT '';
	ALTER TABLE runs ADD COLUMN boot_id TEXT NOT NULL DEFAULT '';
	ALTER TABLE runs ADD COLUMN process_start INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE node_runs ADD COLUMN repo TEXT NOT NULL DEFAULT '';
	ALTER TABLE node_runs ADD COLUMN slug TEXT NOT NULL DEFAULT '';`

// InterruptedRun is a run whose apply died without recording its end, as MarkInterrupted found it.
type InterruptedRun struct {
	ID      string
	Process Process
	// Since is the last thing recorded of the run (a node's start or end, an attempt, an egress decision, a
	// brokered request, a write to a node's log): when its apply was last known alive.
	Since time.Time
	// Nodes are the nodes that had not ended, now interrupted.
	Nodes []string
}

// MarkInterrupted marks every run still `running` whose apply is gone as `interrupted`, and its nodes that had not
// ended with it, each with the time of the last thing recorded of it (its ended_at) and a reason saying so. The
// caller holds the state directory's lock, which proves that no apply of this directory runs; alive is the
// second check (Process.Alive in production): a run whose recorded process still runs is left as it is (its
// lock file was removed or replaced under it) and returned in live.
func (l *Ledger) MarkInterrupted(alive func(Process) bool) (marked []InterruptedRun, live []InterruptedRun, err error) {
	err = l.tx(func(tx *sql.Tx) error {
		runs, err := runningRuns(tx)
		if err != nil {
			return err
		}
		for _, r := range runs {
			if alive(r.Process) {
				live = append(live, r)
				continue
			}
			if err := markRunInterrupted(tx, &r); err != nil {
				return err
			}
			marked = append(marked, r)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return marked, live, nil
}

func runningRuns(tx *sql.Tx) ([]InterruptedRun, error) {
	rows, err := tx.Query(`SELECT id, pid, host, boot_id, process_start, started_at FROM runs WHERE status = ? ORDER BY started_at`, RunRunning)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []InterruptedRun
	for rows.Next() {
		var r InterruptedRun
		var started sql.NullString
		var start int64
		if err := rows.Scan(&r.ID, &r.Process.PID, &r.Process.Host, &r.Process.BootID, &start, &started); err != nil {
			return nil, err
		}
		r.Process.Start = uint64(start)
		if t := parseTS(started); t != nil {
			r.Since = *t
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// markRunInterrupted finds the last sign of life of the run and of each of its open nodes, and records them.
func markRunInterrupted(tx *sql.Tx, r *InterruptedRun) error {
	signs, err := nodeSigns(tx, r.ID)
	if err != nil {
		return err
	}
	for _, q := range []string{
		`SELECT MAX(time) FROM egress_denials WHERE run_id = ?`,
		`SELECT MAX(time) FROM broker_requests WHERE run_id = ?`,
	} {
		var s sql.NullString
		if err := tx.QueryRow(q, r.ID).Scan(&s); err != nil {
			return err
		}
		r.Since = later(r.Since, parseTS(s))
	}
	for _, n := range signs {
		r.Since = later(r.Since, &n.last)
	}
	for _, n := range signs {
		if n.status != StatusRunning && n.status != StatusPending {
			continue
		}
		since := n.last
		if since.IsZero() {
			since = r.Since
		}
		reason := fmt.Sprintf("interrupted: the apply that ran it (%s) ended without recording an outcome (killed, out of memory, or its machine went down); last recorded at %s",
			describeProcess(r.Process), since.UTC().Format(time.RFC3339))
		if _, err := tx.Exec(`UPDATE node_runs SET status = ?, reason = ?, ended_at = ? WHERE run_id = ? AND node = ?`,
			StatusInterrupted, reason, ts(since), r.ID, n.node); err != nil {
			return err
		}
		r.Nodes = append(r.Nodes, n.node)
	}
	_, err = tx.Exec(`UPDATE runs SET status = ?, ended_at = ? WHERE id = ?`, RunInterrupted, ts(r.Since), r.ID)
	return err
}

type nodeSign struct {
	node, status string
	last         time.Time
}

// nodeSigns is each node of a run with its status and the last time anything of it was recorded: its row's
// times, its attempts' and the last write to its current logs.
func nodeSigns(tx *sql.Tx, runID string) ([]nodeSign, error) {
	rows, err := tx.Query(`SELECT n.node, n.status, n.started_at, n.ended_at, n.stdout_log, n.stderr_log,
			(SELECT MAX(MAX(COALESCE(a.started_at, ''), COALESCE(a.ended_at, ''))) FROM node_attempts a WHERE a.run_id = n.run_id AND a.node = n.node)
		FROM node_runs n WHERE n.run_id = ? ORDER BY n.node`, runID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []nodeSign
	for rows.Next() {
		var s nodeSign
		var started, ended, attempt sql.NullString
		var stdout, stderr string
		if err := rows.Scan(&s.node, &s.status, &started, &ended, &stdout, &stderr, &attempt); err != nil {
			return nil, err
		}
		for _, t := range []*time.Time{parseTS(started), parseTS(ended), parseTS(attempt)} {
			s.last = later(s.last, t)
		}
		for _, log := range []string{stdout, stderr} {
			if log == "" {
				continue
			}
			if fi, err := os.Lstat(log); err == nil && fi.Mode().IsRegular() {
				t := fi.ModTime()
				s.last = later(s.last, &t)
			}
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

func later(a time.Time, b *time.Time) time.Time {
	if b != nil && b.After(a) {
		return *b
	}
	return a
}

// describeProcess names a recorded apply process for a reason: "kewplan pid 4242 on build-7".
func describeProcess(p Process) string {
	switch {
	case p.PID > 0 && p.Host != "":
		return fmt.Sprintf("kewplan pid %d on %s", p.PID, p.Host)
	case p.PID > 0:
		return fmt.Sprintf("kewplan pid %d", p.PID)
	}
	return "its kewplan process"
}

// recordCheckout writes a node row's repository and path name, in the transaction that (re)wrote the row.
func recordCheckout(tx *sql.Tx, r *NodeResult) error {
	_, err := tx.Exec(`UPDATE node_runs SET repo = ?, slug = ? WHERE run_id = ? AND node = ?`, r.Repo, r.Slug, r.RunID, r.Node)
	return err
}

// fillCheckout reads the repository and path name columns into the run's node records.
func (l *Ledger) fillCheckout(runID string, nodes []NodeRecord) error {
	rows, err := l.db.Query(`SELECT node, repo, slug FROM node_runs WHERE run_id = ?`, runID)
	if err != nil {
		return fmt.Errorf("ledger %s: %w", l.path, err)
	}
	defer rows.Close()
	type checkout struct{ repo, slug string }
	byNode := map[string]checkout{}
	for rows.Next() {
		var name string
		var c checkout
		if err := rows.Scan(&name, &c.repo, &c.slug); err != nil {
			return fmt.Errorf("ledger %s: %w", l.path, err)
		}
		byNode[name] = c
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for i := range nodes {
		c := byNode[nodes[i].Node]
		nodes[i].Repo, nodes[i].Slug = c.repo, c.slug
	}
	return nil
}

// RecordKeptWork records what was kept of an interrupted node after its apply died (its row is otherwise left
// as MarkInterrupted wrote it).
func (l *Ledger) RecordKeptWork(runID, node string, s *Salvage) error {
	return l.tx(func(tx *sql.Tx) error {
		return recordSalvage(tx, &NodeResult{RunID: runID, Node: node, Salvage: s})
	})
}
