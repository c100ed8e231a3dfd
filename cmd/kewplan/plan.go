package main

import "errors"

// PlanCmd is a STUB: the issue that owns `kewplan plan` replaces this file.
type PlanCmd struct{}

// Run is not implemented yet.
func (PlanCmd) Run(env *Env) error { return errors.New("kewplan plan is not implemented yet") }
