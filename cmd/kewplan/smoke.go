package main

import "errors"

// SmokeCmd is a STUB: the issue that owns `kewplan smoke` replaces this file.
type SmokeCmd struct{}

// Run is not implemented yet.
func (SmokeCmd) Run(env *Env) error { return errors.New("kewplan smoke is not implemented yet") }
