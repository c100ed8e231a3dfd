package main

import "errors"

// ApplyCmd is a STUB: the issue that owns `kewplan apply` replaces this file.
type ApplyCmd struct{}

// Run is not implemented yet.
func (ApplyCmd) Run(env *Env) error { return errors.New("kewplan apply is not implemented yet") }
