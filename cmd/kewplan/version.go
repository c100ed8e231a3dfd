package main

import "fmt"

// VersionCmd prints kewplan's version.
type VersionCmd struct{}

// Help shows an example.
func (VersionCmd) Help() string { return "Example:\n  kewplan version" }

// Run prints the version.
func (VersionCmd) Run(env *Env) error {
	fmt.Fprintf(env.Stdout, "kewplan %s\n", version)
	return nil
}
