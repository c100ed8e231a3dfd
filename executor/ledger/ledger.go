package ledger

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	_ "modernc.org/sqlite" // pure-Go SQLite driver "sqlite"

	"github.com/kewplan/kewplan/executor/verdict"
	"github.com/kewplan/kewplan/internal/strictjson"
)

// Ledger is the run ledger: one `runs` row per apply and one `node_runs` row per node of it, in SQLite. Every
// write is one transaction; rows written `running` by an apply that died are marked `interrupted` by the next
// command that opens the ledger with the state directory's lock (MarkInterrupted).
type Ledger struct {
	db   *sql.DB
	path string
}

// migrations are applied in order; PRAGMA user_version records how many ran. Append only, never edit.
var migrations = []string{
	`CREATE TABLE runs (
		id              TEXT PRIMARY KEY,
		started_at      TEXT NOT NULL,
		ended_at        TEXT,
		config_digest   TEXT NOT NULL DEFAULT '',
		status          TEXT NOT NULL,
		kewplan_version TEXT NOT NULL DEFAULT '',
		pid             INTEGER NOT NULL DEFAULT 0
	);
	CREATE TABLE node_runs (
		run_id             TEXT NOT NULL REFERENCES runs(id),
		node               TEXT NOT NULL,
		runner             TEXT NOT NULL DEFAULT '',
		protocol           TEXT NOT NULL DEFAULT '',
		role               TEXT NOT NULL DEFAULT '',
		image              TEXT NOT NULL DEFAULT '',
		image_id           TEXT NOT NULL DEFAULT '',
		routed_model       TEXT NOT NULL DEFAULT '',
		reported_model     TEXT NOT NULL DEFAULT '',
		model_source       TEXT NOT NULL DEFAULT '',
		session_id         TEXT NOT NULL DEFAULT '',
		input_tokens       INTEGER NOT NULL DEFAULT 0,
		output_tokens      INTEGER NOT NULL DEFAULT 0,
		cache_read_tokens  INTEGER NOT NULL DEFAULT 0,
		cache_write_tokens INTEGER NOT NULL DEFAULT 0,
		cost_usd           REAL,
		turns              INTEGER,
		is_error           INTEGER NOT NULL DEFAULT 0,
		finished           INTEGER NOT NULL DEFAULT 0,
		events             INTEGER NOT NULL DEFAULT 0,
		unparsed_lines     INTEGER NOT NULL DEFAULT 0,
		oversized_lines    INTEGER NOT NULL DEFAULT 0,
		exit_code          INTEGER,
		status             TEXT NOT NULL,
		reason             TEXT NOT NULL DEFAULT '',
		argv               TEXT NOT NULL DEFAULT '[]',
		prompt_sha256      TEXT NOT NULL DEFAULT '',
		stdout_log         TEXT NOT NULL DEFAULT '',
		stderr_log         TEXT NOT NULL DEFAULT '',
		started_at         TEXT,
		ended_at           TEXT,
		base_commit        TEXT NOT NULL DEFAULT '',
		commit_sha         TEXT NOT NULL DEFAULT '',
		branch             TEXT NOT NULL DEFAULT '',
		pushed             INTEGER NOT NULL DEFAULT 0,
		pull_request       TEXT NOT NULL DEFAULT '',
		verdict            TEXT NOT NULL DEFAULT '',
		verdict_summary    TEXT NOT NULL DEFAULT '',
		verdict_findings   TEXT NOT NULL DEFAULT '',
		sidecar_sha256     TEXT NOT NULL DEFAULT '',
		sidecar_location   TEXT NOT NULL DEFAULT '',
		PRIMARY KEY (run_id, node)
	);
	CREATE INDEX node_runs_status ON node_runs(status);`,
	// 2: budgets. cost_usd now holds the recorded cost whatever its source, and cost_source says which it is
	// (reported, estimated, unknown; '' for rows written before, read as reported when cost_usd is set); the
	// budget_* columns say which cap stopped a budget_exceeded node.
	`ALTER TABLE node_runs ADD COLUMN cost_source TEXT NOT NULL DEFAULT '';
	ALTER TABLE node_runs ADD COLUMN budget_scope TEXT NOT NULL DEFAULT '';
	ALTER TABLE node_runs ADD COLUMN budget_cap TEXT NOT NULL DEFAULT '';
	ALTER TABLE node_runs ADD COLUMN budget_limit REAL;
	ALTER TABLE node_runs ADD COLUMN budget_value REAL;
	ALTER TABLE node_runs ADD COLUMN budget_source TEXT NOT NULL DEFAULT '';
	ALTER TABLE node_runs ADD COLUMN budget_message TEXT NOT NULL DEFAULT '';
	ALTER TABLE node_runs ADD COLUMN budget_warning TEXT NOT NULL DEFAULT '';`,
	// Retry and resume: the run a resumed run started from, each node's input fingerprint, attempt count and the
	// run its outputs were reused from, and one row per attempt (never overwritten).
	`ALTER TABLE runs ADD COLUMN resumed_from TEXT NOT NULL DEFAULT '';
	ALTER TABLE node_runs ADD COLUMN fingerprint TEXT NOT NULL DEFAULT '';
	ALTER TABLE node_runs ADD COLUMN attempts INTEGER NOT NULL DEFAULT 1;
	ALTER TABLE node_runs ADD COLUMN reused_from TEXT NOT NULL DEFAULT '';
	CREATE TABLE node_attempts (
		run_id             TEXT NOT NULL REFERENCES runs(id),
		node               TEXT NOT NULL,
		attempt            INTEGER NOT NULL,
		status             TEXT NOT NULL,
		exit_code          INTEGER,
		stop_class         TEXT NOT NULL DEFAULT '',
		stop_reason        TEXT NOT NULL DEFAULT '',
		retry_wait_ms      INTEGER NOT NULL DEFAULT 0,
		started_at         TEXT,
		ended_at           TEXT,
		input_tokens       INTEGER NOT NULL DEFAULT 0,
		output_tokens      INTEGER NOT NULL DEFAULT 0,
		cache_read_tokens  INTEGER NOT NULL DEFAULT 0,
		cache_write_tokens INTEGER NOT NULL DEFAULT 0,
		cost_usd           REAL,
		session_id         TEXT NOT NULL DEFAULT '',
		stdout_log         TEXT NOT NULL DEFAULT '',
		stderr_log         TEXT NOT NULL DEFAULT '',
		base_commit        TEXT NOT NULL DEFAULT '',
		PRIMARY KEY (run_id, node, attempt)
	);`,
	// egress: every request kewplan's egress proxy refused during a run.
	`CREATE TABLE egress_denials (
		run_id  TEXT NOT NULL,
		seq     INTEGER NOT NULL,
		node    TEXT NOT NULL DEFAULT '',
		method  TEXT NOT NULL DEFAULT '',
		host    TEXT NOT NULL DEFAULT '',
		port    INTEGER NOT NULL DEFAULT 0,
		reason  TEXT NOT NULL DEFAULT '',
		time    TEXT NOT NULL,
		PRIMARY KEY (run_id, seq)
	);`,
	// salvage: what was kept of a worker that ended without its push, and the runs `runs prune` removed.
	salvageMigration,
	// broker_requests: every request kewplan's egress proxy brokered for a node (the real credential added).
	brokerMigration,
	// broker metering: each brokered request's model call and the usage the provider reported for it.
	meterMigration,
	// egress_denials.refusal: the sentence the proxy answered a denial with.
	refusalMigration,
	// broker_requests.unsettled: a model call that ended without the provider's final usage, summed at its
	// reservation.
	unsettledMigration,
	// node_salvage.protected_branches, allow_protected_push: the protections kept work is published under.
	salvageProtectionMigration,
	// crash recovery: the apply's process identity, each node's repository and path name.
	interruptedMigration,
	// run_events: what happened to a run's shared objects while it ran (its egress proxy's exits and restarts).
	runEventMigration,
	// push_intents: the push a node attempt was about to make, recorded before it (write-ahead).
	pushIntentMigration,
	// broker_requests.first_byte_ms: a brokered call's time to the first byte of its answer.
	firstByteMigration,
}

// Open opens (creating and migrating as needed) the ledger at path.
func Open(path string) (*Ledger, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)")
	if err != nil {
		return nil, fmt.Errorf("open ledger %s: %w", path, err)
	}
	// One connection: every write is serialised, and SQLite never reports "database is locked" to ourselves.
	db.SetMaxOpenConns(1)
	l := &Ledger{db: db, path: path}
	if err := l.migrate(); err != nil {
		db.Close()
		return nil, err
	}
	return l, nil
}

// Path is the ledger file.
func (l *Ledger) Path() string { return l.path }

// Close closes the ledger.
func (l *Ledger) Close() error { return l.db.Close() }

func (l *Ledger) migrate() error {
	var version int
	if err := l.db.QueryRow(`PRAGMA user_version`).Scan(&version); err != nil {
		return fmt.Errorf("ledger %s: read schema version: %w", l.path, err)
	}
	if version > len(migrations) {
		return fmt.Errorf("ledger %s has schema version %d, newer than this kewplan understands (%d); use a newer kewplan or another --state-dir", l.path, version, len(migrations))
	}
	for i := version; i < len(migrations); i++ {
		tx, err := l.db.Begin()
		if err != nil {
			return fmt.Errorf("ledger %s: migrate: %w", l.path, err)
		}
		if _, err := tx.Exec(migrations[i]); err != nil {
			tx.Rollback()
			return fmt.Errorf("ledger %s: migration %d: %w", l.path, i+1, err)
		}
		if _, err := tx.Exec(fmt.Sprintf(`PRAGMA user_version = %d`, i+1)); err != nil {
			tx.Rollback()
			return fmt.Errorf("ledger %s: migration %d: %w", l.path, i+1, err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("ledger %s: migration %d: %w", l.path, i+1, err)
		}
	}
	return nil
}

func (l *Ledger) tx(fn func(*sql.Tx) error) error {
	tx, err := l.db.Begin()
	if err != nil {
		return fmt.Errorf("ledger %s: %w", l.path, err)
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return fmt.Errorf("ledger %s: %w", l.path, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("ledger %s: %w", l.path, err)
	}
	return nil
}

// RunRecord is one `runs` row.
type RunRecord struct {
	ID             string     `json:"id"`
	StartedAt      time.Time  `json:"started_at"`
	EndedAt        *time.Time `json:"ended_at"`
	ConfigDigest   string     `json:"config_digest"`
	Status         string     `json:"status"`
	KewplanVersion string     `json:"kewplan_version"`
	PID            int        `json:"pid"`
	// Host is the machine the apply ran on; Process (not in the JSON) is its whole identity, which tells a dead
	// apply from a live one (Process.Alive).
	Host    string  `json:"host,omitempty"`
	Process Process `json:"-"`
	// ResumedFrom is the run this one resumed (apply --resume), "" for a fresh run.
	ResumedFrom string `json:"resumed_from,omitempty"`
	// InterruptedSince is, for an interrupted run (its apply died), the last thing recorded of it: when its
	// apply was last known alive (its EndedAt). Nil for every other run.
	InterruptedSince *time.Time `json:"interrupted_since,omitempty"`
	// Aggregates over the run's node rows (read-only; not stored).
	Nodes            int      `json:"nodes"`
	Succeeded        int      `json:"succeeded"`
	InputTokens      int64    `json:"input_tokens"`
	OutputTokens     int64    `json:"output_tokens"`
	CacheReadTokens  int64    `json:"cache_read_tokens"`
	CacheWriteTokens int64    `json:"cache_write_tokens"`
	CostUSD          *float64 `json:"cost_usd"`
	// CostSource is where the total came from: "reported" when every node's cost is the agent's own, "estimated"
	// when any is tokens × price, "unknown" when any node that ran has no known cost (CostUSD is then a lower
	// bound); "" when no node ran. CostEstimated and CostUnknown name those nodes, sorted.
	CostSource    string   `json:"cost_source"`
	CostEstimated []string `json:"cost_estimated"`
	CostUnknown   []string `json:"cost_unknown"`
}

// NodeRecord is one `node_runs` row.
type NodeRecord struct {
	RunID            string            `json:"run_id"`
	Node             string            `json:"node"`
	Runner           string            `json:"runner"`
	Protocol         string            `json:"protocol"`
	Role             string            `json:"role"`
	Image            string            `json:"image"`
	ImageID          string            `json:"image_id"`
	RoutedModel      string            `json:"routed_model"`
	ReportedModel    string            `json:"reported_model"`
	ModelSource      string            `json:"model_source"`
	SessionID        string            `json:"session_id"`
	InputTokens      int64             `json:"input_tokens"`
	OutputTokens     int64             `json:"output_tokens"`
	CacheReadTokens  int64             `json:"cache_read_tokens"`
	CacheWriteTokens int64             `json:"cache_write_tokens"`
	CostUSD          *float64          `json:"cost_usd"`
	Turns            *int64            `json:"turns"`
	IsError          bool              `json:"is_error"`
	Finished         bool              `json:"finished"`
	Events           int64             `json:"events"`
	UnparsedLines    int64             `json:"unparsed_lines"`
	OversizedLines   int64             `json:"oversized_lines"`
	ExitCode         *int64            `json:"exit_code"`
	Status           string            `json:"status"`
	Reason           string            `json:"reason"`
	Argv             []string          `json:"argv"`
	PromptSHA256     string            `json:"prompt_sha256"`
	StdoutLog        string            `json:"stdout_log"`
	StderrLog        string            `json:"stderr_log"`
	StartedAt        *time.Time        `json:"started_at"`
	EndedAt          *time.Time        `json:"ended_at"`
	BaseCommit       string            `json:"base_commit"`
	Commit           string            `json:"commit"`
	Branch           string            `json:"branch"`
	Pushed           bool              `json:"pushed"`
	PullRequest      string            `json:"pull_request"`
	Verdict          string            `json:"verdict"`
	VerdictSummary   string            `json:"verdict_summary"`
	VerdictFindings  []verdict.Finding `json:"verdict_findings"`
	SidecarSHA256    string            `json:"sidecar_sha256"`
	SidecarLocation  string            `json:"sidecar_location"`
	// CostSource says where CostUSD came from: reported, estimated, or unknown (CostUSD null); "" when the node
	// never ran.
	CostSource string `json:"cost_source"`
	// Budget is the cap that stopped a budget_exceeded node; null otherwise.
	Budget *BudgetStop `json:"budget"`
	// BudgetWarning is the warn_at crossing the node raised; "" when none.
	BudgetWarning string `json:"budget_warning"`
	// Fingerprint is the JSON of the node's planner.InputFingerprint ("" when none was recorded).
	Fingerprint string `json:"fingerprint,omitempty"`
	// Attempts is how many attempts the node made (1 without retries, 0 for a node that never started).
	Attempts int `json:"-"`
	// ReusedFrom is the run whose outputs this node reused (status reused), "" when it ran.
	ReusedFrom string `json:"reused_from,omitempty"`
	// Salvage is what was kept of a worker that ended without its push; null when nothing was.
	Salvage *Salvage `json:"salvage,omitempty"`
	// Repo is the repository the node cloned (not in the JSON: a URL may carry credentials) and Slug its path
	// name under the state directory: what keeping an interrupted node's work needs.
	Repo string `json:"-"`
	Slug string `json:"-"`
	// PushIntent is the push the node's last attempt was about to make and whose outcome was never recorded (its
	// apply died during it); nil otherwise. Not in the JSON: its remote may carry credentials.
	PushIntent *PushIntent `json:"-"`
}

// Duration is how long the node ran (zero when it never started or has not ended).
func (n *NodeRecord) Duration() time.Duration {
	if n.StartedAt == nil || n.EndedAt == nil {
		return 0
	}
	return n.EndedAt.Sub(*n.StartedAt)
}

func ts(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func parseTS(s sql.NullString) *time.Time {
	if !s.Valid || s.String == "" {
		return nil
	}
	t, err := time.Parse(time.RFC3339Nano, s.String)
	if err != nil {
		return nil
	}
	return &t
}

// StartRun records a new run as running, with the identity of the process that runs it (r.Process; r.PID when
// only that is known).
func (l *Ledger) StartRun(r RunRecord) error {
	return l.tx(func(tx *sql.Tx) error {
		p := r.Process
		if p.PID == 0 {
			p.PID = r.PID
		}
		_, err := tx.Exec(`INSERT INTO runs (id, started_at, config_digest, status, kewplan_version, pid, resumed_from, host, boot_id, process_start)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			r.ID, ts(r.StartedAt), r.ConfigDigest, RunRunning, r.KewplanVersion, p.PID, r.ResumedFrom, p.Host, p.BootID, int64(p.Start))
		return err
	})
}

// ForgetRun removes the record of a run that started nothing (its engine could not start), with anything written
// under its id.
func (l *Ledger) ForgetRun(id string) error {
	return l.tx(func(tx *sql.Tx) error {
		for _, q := range []string{
			`DELETE FROM egress_denials WHERE run_id = ?`,
			`DELETE FROM broker_requests WHERE run_id = ?`,
			`DELETE FROM node_salvage WHERE run_id = ?`,
			`DELETE FROM push_intents WHERE run_id = ?`,
			`DELETE FROM node_attempts WHERE run_id = ?`,
			`DELETE FROM node_runs WHERE run_id = ?`,
			`DELETE FROM runs WHERE id = ?`,
		} {
			if _, err := tx.Exec(q, id); err != nil {
				return err
			}
		}
		return nil
	})
}

// FinishRun records a run's end and final status.
func (l *Ledger) FinishRun(id, status string, ended time.Time) error {
	return l.tx(func(tx *sql.Tx) error {
		_, err := tx.Exec(`UPDATE runs SET status = ?, ended_at = ? WHERE id = ?`, status, ts(ended), id)
		return err
	})
}

// RecordNode inserts or replaces a node's row.
func (l *Ledger) RecordNode(r *NodeResult) error {
	argv, err := json.Marshal(nonNilStrings(r.Argv))
	if err != nil {
		return err
	}
	var exit any
	if r.ExitCode != nil {
		exit = *r.ExitCode
	}
	var cost, turns any
	costUSD, costSource := r.RecordedCost()
	if costUSD != nil {
		cost = *costUSD
	}
	var bScope, bCap, bSource, bMessage string
	var bLimit, bValue any
	if b := r.Budget; b != nil {
		bScope, bCap, bSource, bMessage, bLimit, bValue = b.Scope, b.Cap, b.Source, b.Message, b.Limit, b.Value
	}
	if r.Totals.Turns != nil {
		turns = *r.Totals.Turns
	}
	var verdictValue, summary, findings, sidecarSHA, sidecarLoc string
	if v := r.Verdict; v != nil {
		verdictValue, summary, sidecarSHA, sidecarLoc = v.Verdict, v.Summary, v.SHA256, v.Location
		f := v.Findings
		if f == nil {
			f = []verdict.Finding{}
		}
		b, err := json.Marshal(f)
		if err != nil {
			return err
		}
		findings = string(b)
	}
	return l.tx(func(tx *sql.Tx) error {
		_, err := tx.Exec(`INSERT OR REPLACE INTO node_runs (
			run_id, node, runner, protocol, role, image, image_id, routed_model, reported_model, model_source, session_id,
			input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_usd, turns, is_error, finished,
			events, unparsed_lines, oversized_lines, exit_code, status, reason, argv, prompt_sha256, stdout_log,
			stderr_log, started_at, ended_at, base_commit, commit_sha, branch, pushed, pull_request, verdict,
			verdict_summary, verdict_findings, sidecar_sha256, sidecar_location, cost_source, budget_scope, budget_cap,
			budget_limit, budget_value, budget_source, budget_message, budget_warning)
			VALUES (?,?,?,?,?,?,?,?,?,?,?, ?,?,?,?,?,?,?,?, ?,?,?,?,?,?,?,?,?, ?,?,?,?,?,?,?,?,?, ?,?,?,?,?,?,?, ?,?,?,?,?)`,
			r.RunID, r.Node, r.Runner, r.Protocol, r.Role, r.Image, r.ImageID, r.Model, r.Totals.Model, r.Totals.ModelSource, r.Totals.SessionID,
			r.Totals.InputTokens, r.Totals.OutputTokens, r.Totals.CacheReadTokens, r.Totals.CacheWriteTokens, cost, turns, r.Totals.IsError, r.Totals.Finished,
			r.Totals.Events, r.Totals.UnparsedLines, r.Totals.OversizedLines, exit, r.Status, r.Reason, string(argv), r.PromptSHA256, r.StdoutLog,
			r.StderrLog, ts(r.Started), ts(r.Ended), r.BaseCommit, r.Commit, r.Branch, r.Pushed, r.PullRequest, verdictValue,
			summary, findings, sidecarSHA, sidecarLoc, costSource, bScope, bCap,
			bLimit, bValue, bSource, bMessage, r.BudgetWarning)
		if err != nil {
			return err
		}
		if err := recordNodeHistory(tx, r); err != nil {
			return err
		}
		if err := recordCheckout(tx, r); err != nil {
			return err
		}
		if err := resolvePushIntents(tx, r); err != nil {
			return err
		}
		return recordSalvage(tx, r)
	})
}

// sortedNames sorts node names, never nil.
func sortedNames(s []string) []string {
	if s == nil {
		return []string{}
	}
	sort.Strings(s)
	return s
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// ErrNoRun is returned by Run for an unknown run id.
var ErrNoRun = errors.New("no such run")

// Runs lists every run, newest first, with per-run totals.
func (l *Ledger) Runs() ([]RunRecord, error) {
	rows, err := l.db.Query(`SELECT r.id, r.started_at, r.ended_at, r.config_digest, r.status, r.kewplan_version, r.pid, r.resumed_from,
			COUNT(n.node), COALESCE(SUM(n.status IN ('succeeded', 'approved', 'reused')), 0),
			COALESCE(SUM(n.input_tokens), 0), COALESCE(SUM(n.output_tokens), 0),
			COALESCE(SUM(n.cache_read_tokens), 0), COALESCE(SUM(n.cache_write_tokens), 0), SUM(n.cost_usd),
			COALESCE(SUM(n.cost_usd IS NOT NULL OR n.cost_source != ''), 0),
			(SELECT COALESCE(json_group_array(x.node), '[]') FROM node_runs x WHERE x.run_id = r.id AND x.cost_source = 'estimated'),
			(SELECT COALESCE(json_group_array(x.node), '[]') FROM node_runs x WHERE x.run_id = r.id AND x.cost_source = 'unknown'),
			r.host, r.boot_id, r.process_start
		FROM runs r LEFT JOIN node_runs n ON n.run_id = r.id
		GROUP BY r.id ORDER BY r.started_at DESC, r.id DESC`)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: %w", l.path, err)
	}
	defer rows.Close()
	var out []RunRecord
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, fmt.Errorf("ledger %s: %w", l.path, err)
		}
		out = append(out, *r)
	}
	return out, rows.Err()
}

type scanner interface{ Scan(...any) error }

func scanRun(s scanner) (*RunRecord, error) {
	var r RunRecord
	var started string
	var ended sql.NullString
	var cost sql.NullFloat64
	var costed int
	var estimated, unknown string
	var processStart int64
	if err := s.Scan(&r.ID, &started, &ended, &r.ConfigDigest, &r.Status, &r.KewplanVersion, &r.PID, &r.ResumedFrom,
		&r.Nodes, &r.Succeeded, &r.InputTokens, &r.OutputTokens, &r.CacheReadTokens, &r.CacheWriteTokens, &cost,
		&costed, &estimated, &unknown, &r.Host, &r.Process.BootID, &processStart); err != nil {
		return nil, err
	}
	r.Process.Host, r.Process.PID, r.Process.Start = r.Host, r.PID, uint64(processStart)
	if err := strictjson.Decode([]byte(estimated), &r.CostEstimated); err != nil {
		return nil, err
	}
	if err := strictjson.Decode([]byte(unknown), &r.CostUnknown); err != nil {
		return nil, err
	}
	r.CostEstimated, r.CostUnknown = sortedNames(r.CostEstimated), sortedNames(r.CostUnknown)
	switch {
	case len(r.CostUnknown) > 0:
		r.CostSource = CostUnknown
	case len(r.CostEstimated) > 0:
		r.CostSource = CostEstimated
	case costed > 0:
		r.CostSource = CostReported
	}
	if t := parseTS(sql.NullString{String: started, Valid: true}); t != nil {
		r.StartedAt = *t
	}
	r.EndedAt = parseTS(ended)
	if r.Status == RunInterrupted {
		r.InterruptedSince = r.EndedAt
	}
	if cost.Valid {
		c := cost.Float64
		r.CostUSD = &c
	}
	return &r, nil
}

// Run returns one run and its node rows (in the order they started).
func (l *Ledger) Run(id string) (*RunRecord, []NodeRecord, error) {
	row := l.db.QueryRow(`SELECT r.id, r.started_at, r.ended_at, r.config_digest, r.status, r.kewplan_version, r.pid, r.resumed_from,
			COUNT(n.node), COALESCE(SUM(n.status IN ('succeeded', 'approved', 'reused')), 0),
			COALESCE(SUM(n.input_tokens), 0), COALESCE(SUM(n.output_tokens), 0),
			COALESCE(SUM(n.cache_read_tokens), 0), COALESCE(SUM(n.cache_write_tokens), 0), SUM(n.cost_usd),
			COALESCE(SUM(n.cost_usd IS NOT NULL OR n.cost_source != ''), 0),
			(SELECT COALESCE(json_group_array(x.node), '[]') FROM node_runs x WHERE x.run_id = r.id AND x.cost_source = 'estimated'),
			(SELECT COALESCE(json_group_array(x.node), '[]') FROM node_runs x WHERE x.run_id = r.id AND x.cost_source = 'unknown'),
			r.host, r.boot_id, r.process_start
		FROM runs r LEFT JOIN node_runs n ON n.run_id = r.id WHERE r.id = ? GROUP BY r.id`, id)
	run, err := scanRun(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil, fmt.Errorf("%w %q in %s", ErrNoRun, id, l.path)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("ledger %s: %w", l.path, err)
	}
	nodes, err := l.nodes(id)
	if err != nil {
		return nil, nil, err
	}
	return run, nodes, nil
}

func (l *Ledger) nodes(runID string) ([]NodeRecord, error) {
	rows, err := l.db.Query(`SELECT run_id, node, runner, protocol, role, image, image_id, routed_model, reported_model,
			model_source, session_id, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_usd, turns,
			is_error, finished, events, unparsed_lines, oversized_lines, exit_code, status, reason, argv, prompt_sha256,
			stdout_log, stderr_log, started_at, ended_at, base_commit, commit_sha, branch, pushed, pull_request, verdict,
			verdict_summary, verdict_findings, sidecar_sha256, sidecar_location, cost_source, budget_scope, budget_cap,
			budget_limit, budget_value, budget_source, budget_message, budget_warning
		FROM node_runs WHERE run_id = ? ORDER BY COALESCE(started_at, ended_at, ''), node`, runID)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: %w", l.path, err)
	}
	defer rows.Close()
	var out []NodeRecord
	for rows.Next() {
		var n NodeRecord
		var cost sql.NullFloat64
		var turns, exit sql.NullInt64
		var argv, findings string
		var started, ended sql.NullString
		var b BudgetStop
		var bLimit, bValue sql.NullFloat64
		if err := rows.Scan(&n.RunID, &n.Node, &n.Runner, &n.Protocol, &n.Role, &n.Image, &n.ImageID, &n.RoutedModel, &n.ReportedModel,
			&n.ModelSource, &n.SessionID, &n.InputTokens, &n.OutputTokens, &n.CacheReadTokens, &n.CacheWriteTokens, &cost, &turns,
			&n.IsError, &n.Finished, &n.Events, &n.UnparsedLines, &n.OversizedLines, &exit, &n.Status, &n.Reason, &argv, &n.PromptSHA256,
			&n.StdoutLog, &n.StderrLog, &started, &ended, &n.BaseCommit, &n.Commit, &n.Branch, &n.Pushed, &n.PullRequest, &n.Verdict,
			&n.VerdictSummary, &findings, &n.SidecarSHA256, &n.SidecarLocation, &n.CostSource, &b.Scope, &b.Cap,
			&bLimit, &bValue, &b.Source, &b.Message, &n.BudgetWarning); err != nil {
			return nil, fmt.Errorf("ledger %s: %w", l.path, err)
		}
		if cost.Valid {
			c := cost.Float64
			n.CostUSD = &c
		}
		if turns.Valid {
			t := turns.Int64
			n.Turns = &t
		}
		if exit.Valid {
			e := exit.Int64
			n.ExitCode = &e
		}
		n.StartedAt, n.EndedAt = parseTS(started), parseTS(ended)
		if b.Cap != "" {
			b.Limit, b.Value = bLimit.Float64, bValue.Float64
			n.Budget = &b
		}
		if n.CostSource == "" && n.CostUSD != nil {
			n.CostSource = CostReported // a row written before cost sources were recorded held only reported costs
		}
		if err := strictjson.Decode([]byte(argv), &n.Argv); err != nil {
			return nil, fmt.Errorf("ledger %s: node %s argv: %w", l.path, n.Node, err)
		}
		if findings != "" {
			if err := strictjson.Decode([]byte(findings), &n.VerdictFindings); err != nil {
				return nil, fmt.Errorf("ledger %s: node %s findings: %w", l.path, n.Node, err)
			}
		}
		out = append(out, n)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if err := l.fillNodeHistory(runID, out); err != nil {
		return nil, err
	}
	if err := l.fillCheckout(runID, out); err != nil {
		return nil, err
	}
	if err := l.fillPushIntents(runID, out); err != nil {
		return nil, err
	}
	return out, l.fillSalvage(runID, out)
}
