package main

import "errors"

// ConformCmd is a STUB: the issue that owns `kewplan conform` replaces this file.
type ConformCmd struct{}

// Run is not implemented yet.
func (ConformCmd) Run(env *Env) error { return errors.New("kewplan conform is not implemented yet") }
