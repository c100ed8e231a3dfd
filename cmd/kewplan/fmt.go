package main

import "errors"

// FmtCmd is a STUB: the issue that owns `kewplan fmt` replaces this file.
type FmtCmd struct{}

// Run is not implemented yet.
func (FmtCmd) Run(env *Env) error { return errors.New("kewplan fmt is not implemented yet") }
