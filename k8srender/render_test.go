package k8srender_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/internal/testtools/golden"
	"github.com/kewplan/kewplan/internal/testtools/k8stest"
	"github.com/kewplan/kewplan/k8srender"
	"github.com/kewplan/kewplan/planner"
)

func render(t *testing.T, path string, opts k8srender.Options) *k8srender.Manifests {
	t.Helper()
	cfg, p, ok := k8stest.Plan(t, path)
	if !ok {
		t.Fatalf("%s does not plan cleanly", path)
	}
	if opts.Engine == nil {
		opts.Engine = k8stest.Engine(cfg, "agents")
	}
	m, diags := k8srender.Render(p, opts)
	if diags.HasErrors() {
		t.Fatalf("Render(%s): %v", path, diags)
	}
	return m
}

// TestRenderGolden keeps the manifests of the Kubernetes example as golden files: reviewed in diffs, refreshed with
// KEWPLAN_UPDATE=1.
func TestRenderGolden(t *testing.T) {
	m := render(t, "../examples/kubernetes.hcl", k8srender.Options{})
	files, err := m.Files()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, f.Name)
		golden.Check(t, filepath.Join("testdata", "kubernetes", f.Name), f.Data)
	}
	if diff := cmp.Diff([]string{"00-shared.yaml", "01-kew-fix.yaml", "02-kew-review.yaml"}, names); diff != "" {
		t.Errorf("Files() names mismatch (-want +got):\n%s", diff)
	}
}

// TestRenderHardening checks the contract's hardening field by field on every container of every example node.
func TestRenderHardening(t *testing.T) {
	for _, ex := range k8stest.Examples(t, "..") {
		cfg, p, ok := k8stest.Plan(t, ex)
		if !ok {
			continue
		}
		m, diags := k8srender.Render(p, k8srender.Options{Engine: k8stest.Engine(cfg, "agents")})
		if diags.HasErrors() {
			t.Fatalf("Render(%s): %v", ex, diags)
		}
		for _, n := range m.Nodes {
			t.Run(filepath.Base(ex)+"/"+n.Node, func(t *testing.T) {
				checkNode(t, p.Node(n.Node), n)
			})
		}
	}
}

func checkNode(t *testing.T, np *planner.NodePlan, n *k8srender.NodeObjects) {
	job := n.Job
	if *job.Spec.BackoffLimit != 0 || *job.Spec.ActiveDeadlineSeconds != int64(np.Timeout.Seconds()) || job.Spec.TTLSecondsAfterFinished == nil {
		t.Errorf("job spec: backoffLimit %d, activeDeadlineSeconds %d (timeout %s), ttl %v", *job.Spec.BackoffLimit, *job.Spec.ActiveDeadlineSeconds, np.Timeout, job.Spec.TTLSecondsAfterFinished)
	}
	pod := job.Spec.Template.Spec
	psc := pod.SecurityContext
	got := map[string]any{
		"automountServiceAccountToken": *pod.AutomountServiceAccountToken,
		"enableServiceLinks":           *pod.EnableServiceLinks,
		"restartPolicy":                string(pod.RestartPolicy),
		"runAsNonRoot":                 *psc.RunAsNonRoot,
		"runAsUser":                    *psc.RunAsUser,
		"runAsGroup":                   *psc.RunAsGroup,
		"fsGroup":                      *psc.FSGroup,
		"seccomp":                      string(psc.SeccompProfile.Type),
	}
	want := map[string]any{
		"automountServiceAccountToken": false, "enableServiceLinks": false, "restartPolicy": "Never",
		"runAsNonRoot": true, "runAsUser": int64(1001), "runAsGroup": int64(1001), "fsGroup": int64(1001),
		"seccomp": "RuntimeDefault",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pod security mismatch (-want +got):\n%s", diff)
	}
	all := append(append([]corev1.Container{}, pod.InitContainers...), pod.Containers...)
	var order []string
	for _, c := range all {
		order = append(order, c.Name)
		sc := c.SecurityContext
		got := map[string]any{
			"readOnlyRootFilesystem": *sc.ReadOnlyRootFilesystem, "allowPrivilegeEscalation": *sc.AllowPrivilegeEscalation,
			"runAsNonRoot": *sc.RunAsNonRoot, "drop": sc.Capabilities.Drop, "add": len(sc.Capabilities.Add),
			"seccomp": string(sc.SeccompProfile.Type),
		}
		want := map[string]any{
			"readOnlyRootFilesystem": true, "allowPrivilegeEscalation": false, "runAsNonRoot": true,
			"drop": []corev1.Capability{"ALL"}, "add": 0, "seccomp": "RuntimeDefault",
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("container %s security mismatch (-want +got):\n%s", c.Name, diff)
		}
		mounts := map[string]string{}
		for _, vm := range c.VolumeMounts {
			mounts[vm.Name] = vm.MountPath
		}
		_, hasGit := mounts["git-credential"]
		_, hasPrompt := mounts["prompt"]
		switch c.Name {
		case k8srender.StepAgent:
			if hasGit || hasPrompt {
				t.Errorf("the agent container mounts the git credential or the prompt Secret: %v", mounts)
			}
			if mounts["tmp"] != "/tmp" || mounts["home"] != "/home/agent" || mounts["work"] != "/work" {
				t.Errorf("agent mounts = %v, want /work, /tmp and /home/agent", mounts)
			}
			var names []string
			for _, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && strings.HasPrefix(e.ValueFrom.SecretKeyRef.Key, "url-") {
					continue // kewplan's egress proxy URL of the node (the examples that name proxy_image)
				}
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					if e.ValueFrom.SecretKeyRef.Name != "agent-keys" || e.ValueFrom.SecretKeyRef.Key != e.Name {
						t.Errorf("credential %s comes from %s/%s", e.Name, e.ValueFrom.SecretKeyRef.Name, e.ValueFrom.SecretKeyRef.Key)
					}
					names = append(names, e.Name)
				} else if e.Value != "" && strings.Contains(strings.ToUpper(e.Name), "KEY") && !strings.HasPrefix(e.Name, "GIT_CONFIG_KEY_") {
					t.Errorf("env %s carries a value", e.Name)
				}
			}
			if diff := cmp.Diff(np.Credentials, names); diff != "" {
				t.Errorf("agent credentials mismatch (-want +got):\n%s", diff)
			}
			if np.Container != nil {
				if diff := cmp.Diff(np.Container.Args, c.Args); diff != "" {
					t.Errorf("agent args mismatch (-want +got):\n%s", diff)
				}
			}
			if np.Memory != "" && c.Resources.Limits.Memory().IsZero() {
				t.Errorf("memory %s not rendered as a limit", np.Memory)
			}
		case k8srender.StepClone:
			if !hasGit || !hasPrompt {
				t.Errorf("clone mounts = %v, want the git credential and the prompt", mounts)
			}
		case k8srender.StepPush:
			if !hasGit || hasPrompt {
				t.Errorf("push mounts = %v, want the git credential and not the prompt", mounts)
			}
		case k8srender.StepVerdict:
			if hasGit || hasPrompt {
				t.Errorf("verdict mounts = %v, want neither the git credential nor the prompt", mounts)
			}
		}
	}
	last := k8srender.StepPush
	if np.Role == config.RoleReviewer {
		last = k8srender.StepVerdict
	}
	if diff := cmp.Diff([]string{k8srender.StepClone, k8srender.StepAgent, last}, order); diff != "" {
		t.Errorf("step order mismatch (-want +got):\n%s", diff)
	}
	if n.Job.Labels[k8srender.LabelManagedBy] != "kewplan" || n.Prompt.Labels[k8srender.LabelNode] == "" || job.Spec.Template.Labels[k8srender.LabelRun] == "" {
		t.Errorf("labels missing: job %v, prompt %v", n.Job.Labels, n.Prompt.Labels)
	}
}

// TestRenderKnownAfterApply: a value known only after apply is rendered as the plan shows it, with an annotation
// naming the node it waits for.
func TestRenderKnownAfterApply(t *testing.T) {
	m := render(t, "../examples/kubernetes.hcl", k8srender.Options{})
	review := m.Nodes[1]
	if review.Node != "review" {
		t.Fatalf("second node is %q", review.Node)
	}
	if got := review.Job.Annotations[k8srender.AnnotationWaitsFor]; got != "fix" {
		t.Errorf("waits-for annotation = %q, want fix", got)
	}
	if got := string(review.Prompt.Data[k8srender.PromptKey]); got != planner.UnknownValue {
		t.Errorf("prompt = %q, want %q", got, planner.UnknownValue)
	}
	var ref string
	for _, e := range review.Job.Spec.Template.Spec.InitContainers[0].Env {
		if e.Name == "KEW_REF" {
			ref = e.Value
		}
	}
	if ref != planner.UnknownValue {
		t.Errorf("KEW_REF = %q, want %q", ref, planner.UnknownValue)
	}
	if _, ok := m.Nodes[0].Job.Annotations[k8srender.AnnotationWaitsFor]; ok {
		t.Errorf("fix waits for nothing but has %v", m.Nodes[0].Job.Annotations)
	}
}

func TestRenderDifferencesAndOptions(t *testing.T) {
	e := k8stest.TestEngine("agents")
	e.RuntimeClass = "gvisor"
	m := render(t, "../examples/kubernetes.hcl", k8srender.Options{Engine: e, RunID: "run-1", NameSuffix: "run-1"})
	var ids []string
	for _, d := range m.Differences {
		ids = append(ids, d.ID)
	}
	want := []string{k8srender.DiffPidsLimit, k8srender.DiffTmpNoexec, k8srender.DiffHomeMode, k8srender.DiffNetworkPolicy,
		k8srender.DiffGitSteps, k8srender.DiffDiskWatchdog, k8srender.DiffCleanup, k8srender.DiffResourceReserv, k8srender.DiffEgressProxy, k8srender.DiffBrokered}
	if diff := cmp.Diff(want, ids); diff != "" {
		t.Errorf("differences mismatch (-want +got):\n%s", diff)
	}
	if got := m.Nodes[0].Job.Name; got != "kew-fix-run-1" {
		t.Errorf("job name = %q", got)
	}
	if got := *m.Nodes[0].Job.Spec.Template.Spec.RuntimeClassName; got != "gvisor" {
		t.Errorf("runtimeClassName = %q", got)
	}
	if got := m.Nodes[0].Job.Labels[k8srender.LabelRun]; got != "run-1" {
		t.Errorf("run label = %q", got)
	}
}

func TestRenderRefusals(t *testing.T) {
	_, p, _ := k8stest.Plan(t, "../examples/kubernetes.hcl")
	if _, diags := k8srender.Render(p, k8srender.Options{}); !diags.HasErrors() || diags[0].Summary != "No kubernetes engine" {
		t.Errorf("Render without an engine: %v", diags)
	}
	if _, diags := k8srender.Render(p, k8srender.Options{Engine: k8stest.TestEngine("a"), RunID: "no spaces"}); !diags.HasErrors() {
		t.Errorf("Render with run id %q: no error", "no spaces")
	}
	_, bad, _ := k8stest.Plan(t, "../examples/invalid/unknown-runner.hcl")
	if bad == nil {
		t.Skip("the invalid example did not reach the planner")
	}
	m, diags := k8srender.Render(bad, k8srender.Options{Engine: k8stest.TestEngine("a")})
	if !diags.HasErrors() || diags[0].Summary != "Node not rendered" {
		t.Errorf("Render(invalid) diagnostics = %v", diags)
	}
	if m == nil {
		t.Fatal("Render(invalid) returned no manifests")
	}
}

// TestObjectNames: names that are not DNS labels are folded, and a hash keeps them apart.
func TestObjectNames(t *testing.T) {
	for _, tc := range []struct{ node, want string }{
		{"fix", "kew-fix"},
		{"Fix_It", "kew-fix-it-"},
	} {
		p := &planner.Plan{ConfigDigest: "sha256:abc", Nodes: []*planner.NodePlan{{Name: tc.node, Image: "x", Role: "worker"}}}
		m, diags := k8srender.Render(p, k8srender.Options{Engine: k8stest.TestEngine("a")})
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		if got := m.Nodes[0].Job.Name; !strings.HasPrefix(got, tc.want) || len(got) > 52 {
			t.Errorf("name of %q = %q, want prefix %q", tc.node, got, tc.want)
		}
	}
}

// TestRenderNoDNS: a proxied node's pod has no resolver (dnsPolicy None, its only nameserver its own loopback) and
// reaches the proxy by the address apply read from its Service; the run's NetworkPolicy lets it reach the proxy
// and nothing else, the cluster DNS included. A name looked up is a channel out through the cluster's resolver.
func TestRenderNoDNS(t *testing.T) {
	for name, tc := range map[string]struct {
		address, want string
	}{
		"apply":  {"10.96.0.42", "http://10.96.0.42:3128"},
		"ipv6":   {"fd00::2a", "http://[fd00::2a]:3128"},
		"render": {"", "http://" + k8srender.ProxyAddressPlaceholder + ":3128"},
	} {
		t.Run(name, func(t *testing.T) {
			m := render(t, "../examples/kubernetes.hcl", k8srender.Options{ProxyAddress: tc.address})
			for _, n := range m.Nodes {
				pod := n.Job.Spec.Template.Spec
				if pod.DNSPolicy != corev1.DNSNone || pod.DNSConfig == nil ||
					!cmp.Equal(pod.DNSConfig.Nameservers, []string{"127.0.0.1"}) || len(pod.DNSConfig.Searches) != 0 || len(pod.DNSConfig.Options) != 0 {
					t.Errorf("%s: dnsPolicy %q, dnsConfig %+v; want None with the loopback only", n.Node, pod.DNSPolicy, pod.DNSConfig)
				}
				for _, c := range append(append([]corev1.Container{}, pod.InitContainers...), pod.Containers...) {
					got := ""
					for _, ev := range c.Env {
						if ev.Name == "HTTPS_PROXY" {
							got = ev.Value
						}
					}
					if got != tc.want {
						t.Errorf("%s/%s: HTTPS_PROXY %q, want %q", n.Node, c.Name, got, tc.want)
					}
				}
			}
			np := m.Shared[0].(*networkingv1.NetworkPolicy)
			if len(np.Spec.Egress) != 1 || len(np.Spec.Egress[0].To) != 1 || np.Spec.Egress[0].To[0].PodSelector == nil {
				t.Fatalf("egress rules %+v, want the proxy's pods only", np.Spec.Egress)
			}
			for _, p := range np.Spec.Egress[0].Ports {
				if p.Port.IntValue() == 53 {
					t.Errorf("the agents' NetworkPolicy allows port 53: %+v", np.Spec.Egress)
				}
			}
		})
	}
}
