package ledger

import (
	"database/sql"
	"fmt"
	"time"
)

// AttemptRecord is one `node_attempts` row: one attempt of a node, written once when the attempt ends and never
// overwritten. The node's `node_runs` row holds the last attempt's outcome and the sums over all of them.
type AttemptRecord struct {
	RunID    string
	Node     string
	Attempt  int // 1-based
	Status   string
	ExitCode *int64
	// StopClass is the retry class of a failed attempt ("api_error", "engine_error", "timeout"), "" when the
	// failure is not one a retry block can retry. StopReason is why the attempt ended ("" when it succeeded).
	StopClass  string
	StopReason string
	// RetryWait is the wait before the next attempt; 0 when none followed.
	RetryWait        time.Duration
	StartedAt        *time.Time
	EndedAt          *time.Time
	InputTokens      int64
	OutputTokens     int64
	CacheReadTokens  int64
	CacheWriteTokens int64
	CostUSD          *float64
	SessionID        string
	StdoutLog        string
	StderrLog        string
	BaseCommit       string
}

// RecordAttempt inserts one attempt's row; an attempt already recorded is an error, never replaced.
func (l *Ledger) RecordAttempt(a AttemptRecord) error {
	var exit, cost, started, ended any
	if a.ExitCode != nil {
		exit = *a.ExitCode
	}
	if a.CostUSD != nil {
		cost = *a.CostUSD
	}
	if a.StartedAt != nil {
		started = ts(*a.StartedAt)
	}
	if a.EndedAt != nil {
		ended = ts(*a.EndedAt)
	}
	return l.tx(func(tx *sql.Tx) error {
		_, err := tx.Exec(`INSERT INTO node_attempts (run_id, node, attempt, status, exit_code, stop_class, stop_reason,
			retry_wait_ms, started_at, ended_at, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_usd,
			session_id, stdout_log, stderr_log, base_commit) VALUES (?,?,?,?,?,?,?, ?,?,?,?,?,?,?,?, ?,?,?,?)`,
			a.RunID, a.Node, a.Attempt, a.Status, exit, a.StopClass, a.StopReason,
			a.RetryWait.Milliseconds(), started, ended, a.InputTokens, a.OutputTokens, a.CacheReadTokens, a.CacheWriteTokens, cost,
			a.SessionID, a.StdoutLog, a.StderrLog, a.BaseCommit)
		if err != nil {
			return fmt.Errorf("record attempt %d of node %s: %w", a.Attempt, a.Node, err)
		}
		return nil
	})
}

// Attempts returns a run's attempt rows by node, oldest attempt first.
func (l *Ledger) Attempts(runID string) (map[string][]AttemptRecord, error) {
	rows, err := l.db.Query(`SELECT run_id, node, attempt, status, exit_code, stop_class, stop_reason, retry_wait_ms,
			started_at, ended_at, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_usd, session_id,
			stdout_log, stderr_log, base_commit
		FROM node_attempts WHERE run_id = ? ORDER BY node, attempt`, runID)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: %w", l.path, err)
	}
	defer rows.Close()
	out := map[string][]AttemptRecord{}
	for rows.Next() {
		var a AttemptRecord
		var exit sql.NullInt64
		var cost sql.NullFloat64
		var started, ended sql.NullString
		var waitMS int64
		if err := rows.Scan(&a.RunID, &a.Node, &a.Attempt, &a.Status, &exit, &a.StopClass, &a.StopReason, &waitMS,
			&started, &ended, &a.InputTokens, &a.OutputTokens, &a.CacheReadTokens, &a.CacheWriteTokens, &cost, &a.SessionID,
			&a.StdoutLog, &a.StderrLog, &a.BaseCommit); err != nil {
			return nil, fmt.Errorf("ledger %s: %w", l.path, err)
		}
		if exit.Valid {
			e := exit.Int64
			a.ExitCode = &e
		}
		if cost.Valid {
			c := cost.Float64
			a.CostUSD = &c
		}
		a.RetryWait = time.Duration(waitMS) * time.Millisecond
		a.StartedAt, a.EndedAt = parseTS(started), parseTS(ended)
		out[a.Node] = append(out[a.Node], a)
	}
	return out, rows.Err()
}

// recordNodeHistory writes a node row's retry and resume columns, in the transaction that (re)wrote the row.
func recordNodeHistory(tx *sql.Tx, r *NodeResult) error {
	attempts := r.Attempts
	if attempts == 0 && !r.Started.IsZero() {
		attempts = 1
	}
	_, err := tx.Exec(`UPDATE node_runs SET fingerprint = ?, attempts = ?, reused_from = ? WHERE run_id = ? AND node = ?`,
		r.Fingerprint, attempts, r.ReusedFrom, r.RunID, r.Node)
	return err
}

// fillNodeHistory reads the retry and resume columns into the run's node records.
func (l *Ledger) fillNodeHistory(runID string, nodes []NodeRecord) error {
	rows, err := l.db.Query(`SELECT node, fingerprint, attempts, reused_from FROM node_runs WHERE run_id = ?`, runID)
	if err != nil {
		return fmt.Errorf("ledger %s: %w", l.path, err)
	}
	defer rows.Close()
	type hist struct {
		fp, reused string
		attempts   int
	}
	byNode := map[string]hist{}
	for rows.Next() {
		var name string
		var h hist
		if err := rows.Scan(&name, &h.fp, &h.attempts, &h.reused); err != nil {
			return fmt.Errorf("ledger %s: %w", l.path, err)
		}
		byNode[name] = h
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for i := range nodes {
		h := byNode[nodes[i].Node]
		nodes[i].Fingerprint, nodes[i].Attempts, nodes[i].ReusedFrom = h.fp, h.attempts, h.reused
		if nodes[i].StartedAt == nil {
			nodes[i].Attempts = 0
		}
	}
	return nil
}
