package main

import "errors"

// ValidateCmd is a STUB: the issue that owns `kewplan validate` replaces this file.
type ValidateCmd struct{}

// Run is not implemented yet.
func (ValidateCmd) Run(env *Env) error { return errors.New("kewplan validate is not implemented yet") }
