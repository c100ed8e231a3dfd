// Package k8srender turns a plan into the Kubernetes objects that run it: per node a batch/v1 Job whose pod clones,
// runs the agent with the contract's hardening and pushes, a Secret holding the prompt, and per run a NetworkPolicy
// that lets the pods reach only the egress proxy and the cluster DNS. What Kubernetes cannot express the way
// `docker run` does is returned as named Differences rather than dropped.
//
// It is pure: no I/O, no environment, no API server. It does not apply, watch or delete anything; the engine
// package that drives the cluster (k8sengine) does, from these same objects, so what `kewplan render` writes and
// what apply sends cannot drift.
package k8srender
