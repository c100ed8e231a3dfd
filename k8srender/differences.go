package k8srender

import (
	"fmt"
	"strconv"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/planner"
)

// Difference is one place where the Kubernetes rendering does not hold the contract's `docker run` hardening the
// same way. The plan shows each one, so a weaker guarantee is never silent.
type Difference struct {
	ID         string `json:"id"`
	Docker     string `json:"docker"`     // what the Docker engine does
	Kubernetes string `json:"kubernetes"` // what the rendered objects do instead
	// Conform names the conform rows (number and name) whose result on Kubernetes depends on this difference; empty when none does.
	Conform []string `json:"conform,omitempty"`
}

// Stable IDs of the differences.
const (
	DiffPidsLimit      = "pids-limit"
	DiffTmpNoexec      = "tmp-noexec"
	DiffHomeMode       = "home-mode"
	DiffNetworkPolicy  = "network-policy-enforcement"
	DiffGitSteps       = "git-steps-in-pod"
	DiffDiskWatchdog   = "disk-watchdog"
	DiffResourceReserv = "resource-requests"
	DiffCleanup        = "cleanup"
	DiffOpenNetwork    = "open-network"
	DiffRuntimeClass   = "runtime-class"
	DiffEgressProxy    = "egress-proxy"
	DiffProxyCreds     = "egress-proxy-credentials"
	DiffBrokered       = "brokered-credentials"
)

// Differences lists the differences that apply to the plan rendered with engine e, in a fixed order.
func Differences(e *config.KubernetesEngine, p *planner.Plan) []Difference {
	var pids int64
	open, limited, proxied, brokered := false, false, false, false
	for _, np := range p.Nodes {
		proxied = proxied || usesProxy(np)
		brokered = brokered || np.CredentialMode == config.CredentialsBrokered
		if np.PidsLimit > pids {
			pids = np.PidsLimit
		}
		open = open || np.Network == config.NetworkOpen
		limited = limited || np.Memory != "" || np.CPUs != ""
	}
	out := []Difference{
		{ID: DiffPidsLimit,
			Docker:     fmt.Sprintf("--pids-limit %d bounds the processes of the agent's container (fork-bomb bound).", pids),
			Kubernetes: "A pod spec has no per-container pids limit; the bound is the kubelet's --pod-max-pids, set by the cluster's operator for every pod of the node. kewplan cannot set or read it.",
			Conform:    []string{"2 hardening"}},
		{ID: DiffTmpNoexec,
			Docker:     "/tmp is a tmpfs mounted noexec.",
			Kubernetes: "/tmp is a memory emptyDir (tmpfs) with a size limit, but a volume's mount options cannot be set: it is mounted exec.",
			Conform:    []string{"2 hardening"}},
		{ID: DiffHomeMode,
			Docker:     "/home/agent is a tmpfs with uid=1001,gid=1001,mode=0700.",
			Kubernetes: "/home/agent is a memory emptyDir owned by the fsGroup 1001 with the mode Kubernetes gives emptyDirs (0777 with the setgid bit); only the agent container mounts it."},
		{ID: DiffNetworkPolicy,
			Docker:     "The allowlist network is a Docker network kewplan checks at preflight.",
			Kubernetes: "Egress is limited by a NetworkPolicy to the egress proxy, the cluster DNS excluded; it holds only where the cluster's network plugin enforces NetworkPolicy (Calico, Cilium, ...). A plugin that ignores it leaves egress open, the cluster DNS included, and the API server cannot tell. A proxied pod has no resolver either way (dnsPolicy None, its only nameserver its own loopback): it reaches the proxy by its Service's cluster IP, which apply reads before it renders the node's Job."},
		{ID: DiffGitSteps,
			Docker:     "The host clones and pushes with its own git credential; no container sees it.",
			Kubernetes: "An init container clones and the last container pushes (or reads the verdict) with the credential of git_secret; they are the only containers that mount it, and one runs before the agent and one after it, never beside it. They share the pod's NetworkPolicy, so the git remote is reached through the egress proxy, which must allow it. The push step refuses a prompt file or verdict sidecar in any commit since the clone, as the host's broker does, but compares the names without regard to ASCII case only (the broker folds Unicode case), and the git steps' image must hold sh, git, grep, tr, tail, head, cp and base64."},
		{ID: DiffDiskWatchdog,
			Docker:     "apply's disk watchdog kills a container when the host's free space falls below --min-free.",
			Kubernetes: "The kubelet evicts pods under disk pressure; the /work emptyDir has no size limit of kewplan's."},
		{ID: DiffCleanup,
			Docker:     "--rm removes the container when it exits.",
			Kubernetes: fmt.Sprintf("The Job and its pod are removed %d s after they finish (ttlSecondsAfterFinished); cancellation deletes them in the foreground.", e.TTLAfterFinished)},
	}
	if limited {
		out = append(out, Difference{ID: DiffResourceReserv,
			Docker:     "--memory and --cpus cap the container; nothing is reserved.",
			Kubernetes: "The agent's limits equal the sandbox's, and its requests equal its limits, so the scheduler reserves them and a node that cannot hold them leaves the pod pending."})
	}
	if open {
		out = append(out, Difference{ID: DiffOpenNetwork,
			Docker:     "network = \"open\" joins the default bridge: any host.",
			Kubernetes: "The NetworkPolicy allows every egress destination, cluster-internal services included."})
	}
	switch {
	case proxied && e.ProxyImage == "":
		out = append(out, Difference{ID: DiffEgressProxy,
			Docker:     "apply starts kewplan's egress proxy, which holds each node to its allowlist.",
			Kubernetes: fmt.Sprintf("No proxy_image is set, so kewplan renders no proxy: the pods' HTTPS_PROXY is port %d of the cluster IP of the Service %s in the namespace %s (read at apply; render writes %s), and their NetworkPolicy lets them reach only that proxy's pods. The operator must run a proxy there that enforces the allowlists (without credentials in the URL); or set proxy_image to kewplan's proxy image (make proxy-image, pushed to a registry the cluster pulls from) and kewplan renders its own.", e.ProxyPort, e.ProxyService, e.ProxyNamespace, ProxyAddressPlaceholder)})
	case proxied:
		out = append(out, Difference{ID: DiffProxyCreds,
			Docker:     "Each node's proxy secret is random per apply and passed to its container by value only.",
			Kubernetes: "kewplan's proxy runs per run (a Deployment, Service, Secret and NetworkPolicy) and holds each node to its own allowlist by a per-node secret in the proxy's Secret, read by secretKeyRef; the git steps have a user of their own that reaches only the repository's host. apply gives every user a fresh random secret and reads the proxy Service's cluster IP before it renders the Jobs; manifests from render or plan --format yaml hold the placeholders " + strconv.Quote(ProxySecretPlaceholder) + " (which the proxy refuses as too short) and " + ProxyAddressPlaceholder + ", never a value a plan's reader could compute. The proxy's NetworkPolicy allows egress to public addresses on the allowlisted ports; the host names are the proxy's to enforce."})
	}
	if brokered && e.ProxyImage == "" {
		out = append(out, Difference{ID: DiffBrokered,
			Docker:     "A brokered node's container holds placeholders for its credentials and its base-URL variable points at kewplan's egress proxy, which adds the real values only on requests to the runner's endpoints while the node runs.",
			Kubernetes: "Without proxy_image the credentials are not brokered: the agent step reads the real values from credentials_secret by secretKeyRef, as with credentials = \"forward\", so the plan on this engine says forward. With proxy_image, kewplan's proxy brokers them."})
	} else if brokered {
		out = append(out, Difference{ID: DiffBrokered,
			Docker:     "A brokered node's container holds placeholders for its credentials and its base-URL variable points at kewplan's egress proxy, which adds the real values only on requests to the runner's endpoints while the node runs; apply reads the proxy's meter into the ledger.",
			Kubernetes: "As on Docker, the agent step holds placeholders (fresh for every apply, from the proxy's Secret) and its base-URL variable points at kewplan's proxy by its Service's cluster IP; only the proxy's pod holds the real values (from credentials_secret by secretKeyRef). The proxy meters and caps each attempt's model calls, and apply reads its meter into the ledger from the proxy pod's log; apply ends each node (its placeholders are refused from then on) and starts each retry on the proxy's control endpoint, which it reaches through the API server's service proxy (RBAC: create on services/proxy in the namespace)."})
	}
	if e.RuntimeClass == "" {
		out = append(out, Difference{ID: DiffRuntimeClass,
			Docker:     "Containers share the host kernel (runc).",
			Kubernetes: "No runtime_class is set, so pods run on the cluster's default runtime; set runtime_class (e.g. \"gvisor\") where the cluster offers a sandboxed one."})
	}
	return out
}
