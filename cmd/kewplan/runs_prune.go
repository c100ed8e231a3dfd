package main

import (
	"fmt"
	"time"

	"github.com/kewplan/kewplan/executor"
	"github.com/kewplan/kewplan/views"
)

// RunsPruneCmd is `kewplan runs prune --keep N | --before DATE`.
type RunsPruneCmd struct {
	Keep           int    `name:"keep" placeholder:"N" help:"Keep the N newest runs on disk; prune the older ones."`
	Before         string `name:"before" placeholder:"DATE" help:"Prune the runs started before DATE (2026-01-31 or RFC 3339)."`
	runsStateFlags `embed:""`
}

// Help shows an example.
func (RunsPruneCmd) Help() string {
	return "Removes old runs' checkouts, logs and kept work from the state directory; their ledger rows stay, marked\n" +
		"pruned. The newest runs are never touched.\n\nExample:\n  kewplan runs prune --keep 20\n  kewplan runs prune --before 2026-01-31"
}

// Run prunes.
func (c *RunsPruneCmd) Run(env *Env) error {
	opts := executor.PruneOptions{StateDir: c.StateDir, Keep: c.Keep}
	if c.Before != "" {
		t, err := parsePruneDate(c.Before)
		if err != nil {
			return err
		}
		opts.Before = t
	}
	out, err := executor.Prune(opts)
	if err != nil {
		return err
	}
	return views.NewSalvage(views.ViewTypeOf(c.JSON), env.streams()).Pruned(out)
}

func parsePruneDate(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339, "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("--before %q is not a date: write 2026-01-31 or 2026-01-31T12:00:00Z", s)
}
