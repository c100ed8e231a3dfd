package ledger

import (
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// pushIntentMigration is the write-ahead record of a worker's push: before the host pushes a node attempt's
// commits, the remote, the branch and the exact commit are recorded; the row is resolved once the node's outcome
// is recorded (or, after the apply died, once the remote said whether the push had landed). An unresolved row of
// an interrupted node is a push that may have landed before its apply died.
const pushIntentMigration = `CREATE TABLE push_intents (
		run_id      TEXT NOT NULL REFERENCES runs(id),
		node        TEXT NOT NULL,
		attempt     INTEGER NOT NULL,
		repo        TEXT NOT NULL,
		branch      TEXT NOT NULL,
		commit_sha  TEXT NOT NULL,
		recorded_at TEXT NOT NULL,
		resolved_at TEXT,
		resolution  TEXT NOT NULL DEFAULT '',
		PRIMARY KEY (run_id, node, attempt)
	);`

// How a push intent was resolved.
const (
	// IntentRecorded: the node's outcome was recorded by its apply (whatever the push did).
	IntentRecorded = "recorded"
	// IntentLanded: the apply died, and the remote branch held the intended commit: the push had landed.
	IntentLanded = "landed"
	// IntentNotLanded: the apply died, and the remote branch held something else.
	IntentNotLanded = "not_landed"
)

// PushIntent is one push a node attempt was about to make. Repo is the remote (not shown: a URL may carry
// credentials).
type PushIntent struct {
	RunID      string
	Node       string
	Attempt    int
	Repo       string
	Branch     string
	Commit     string
	RecordedAt time.Time
}

// RecordPushIntent records, before the push, that a node attempt is about to push Commit to Branch of Repo.
func (l *Ledger) RecordPushIntent(p PushIntent) error {
	if p.RunID == "" || p.Node == "" || p.Attempt < 1 || p.Repo == "" || p.Branch == "" || p.Commit == "" {
		return fmt.Errorf("ledger %s: incomplete push intent for node %s", l.path, p.Node)
	}
	at := p.RecordedAt
	if at.IsZero() {
		at = time.Now()
	}
	return l.tx(func(tx *sql.Tx) error {
		_, err := tx.Exec(`INSERT OR REPLACE INTO push_intents (run_id, node, attempt, repo, branch, commit_sha, recorded_at)
			VALUES (?, ?, ?, ?, ?, ?, ?)`, p.RunID, p.Node, p.Attempt, p.Repo, p.Branch, p.Commit, ts(at))
		if err != nil {
			return fmt.Errorf("record the push intent of node %s: %w", p.Node, err)
		}
		return nil
	})
}

// resolvePushIntents resolves a node's open intents in the transaction that recorded its outcome.
func resolvePushIntents(tx *sql.Tx, r *NodeResult) error {
	if r.Status == StatusRunning || r.Status == StatusPending {
		return nil
	}
	_, err := tx.Exec(`UPDATE push_intents SET resolved_at = ?, resolution = ? WHERE run_id = ? AND node = ? AND resolved_at IS NULL`,
		ts(time.Now()), IntentRecorded, r.RunID, r.Node)
	return err
}

// UnresolvedPushIntents are the open push intents of interrupted nodes of interrupted runs (the newest attempt's
// of each node), oldest first: pushes that may have landed before their apply died.
func (l *Ledger) UnresolvedPushIntents() ([]PushIntent, error) {
	rows, err := l.db.Query(`SELECT p.run_id, p.node, p.attempt, p.repo, p.branch, p.commit_sha, p.recorded_at
		FROM push_intents p
		JOIN runs r ON r.id = p.run_id
		JOIN node_runs n ON n.run_id = p.run_id AND n.node = p.node
		WHERE p.resolved_at IS NULL AND r.status = ? AND n.status = ? AND p.attempt = n.attempts
		ORDER BY p.recorded_at, p.run_id, p.node`, RunInterrupted, StatusInterrupted)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: %w", l.path, err)
	}
	defer rows.Close()
	var out []PushIntent
	for rows.Next() {
		var p PushIntent
		var at sql.NullString
		if err := rows.Scan(&p.RunID, &p.Node, &p.Attempt, &p.Repo, &p.Branch, &p.Commit, &at); err != nil {
			return nil, fmt.Errorf("ledger %s: %w", l.path, err)
		}
		if t := parseTS(at); t != nil {
			p.RecordedAt = *t
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// ErrIntentResolved is returned by ResolvePushIntent for an intent already resolved or a node no longer
// interrupted.
var ErrIntentResolved = errors.New("push intent already resolved")

// ResolvePushIntent records what the remote said of an interrupted node's open push intent. landed (the branch
// holds the intended commit) records the node as a worker whose push succeeded: status succeeded, the commit and
// branch as its outputs, pushed, and reason saying how it was learnt; its fingerprint, attempts and kept work stay.
// Otherwise the node stays interrupted and the intent is closed.
func (l *Ledger) ResolvePushIntent(p PushIntent, landed bool, reason string) error {
	return l.tx(func(tx *sql.Tx) error {
		resolution := IntentNotLanded
		if landed {
			resolution = IntentLanded
		}
		res, err := tx.Exec(`UPDATE push_intents SET resolved_at = ?, resolution = ?
			WHERE run_id = ? AND node = ? AND attempt = ? AND resolved_at IS NULL`,
			ts(time.Now()), resolution, p.RunID, p.Node, p.Attempt)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return fmt.Errorf("node %s of run %s: %w", p.Node, p.RunID, ErrIntentResolved)
		}
		if !landed {
			return nil
		}
		res, err = tx.Exec(`UPDATE node_runs SET status = ?, reason = ?, commit_sha = ?, branch = ?, pushed = 1
			WHERE run_id = ? AND node = ? AND status = ?`,
			StatusSucceeded, reason, p.Commit, p.Branch, p.RunID, p.Node, StatusInterrupted)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return fmt.Errorf("node %s of run %s: %w", p.Node, p.RunID, ErrIntentResolved)
		}
		return nil
	})
}

// fillPushIntents reads each node's open push intent of its last attempt into the run's node records.
func (l *Ledger) fillPushIntents(runID string, nodes []NodeRecord) error {
	rows, err := l.db.Query(`SELECT p.node, p.attempt, p.repo, p.branch, p.commit_sha, p.recorded_at FROM push_intents p
		JOIN node_runs n ON n.run_id = p.run_id AND n.node = p.node
		WHERE p.run_id = ? AND p.resolved_at IS NULL AND p.attempt = n.attempts`, runID)
	if err != nil {
		return fmt.Errorf("ledger %s: %w", l.path, err)
	}
	defer rows.Close()
	byNode := map[string]*PushIntent{}
	for rows.Next() {
		p := PushIntent{RunID: runID}
		var at sql.NullString
		if err := rows.Scan(&p.Node, &p.Attempt, &p.Repo, &p.Branch, &p.Commit, &at); err != nil {
			return fmt.Errorf("ledger %s: %w", l.path, err)
		}
		if t := parseTS(at); t != nil {
			p.RecordedAt = *t
		}
		byNode[p.Node] = &p
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for i := range nodes {
		nodes[i].PushIntent = byNode[nodes[i].Node]
	}
	return nil
}
