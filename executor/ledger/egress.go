package ledger

import (
	"database/sql"
	"fmt"
	"time"
)

// EgressDenial is one request kewplan's egress proxy refused: which node asked (empty when the request carried no
// valid proxy credentials), for which host and port, why, and when. Host is what the agent asked for: untrusted
// text, which a view sanitises before a terminal sees it.
type EgressDenial struct {
	RunID  string
	Node   string
	Method string // CONNECT, GET, ... as asked; DIAL when an allowed name was refused after resolution
	Host   string
	Port   int
	Reason string
	// Refusal is the one sentence the proxy answered with (what was refused and why); "" in a run recorded before
	// the proxy gave one. Untrusted text like Host.
	Refusal string
	Time    time.Time
}

const refusalMigration = `ALTER TABLE egress_denials ADD COLUMN refusal TEXT NOT NULL DEFAULT '';`

// HostPort is "host:port" as the summary and runs show write it.
func (d EgressDenial) HostPort() string { return fmt.Sprintf("%s:%d", d.Host, d.Port) }

// RecordEgressDenial appends a denial to its run, in arrival order.
func (l *Ledger) RecordEgressDenial(d EgressDenial) error {
	return l.tx(func(tx *sql.Tx) error {
		_, err := tx.Exec(`INSERT INTO egress_denials (run_id, seq, node, method, host, port, reason, refusal, time)
			VALUES (?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM egress_denials WHERE run_id = ?), ?, ?, ?, ?, ?, ?, ?)`,
			d.RunID, d.RunID, d.Node, d.Method, d.Host, d.Port, d.Reason, d.Refusal, ts(d.Time))
		return err
	})
}

// EgressDenials are a run's recorded denials, in the order they happened.
func (l *Ledger) EgressDenials(runID string) ([]EgressDenial, error) {
	rows, err := l.db.Query(`SELECT node, method, host, port, reason, refusal, time FROM egress_denials WHERE run_id = ? ORDER BY seq`, runID)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: egress denials of run %s: %w", l.path, runID, err)
	}
	defer rows.Close()
	var out []EgressDenial
	for rows.Next() {
		d := EgressDenial{RunID: runID}
		var t sql.NullString
		if err := rows.Scan(&d.Node, &d.Method, &d.Host, &d.Port, &d.Reason, &d.Refusal, &t); err != nil {
			return nil, fmt.Errorf("ledger %s: egress denials of run %s: %w", l.path, runID, err)
		}
		if p := parseTS(t); p != nil {
			d.Time = *p
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger %s: egress denials of run %s: %w", l.path, runID, err)
	}
	return out, nil
}
