package plandiff

import "github.com/kewplan/kewplan/planner"

// Rules are the widening findings of `kewplan diff` as catalogue entries (SARIF rules). Narrowing findings are
// shown to reviewers but never reported as alerts.
func Rules() []planner.Rule {
	return []planner.Rule{
		{
			ID: KindCredentialAdded, Severity: planner.SeverityError,
			Summary:     "Credential reaches a node it did not reach before",
			Description: "A credential is forwarded into a container that did not receive it in the base plan: a runner's declaration was widened, a node moved to a runner that holds it, or a new node shares it. Whatever a prompt-injected agent in that container can read, it can exfiltrate.",
			Help:        "Check that the node needs the credential. If it does not, narrow the runner's credentials or route the node to another runner; if it does, approve the change explicitly.",
		},
		{
			ID: KindNetworkOpened, Severity: planner.SeverityError,
			Summary:     "Node gained open network egress",
			Description: "A node moved from the allowlist network to open egress (or a new node has open egress): a prompt-injected agent can now send what it holds, credentials and code, to any host.",
			Help:        "Keep network = \"allowlist\" and add the hosts the agent needs to the allowlist network, or approve the change explicitly.",
		},
		{
			ID: KindHardeningLost, Severity: planner.SeverityError,
			Summary:     "Container hardening weakened",
			Description: "The node's docker run argv lost a hardening flag (--read-only, a --tmpfs mount, --cap-drop ALL, --security-opt no-new-privileges), raised or removed a resource limit (--pids-limit, --memory, --cpus), or gained a flag that weakens isolation (--privileged, --cap-add, a host namespace, another mount).",
			Help:        "Restore the limit or flag in the sandbox block, or approve the change explicitly.",
		},
		{
			ID: KindEgressAdded, Severity: planner.SeverityError,
			Summary:     "Node can reach a host it could not reach before, while holding a credential",
			Description: "A host was added to the node's egress (its runner's endpoints, the sandbox's egress block or the node's own), or a new node holding a credential can reach hosts. Every host a prompt-injected agent can reach is a place it can send the credentials and code it holds.",
			Help:        "Check that the node needs the host. If it does not, remove it from the egress block (or the runner's endpoints); if it does, approve the change explicitly.",
		},
		{
			ID: KindCredentialModeWidened, Severity: planner.SeverityError,
			Summary:     "Credential now held by the container",
			Description: "A credential the node could only use through kewplan's egress proxy (brokered: its container held a placeholder) is now forwarded into its container. Whatever a prompt-injected agent can read it can send to any host it reaches, write into a commit or print.",
			Help:        "Keep the node brokered (remove credentials = \"forward\", keep network = \"allowlist\" and kewplan's own proxy), or approve the change explicitly.",
		},
		{
			ID: KindImageUnpinned, Severity: planner.SeverityError,
			Summary:     "Image moved off its pinned digest",
			Description: "The node's image was pinned by @sha256: digest and no longer is (or a new node runs an unpinned image): the tag can be moved to other content after this review.",
			Help:        "Pin the image by digest: \"name:tag@sha256:<digest>\".",
		},
		{
			ID: KindRuntimeWidened, Severity: planner.SeverityError,
			Summary:     "Node left its isolation tier",
			Description: "The node's container runtime changed away from one that gives it a kernel of its own (gVisor's runsc, Kata), or to a runtime kewplan cannot vouch for: under runc the agent shares the host's kernel, so one kernel bug lets a prompt-injected agent out of the container.",
			Help:        "Keep runtime = \"runsc\" on the node or in the sandbox block, or approve the change explicitly.",
		},
		{
			ID: KindBudgetRaised, Severity: planner.SeverityError,
			Summary:     "Budget cap raised or removed",
			Description: "A node's cap on cost, tokens, turns or time (max_usd, max_tokens, max_turns, timeout), or the apply-wide max_usd, was raised or removed: an agent that loops can now spend more before kewplan stops it.",
			Help:        "Check that the run needs the larger budget, then approve the change explicitly; otherwise restore the cap.",
		},
		pushRule,
		providerFetchRule,
	}
}
