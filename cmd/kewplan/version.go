package main

import "github.com/kewplan/kewplan/views"

// VersionCmd prints kewplan's version.
type VersionCmd struct{}

// Help shows an example.
func (VersionCmd) Help() string { return "Example:\n  kewplan version" }

// Run prints the version.
func (VersionCmd) Run(env *Env) error {
	views.NewView(env.streams()).Version(version)
	return nil
}
