package main

import "errors"

// ShowCmd is a STUB: the issue that owns `kewplan show` replaces this file.
type ShowCmd struct{}

// Run is not implemented yet.
func (ShowCmd) Run(env *Env) error { return errors.New("kewplan show is not implemented yet") }
