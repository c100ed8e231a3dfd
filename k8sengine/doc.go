// Package k8sengine drives a Kubernetes cluster with the objects k8srender made: server-side apply, the pod's log
// followed for the agent's stdout, a Job's outcome read from its status, pods and events (kept by one watch per
// kind for the whole run, RunWatch), the proxy Service's cluster IP, foreground deletion on
// cancel, an orphan sweep by kewplan's labels, and a preflight of the namespace, Secrets and runtime class. It is
// the only package of the kewplan binary that imports client-go, and it uses only the dynamic and REST clients
// (API), never the typed clientset. It does not plan, render, meter or record: the apply loop does, through
// the methods of Cluster.
package k8sengine

// How the apply loop drives a node on Kubernetes (`kewplan apply --engine kubernetes`, in executor/kubernetes.go;
// the loop keeps the graph, parallelism, budgets, ledger and events):
//
//	Preflight(ctx, engine, credentials)          once per run, before the first node; Errors stop the run
//	WatchRun(ctx, run)                           once per run: the Jobs, pods and events every node's wait reads
//	Apply(ctx, manifests.Shared)                 once per run, then ServiceClusterIP of the egress proxy's Service
//	k8srender.Render(plan, Options{RunID, NameSuffix: RunID, ProxyAddress})   per node with the upstream outputs
//	Apply(ctx, node.Objects())                   when the node's dependencies are done
//	RunWatch.Observe(job) at each change until the agent step runs, then OpenLog(ctx, pod, "agent") into
//	  runners.Feed(meter, transcript)
//	RunWatch.Observe(job) until succeeded or failed: Outcome.Commit for a worker; for a reviewer,
//	  ReadVerdict(OpenLog(ctx, pod, "verdict")) into the same verdict parser as on Docker
//	DeleteRun(ctx, run) on cancel (SIGINT/SIGTERM) and at the end; Sweep(ctx, live) at start for crashed runs
//
// The loop therefore needs from the engine adapter interface: start a node from its rendered objects, a reader of
// the agent's stdout, a wait for the node's outcome (exit status or failure reason, commit, verdict bytes), and
// cancel/cleanup of one run; the Docker adapter has the same four.
