// Package k8sengine drives a Kubernetes cluster with the objects k8srender made: server-side apply, the pod's log
// followed for the agent's stdout, a Job's outcome read from its status, pods and events, foreground deletion on
// cancel, an orphan sweep by kewplan's labels, and a preflight of the namespace, Secrets and runtime class. It is
// the only package that imports client-go. It does not plan, render, meter or record: the apply loop does, through
// the methods of Cluster.
package k8sengine
