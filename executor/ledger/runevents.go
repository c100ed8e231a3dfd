package ledger

import (
	"database/sql"
	"fmt"
	"time"
)

// RunEvent is something that happened to a run's shared objects while its nodes ran (kewplan's egress proxy
// exited, was started again, or could not be): what, for which nodes, and when. Message is kewplan's sentence; it
// may quote a process's last words, untrusted text a view sanitises.
type RunEvent struct {
	RunID string
	// Kind is one of the RunEvent* kinds.
	Kind string
	// Nodes are the nodes it concerned (those running at the time), comma-separated; "" for none.
	Nodes   string
	Message string
	Time    time.Time
}

// Kinds of a RunEvent.
const (
	// RunEventProxyExited: kewplan's egress proxy exited while the run needed it.
	RunEventProxyExited = "egress_proxy_exited"
	// RunEventProxyRestarted: a new egress proxy took over at the same addresses with the broker's state.
	RunEventProxyRestarted = "egress_proxy_restarted"
	// RunEventProxyLost: the egress proxy could not be started again; the nodes that need it fail.
	RunEventProxyLost = "egress_proxy_lost"
)

// runEventMigration: run_events, what happened to a run's shared objects while it ran.
const runEventMigration = `CREATE TABLE run_events (
		run_id  TEXT NOT NULL,
		seq     INTEGER NOT NULL,
		kind    TEXT NOT NULL,
		nodes   TEXT NOT NULL DEFAULT '',
		message TEXT NOT NULL DEFAULT '',
		time    TEXT NOT NULL,
		PRIMARY KEY (run_id, seq)
	);`

// RecordRunEvent appends an event to its run, in arrival order.
func (l *Ledger) RecordRunEvent(e RunEvent) error {
	return l.tx(func(tx *sql.Tx) error {
		_, err := tx.Exec(`INSERT INTO run_events (run_id, seq, kind, nodes, message, time)
			VALUES (?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM run_events WHERE run_id = ?), ?, ?, ?, ?)`,
			e.RunID, e.RunID, e.Kind, e.Nodes, e.Message, ts(e.Time))
		return err
	})
}

// RunEvents are a run's events, in the order they happened.
func (l *Ledger) RunEvents(runID string) ([]RunEvent, error) {
	rows, err := l.db.Query(`SELECT kind, nodes, message, time FROM run_events WHERE run_id = ? ORDER BY seq`, runID)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: events of run %s: %w", l.path, runID, err)
	}
	defer rows.Close()
	var out []RunEvent
	for rows.Next() {
		e := RunEvent{RunID: runID}
		var t sql.NullString
		if err := rows.Scan(&e.Kind, &e.Nodes, &e.Message, &t); err != nil {
			return nil, fmt.Errorf("ledger %s: events of run %s: %w", l.path, runID, err)
		}
		if p := parseTS(t); p != nil {
			e.Time = *p
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger %s: events of run %s: %w", l.path, runID, err)
	}
	return out, nil
}
