package main

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/signal"
	"syscall"

	"github.com/kewplan/kewplan/approval"
	"github.com/kewplan/kewplan/executor"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/executor/statedir"
	"github.com/kewplan/kewplan/views"
)

// recoverState is what every command that reads a state directory does first: when no apply holds it, the runs
// of dead applies are recognised and marked interrupted, their orphaned containers stopped, their work kept and
// the rest removed (executor.Recover), and each gets its receipt, saying so (ledgerReceipts); what it found is
// shown on stderr. It never stops the command: a state directory it cannot write is still read.
func recoverState(env *Env, stateDir string) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rec, err := executor.Recover(ctx, executor.RecoverOptions{StateDir: stateDir, Environ: env.Environ})
	if err != nil {
		rec.Warnings = append(rec.Warnings, "could not look for interrupted runs: "+err.Error())
	}
	if d, err := statedir.New(stateDir); err == nil && !rec.Live && present(d.Ledger()) {
		// Under the lock, as Recover was: an apply that starts meanwhile writes the receipts itself.
		if lock, err := ledger.LockStateDir(d); err == nil {
			rec.Warnings = append(rec.Warnings, ledgerReceipts(d)...)
			lock.Unlock()
		}
	}
	views.Recovery(env.streams(), rec)
}

// ledgerReceipts writes the receipt of every interrupted run that has a start receipt and no receipt of its own
// (its apply died before it could write one): made from the start receipt and the ledger, unsigned, since no key
// is at hand. The caller holds the state directory's lock. It returns what it could not do, as warnings; a state
// directory this user may only read is left as it is.
func ledgerReceipts(d statedir.Dir) []string {
	l, err := ledger.OpenReadOnly(d.Ledger())
	if err != nil {
		return nil // no runs yet, or a ledger Recover has already reported
	}
	defer l.Close()
	runs, err := l.Runs()
	if err != nil {
		return []string{"could not list the runs for their receipts: " + err.Error()}
	}
	var warnings []string
	for i := range runs {
		r := &runs[i]
		name, start := d.Receipt(r.ID), d.StartReceipt(r.ID)
		if r.Status != ledger.RunInterrupted || present(name) || !present(start) {
			continue
		}
		err := writeLedgerReceipt(l, r, name, start)
		if errors.Is(err, os.ErrPermission) || errors.Is(err, syscall.EROFS) {
			return warnings
		}
		if err != nil {
			warnings = append(warnings, "run "+r.ID+" was interrupted, and its receipt could not be written: "+err.Error())
		}
	}
	return warnings
}

func writeLedgerReceipt(l *ledger.Ledger, r *ledger.RunRecord, name, start string) error {
	sr, err := approval.ReadReceipt(start)
	if err != nil {
		return err
	}
	_, nodes, err := l.Run(r.ID)
	if err != nil {
		return err
	}
	denied, err := l.EgressDenials(r.ID)
	if err != nil {
		return err
	}
	byNode := map[string]int{}
	for _, d := range denied {
		byNode[d.Node]++
	}
	return approval.WriteReceipt(name, approval.LedgerReceipt(sr, r, nodes, byNode), nil)
}

// present is whether name exists, as a link or anything else; an error other than its absence counts as present,
// so that nothing is written over what could not be looked at.
func present(name string) bool {
	_, err := os.Lstat(name)
	return !errors.Is(err, fs.ErrNotExist)
}
