package executor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// PruneOptions choose the runs `kewplan runs prune` removes from disk: all but the Keep newest, or those started
// before Before. Exactly one is set.
type PruneOptions struct {
	StateDir string
	Keep     int
	Before   time.Time
	// Now is when the prune is recorded; zero means time.Now().
	Now time.Time
}

// PrunedRun is one run whose checkouts, logs and salvage were removed.
type PrunedRun struct {
	RunID   string    `json:"run_id"`
	Started time.Time `json:"started_at"`
	Bytes   int64     `json:"bytes"`
}

// PruneOutcome is what Prune did.
type PruneOutcome struct {
	Pruned []PrunedRun `json:"pruned"`
	// Kept counts the recorded runs left on disk.
	Kept  int   `json:"kept"`
	Bytes int64 `json:"bytes"`
}

// Prune removes old runs' checkouts, logs and salvage from the state directory and marks them pruned in the
// ledger, whose rows stay. The newest runs are never touched: with Keep, the Keep newest; with Before, every run
// started at or after it. It holds the state directory's lock, so no apply runs meanwhile.
func Prune(opts PruneOptions) (*PruneOutcome, error) {
	if (opts.Keep > 0) == !opts.Before.IsZero() {
		return nil, errors.New("runs prune: give exactly one of --keep N (N at least 1) or --before DATE")
	}
	if opts.Now.IsZero() {
		opts.Now = time.Now()
	}
	dir, l, lock, err := openStateForMaintenance(opts.StateDir)
	if err != nil {
		return nil, err
	}
	defer lock.Unlock()
	defer l.Close()
	runs, err := l.Runs() // newest first
	if err != nil {
		return nil, err
	}
	pruned, err := l.PrunedRuns()
	if err != nil {
		return nil, err
	}
	out := &PruneOutcome{Pruned: []PrunedRun{}}
	for i, r := range runs {
		old := opts.Keep > 0 && i >= opts.Keep || !opts.Before.IsZero() && r.StartedAt.Before(opts.Before)
		if !old {
			out.Kept++
			continue
		}
		if strings.ContainsAny(r.ID, `/\`) || r.ID == "" || r.ID == "." || r.ID == ".." {
			return out, fmt.Errorf("run id %q is not a plain name; the ledger %s was not written by kewplan", r.ID, l.Path())
		}
		var bytes int64
		for _, p := range []string{dir.RunCheckouts(r.ID), dir.RunLogs(r.ID), dir.RunSalvage(r.ID)} {
			n, err := removeTree(p)
			bytes += n
			if err != nil {
				return out, fmt.Errorf("prune run %s: %w", r.ID, err)
			}
		}
		if _, done := pruned[r.ID]; done && bytes == 0 {
			continue // pruned before, nothing new on disk
		}
		if err := l.RecordPrune(r.ID, opts.Now, bytes); err != nil {
			return out, err
		}
		out.Pruned = append(out.Pruned, PrunedRun{RunID: r.ID, Started: r.StartedAt, Bytes: bytes})
		out.Bytes += bytes
	}
	return out, nil
}

// removeTree removes a directory of the state directory and says how many bytes of files it held. Links are
// counted and removed themselves, never followed.
func removeTree(root string) (int64, error) {
	var n int64
	err := filepath.WalkDir(root, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // unreadable parts are still removed below
		}
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return n, err
	}
	return n, os.RemoveAll(root)
}
