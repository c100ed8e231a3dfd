package main

import "errors"

// RunsCmd is a STUB: the issue that owns `kewplan runs` replaces this file.
type RunsCmd struct{}

// Run is not implemented yet.
func (RunsCmd) Run(env *Env) error { return errors.New("kewplan runs is not implemented yet") }
