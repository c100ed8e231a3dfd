// Package broker publishes a worker's commits from host-owned repositories: it copies the object data out of the
// agent's hostile checkout (never running git there), verifies it, pushes with the host's own git configuration and
// credentials, and opens a pull request with gh when asked. It is the only code that pushes on an agent's behalf.
package broker
