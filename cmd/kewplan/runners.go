package main

import "errors"

// RunnersCmd is a STUB: the issue that owns `kewplan runners` replaces this file.
type RunnersCmd struct{}

// Run is not implemented yet.
func (RunnersCmd) Run(env *Env) error { return errors.New("kewplan runners is not implemented yet") }
