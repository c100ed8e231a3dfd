// Package ledger is the durable record of applies in a state directory: the SQLite database of runs and node
// outcomes (NodeResult and its statuses are defined here, so every writer and reader shares one vocabulary), and the
// flock that lets only one apply at a time own the directory. Apply records each node before it reports it anywhere
// else; a write that fails stops the run (fail closed). It runs nothing and reads no checkout.
package ledger
