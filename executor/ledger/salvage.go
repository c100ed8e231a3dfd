package ledger

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/kewplan/kewplan/internal/strictjson"
)

// salvageMigration adds what was kept of each worker that ended without its push (one row per node, the last
// attempt's) and the runs `runs prune` removed from disk.
const salvageMigration = `CREATE TABLE node_salvage (
		run_id           TEXT NOT NULL,
		node             TEXT NOT NULL,
		dir              TEXT NOT NULL DEFAULT '',
		why              TEXT NOT NULL DEFAULT '',
		repo             TEXT NOT NULL DEFAULT '',
		base_commit      TEXT NOT NULL DEFAULT '',
		head_commit      TEXT NOT NULL DEFAULT '',
		worktree_commit  TEXT NOT NULL DEFAULT '',
		commits          INTEGER NOT NULL DEFAULT 0,
		files_changed    INTEGER NOT NULL DEFAULT 0,
		bytes            INTEGER NOT NULL DEFAULT 0,
		skipped          TEXT NOT NULL DEFAULT '[]',
		commits_lost     TEXT NOT NULL DEFAULT '',
		published_branch TEXT NOT NULL DEFAULT '',
		published_pr     TEXT NOT NULL DEFAULT '',
		pruned           INTEGER NOT NULL DEFAULT 0,
		PRIMARY KEY (run_id, node)
	);
	CREATE TABLE pruned_runs (
		run_id    TEXT PRIMARY KEY,
		pruned_at TEXT NOT NULL,
		bytes     INTEGER NOT NULL DEFAULT 0
	);`

// salvageProtectionMigration records with kept work the protections its push had (the node's protected branch
// patterns as a JSON list, ” in a row written before they were recorded, and its allow_protected_push), so that
// `kewplan salvage` publishes under the same ones.
const salvageProtectionMigration = `ALTER TABLE node_salvage ADD COLUMN protected_branches TEXT NOT NULL DEFAULT '';
	ALTER TABLE node_salvage ADD COLUMN allow_protected_push INTEGER NOT NULL DEFAULT 0;`

// Salvage is what kewplan kept of a worker whose attempt ended without its push: its verified commits in a
// bundle and its uncommitted changes as a host-built commit and a patch, in Dir under the state directory.
type Salvage struct {
	Dir string `json:"dir"`
	// Why is why the work was kept, completing "kept because …" ("the budget of $2.00 was reached").
	Why string `json:"why"`
	// Repo is the repository the node cloned, where `kewplan salvage` publishes by default. It is not in the
	// JSON: a URL may carry credentials.
	Repo       string `json:"-"`
	BaseCommit string `json:"base_commit"`
	Head       string `json:"head"`
	// Worktree is the commit of the uncommitted changes on top of Head; "" when there were none.
	Worktree     string   `json:"worktree_commit,omitempty"`
	Commits      int      `json:"commits"`
	FilesChanged int      `json:"files_changed"`
	Bytes        int64    `json:"bytes"`
	Skipped      []string `json:"skipped"`
	// CommitsLost says why the agent's commits could not be kept, "" when they were or there were none.
	CommitsLost string `json:"commits_lost,omitempty"`
	// PublishedBranch and PublishedPullRequest are where `kewplan salvage` published it.
	PublishedBranch      string `json:"published_branch,omitempty"`
	PublishedPullRequest string `json:"published_pull_request,omitempty"`
	// Pruned says `runs prune` removed it from disk.
	Pruned bool `json:"pruned,omitempty"`
	// ProtectedBranches and AllowProtectedPush are the protections the node's own push had
	// (planner.NodePlan's): `kewplan salvage` publishes under them. ProtectionsRecorded is false for work kept
	// before the ledger recorded them.
	ProtectedBranches   []string `json:"protected_branches,omitempty"`
	AllowProtectedPush  bool     `json:"allow_protected_push,omitempty"`
	ProtectionsRecorded bool     `json:"-"`
}

// recordSalvage writes a node's salvage row, in the transaction that (re)wrote the node's row; a result without
// salvage leaves any row an earlier attempt wrote.
func recordSalvage(tx *sql.Tx, r *NodeResult) error {
	s := r.Salvage
	if s == nil {
		return nil
	}
	skipped, err := json.Marshal(nonNilStrings(s.Skipped))
	if err != nil {
		return err
	}
	protected := "" // not recorded: `kewplan salvage` then publishes only to the work's own branch
	if s.ProtectionsRecorded {
		b, err := json.Marshal(nonNilStrings(s.ProtectedBranches))
		if err != nil {
			return err
		}
		protected = string(b)
	}
	_, err = tx.Exec(`INSERT OR REPLACE INTO node_salvage (run_id, node, dir, why, repo, base_commit, head_commit,
			worktree_commit, commits, files_changed, bytes, skipped, commits_lost, published_branch, published_pr, pruned,
			protected_branches, allow_protected_push)
			VALUES (?,?,?,?,?,?,?, ?,?,?,?,?,?,?,?,?, ?,?)`,
		r.RunID, r.Node, s.Dir, s.Why, s.Repo, s.BaseCommit, s.Head,
		s.Worktree, s.Commits, s.FilesChanged, s.Bytes, string(skipped), s.CommitsLost, s.PublishedBranch, s.PublishedPullRequest, s.Pruned,
		protected, s.AllowProtectedPush)
	return err
}

// fillSalvage reads the run's salvage rows into its node records.
func (l *Ledger) fillSalvage(runID string, nodes []NodeRecord) error {
	rows, err := l.db.Query(`SELECT node, dir, why, repo, base_commit, head_commit, worktree_commit, commits,
			files_changed, bytes, skipped, commits_lost, published_branch, published_pr, pruned, protected_branches,
			allow_protected_push
		FROM node_salvage WHERE run_id = ?`, runID)
	if err != nil {
		return fmt.Errorf("ledger %s: salvage of run %s: %w", l.path, runID, err)
	}
	defer rows.Close()
	byNode := map[string]*Salvage{}
	for rows.Next() {
		var s Salvage
		var node, skipped, protected string
		if err := rows.Scan(&node, &s.Dir, &s.Why, &s.Repo, &s.BaseCommit, &s.Head, &s.Worktree, &s.Commits,
			&s.FilesChanged, &s.Bytes, &skipped, &s.CommitsLost, &s.PublishedBranch, &s.PublishedPullRequest, &s.Pruned,
			&protected, &s.AllowProtectedPush); err != nil {
			return fmt.Errorf("ledger %s: salvage of run %s: %w", l.path, runID, err)
		}
		if err := strictjson.Decode([]byte(skipped), &s.Skipped); err != nil {
			return fmt.Errorf("ledger %s: salvage of node %s: %w", l.path, node, err)
		}
		if protected != "" {
			if err := json.Unmarshal([]byte(protected), &s.ProtectedBranches); err != nil {
				return fmt.Errorf("ledger %s: salvage of node %s: protected branches: %w", l.path, node, err)
			}
			s.ProtectionsRecorded = true
		}
		byNode[node] = &s
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("ledger %s: salvage of run %s: %w", l.path, runID, err)
	}
	for i := range nodes {
		nodes[i].Salvage = byNode[nodes[i].Node]
	}
	return nil
}

// RecordSalvagePublished records where `kewplan salvage` published a node's kept work.
func (l *Ledger) RecordSalvagePublished(runID, node, branch, pullRequest string) error {
	return l.tx(func(tx *sql.Tx) error {
		res, err := tx.Exec(`UPDATE node_salvage SET published_branch = ?, published_pr = ? WHERE run_id = ? AND node = ?`,
			branch, pullRequest, runID, node)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("run %s recorded no salvage of node %s", runID, node)
		}
		return nil
	})
}

// RecordPrune marks a run as pruned (its checkouts, logs and salvage removed from disk, bytes of them) and its
// salvage rows with it. The run's rows stay: the ledger keeps the history.
func (l *Ledger) RecordPrune(runID string, at time.Time, bytes int64) error {
	return l.tx(func(tx *sql.Tx) error {
		if _, err := tx.Exec(`INSERT OR REPLACE INTO pruned_runs (run_id, pruned_at, bytes) VALUES (?, ?, ?)`, runID, ts(at), bytes); err != nil {
			return err
		}
		_, err := tx.Exec(`UPDATE node_salvage SET pruned = 1 WHERE run_id = ?`, runID)
		return err
	})
}

// PrunedRuns gives, by run id, when `runs prune` removed each pruned run from disk.
func (l *Ledger) PrunedRuns() (map[string]time.Time, error) {
	rows, err := l.db.Query(`SELECT run_id, pruned_at FROM pruned_runs`)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: pruned runs: %w", l.path, err)
	}
	defer rows.Close()
	out := map[string]time.Time{}
	for rows.Next() {
		var id string
		var at sql.NullString
		if err := rows.Scan(&id, &at); err != nil {
			return nil, fmt.Errorf("ledger %s: pruned runs: %w", l.path, err)
		}
		if t := parseTS(at); t != nil {
			out[id] = *t
		}
	}
	return out, rows.Err()
}

// Summary says what was kept: "3 commits, 2 files changed, 14 kB".
func (s *Salvage) Summary() string {
	plural := func(n int, one, many string) string {
		if n == 1 {
			return "1 " + one
		}
		return fmt.Sprintf("%d %s", n, many)
	}
	return fmt.Sprintf("%s, %s, %s", plural(s.Commits, "commit", "commits"),
		plural(s.FilesChanged, "file changed", "files changed"), FormatBytes(s.Bytes))
}

// FormatBytes writes a size in decimal units: "812 B", "14 kB", "3.2 MB".
func FormatBytes(n int64) string {
	switch {
	case n < 1000:
		return fmt.Sprintf("%d B", n)
	case n < 1000*1000:
		return fmt.Sprintf("%d kB", (n+500)/1000)
	default:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	}
}
