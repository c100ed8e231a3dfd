package main

import "errors"

// GraphCmd is a STUB: the issue that owns `kewplan graph` replaces this file.
type GraphCmd struct{}

// Run is not implemented yet.
func (GraphCmd) Run(env *Env) error { return errors.New("kewplan graph is not implemented yet") }
