package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/kewplan/kewplan/executor"
	"github.com/kewplan/kewplan/views"
)

// recoverState is what every command that reads a state directory does first: when no apply holds it, the runs
// of dead applies are recognised and marked interrupted, their orphaned containers stopped, their work kept and
// the rest removed (executor.Recover); what it found is shown on stderr. It never stops the command: a state
// directory it cannot write is still read.
func recoverState(env *Env, stateDir string) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rec, err := executor.Recover(ctx, executor.RecoverOptions{StateDir: stateDir, Environ: env.Environ})
	if err != nil {
		rec.Warnings = append(rec.Warnings, "could not look for interrupted runs: "+err.Error())
	}
	views.Recovery(env.streams(), rec)
}
