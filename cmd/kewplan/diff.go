package main

import "errors"

// DiffCmd is a STUB: the issue that owns `kewplan diff` replaces this file.
type DiffCmd struct{}

// Run is not implemented yet.
func (DiffCmd) Run(env *Env) error { return errors.New("kewplan diff is not implemented yet") }
