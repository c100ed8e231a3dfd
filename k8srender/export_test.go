package k8srender

// The git steps' scripts and the paths they are written for, for the test that runs them against local
// repositories.
var (
	CloneScript   = cloneScript
	PushScript    = pushScript
	VerdictScript = verdictScript
	ScriptPaths   = map[string]string{
		"work": workMount, "prompt": promptMount, "git-credential": gitSecretMount, "home": gitHomeMount,
	}
)
