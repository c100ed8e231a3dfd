package k8srender_test

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/egress"
	"github.com/kewplan/kewplan/internal/testtools/k8stest"
	"github.com/kewplan/kewplan/k8srender"
)

const proxyImage = "registry.example.com/kewplan-egress-proxy:0123456789abcdef"

// proxyAddress stands for the cluster IP apply reads from the proxy's Service.
const proxyAddress = "10.96.0.42"

// applySecrets are secrets as apply passes them, one per proxy user of the example.
func applySecrets() map[string]string {
	s := map[string]string{}
	for _, u := range []string{"fix", "fix-git", "review", "review-git"} {
		s[u] = strings.Repeat("s", 40) + u
	}
	s[k8srender.ProxyControlKey] = strings.Repeat("c", 64)
	// fix is brokered (review forwards its credentials): its two placeholders.
	for _, name := range []string{"ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"} {
		s[k8srender.PlaceholderKey("fix", name)] = "kewplan-placeholder-" + strings.Repeat("p", 32) + name
	}
	return s
}

func proxyEngineRender(t *testing.T, secrets map[string]string) *k8srender.Manifests {
	t.Helper()
	cfg, _, ok := k8stest.Plan(t, "../examples/kubernetes.hcl")
	if !ok {
		t.Fatal("the example does not plan")
	}
	e := k8stest.Engine(cfg, "agents")
	e.ProxyImage = proxyImage
	opts := k8srender.Options{Engine: e, ProxySecrets: secrets}
	if secrets != nil {
		opts.ProxyAddress = proxyAddress
	}
	return render(t, "../examples/kubernetes.hcl", opts)
}

// TestRenderEgressProxy: with proxy_image the shared objects hold kewplan's proxy, hardened as the contract says;
// each node reaches it with its own user (its allowlist), its git steps with another (the repository's host
// only), and the proxy URLs with their secrets are read from the proxy's Secret, never written in a pod spec.
func TestRenderEgressProxy(t *testing.T) {
	m := proxyEngineRender(t, applySecrets())
	var kinds []string
	for _, o := range m.Shared {
		kinds = append(kinds, o.GetObjectKind().GroupVersionKind().Kind+"/"+o.GetName())
	}
	name := "kewplan-egress-proxy-" + strings.ToLower(m.RunID)
	want := []string{"NetworkPolicy/kewplan-egress-" + m.RunID, "Secret/" + name, "Deployment/" + name, "Service/" + name, "NetworkPolicy/" + name}
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Fatalf("shared objects (-want +got):\n%s", diff)
	}
	agentsNP := m.Shared[0].(*networkingv1.NetworkPolicy)
	secret := m.Shared[1].(*corev1.Secret)
	deploy := m.Shared[2].(*appsv1.Deployment)
	svc := m.Shared[3].(*corev1.Service)
	proxyNP := m.Shared[4].(*networkingv1.NetworkPolicy)

	// fix is brokered: the configuration names the proxy pod's variables, never a value; the Deployment fills
	// them from credentials_secret; the agent step holds placeholders and its base URL, both from the proxy's
	// Secret.
	raw := string(secret.Data[k8srender.ProxyConfigKey])
	if !strings.Contains(raw, `"value_env": "KEW_CREDENTIAL_ANTHROPIC_API_KEY"`) || strings.Contains(raw, `"value":`) {
		t.Errorf("the broker section does not name the proxy's environment alone:\n%s", raw)
	}
	var credEnv []string
	for _, ev := range deploy.Spec.Template.Spec.Containers[0].Env {
		if ev.ValueFrom == nil || ev.ValueFrom.SecretKeyRef == nil || ev.ValueFrom.SecretKeyRef.Name != "agent-keys" {
			t.Errorf("proxy env %s is not read from the credentials Secret", ev.Name)
		}
		credEnv = append(credEnv, ev.Name+"="+ev.ValueFrom.SecretKeyRef.Key)
	}
	if diff := cmp.Diff([]string{"KEW_CREDENTIAL_ANTHROPIC_API_KEY=ANTHROPIC_API_KEY", "KEW_CREDENTIAL_CLAUDE_CODE_OAUTH_TOKEN=CLAUDE_CODE_OAUTH_TOKEN"}, credEnv); diff != "" {
		t.Errorf("proxy credential env (-want +got):\n%s", diff)
	}
	for _, n := range m.Nodes {
		if n.Node != "fix" {
			continue
		}
		for _, ev := range n.Job.Spec.Template.Spec.InitContainers[1].Env {
			if ref := ev.ValueFrom; ref != nil && ref.SecretKeyRef != nil && ref.SecretKeyRef.Name == "agent-keys" {
				t.Errorf("the brokered agent reads %s from the credentials Secret", ev.Name)
			}
			if ev.Name == "ANTHROPIC_BASE_URL" && (ev.ValueFrom == nil || ev.ValueFrom.SecretKeyRef.Key != k8srender.BaseURLKey("fix")) {
				t.Errorf("ANTHROPIC_BASE_URL = %+v", ev)
			}
		}
	}
	// The base URL carries fix's proxy identity, made from its proxy secret: only fix's own Job holds it.
	if got := string(secret.Data[k8srender.BaseURLKey("fix")]); got != "http://"+proxyAddress+":3128/broker/fix/"+egress.BrokerIdentity("fix", applySecrets()["fix"])+"/api.anthropic.com" {
		t.Errorf("fix's base URL %q", got)
	}
	t.Setenv(k8srender.CredentialEnv("ANTHROPIC_API_KEY"), "sk-ant-real-test-value")

	// The configuration is what `kewplan egress-proxy --config` reads.
	cfg, err := egress.ParseConfig(secret.Data[k8srender.ProxyConfigKey])
	if err != nil {
		t.Fatalf("the proxy's configuration does not parse: %v", err)
	}
	allow := map[string][]string{}
	for _, n := range cfg.Nodes {
		allow[n.Name] = n.Allow
		url := string(secret.Data[k8srender.ProxyURLKey(n.Name)])
		if !strings.Contains(url, n.Name+":"+n.Secret+"@"+proxyAddress+":3128") {
			t.Errorf("URL of %s = %q", n.Name, url)
		}
	}
	wantAllow := map[string][]string{"fix": {"api.anthropic.com"}, "fix-git": {"github.com"}, "review": {"openrouter.ai"}, "review-git": {"github.com"}}
	if diff := cmp.Diff(wantAllow, allow); diff != "" {
		t.Errorf("allowlists (-want +got):\n%s", diff)
	}

	// Every container reads its proxy URL by reference, the agent's user apart from the git steps'.
	for _, n := range m.Nodes {
		pod := n.Job.Spec.Template.Spec
		for _, c := range append(append([]corev1.Container{}, pod.InitContainers...), pod.Containers...) {
			user := map[bool]string{true: n.Node, false: n.Node + "-git"}[c.Name == k8srender.StepAgent]
			found := false
			for _, ev := range c.Env {
				for _, s := range cfg.Nodes {
					if strings.Contains(ev.Value, s.Secret) {
						t.Errorf("%s/%s: %s holds a proxy secret by value", n.Node, c.Name, ev.Name)
					}
				}
				if ev.Name == "HTTPS_PROXY" {
					found = true
					ref := ev.ValueFrom.SecretKeyRef
					if ref == nil || ref.Name != secret.Name || ref.Key != k8srender.ProxyURLKey(user) {
						t.Errorf("%s/%s: HTTPS_PROXY = %+v, want key %s of %s", n.Node, c.Name, ev.ValueFrom, k8srender.ProxyURLKey(user), secret.Name)
					}
				}
			}
			if !found {
				t.Errorf("%s/%s has no HTTPS_PROXY", n.Node, c.Name)
			}
		}
	}

	// The selectors agree: the agents' policy, the Service and the Deployment pick the proxy's pods, and the
	// proxy's policy admits the agents' pods.
	podLabels := labels.Set(deploy.Spec.Template.Labels)
	for what, sel := range map[string]map[string]string{
		"agents' NetworkPolicy": agentsNP.Spec.Egress[0].To[0].PodSelector.MatchLabels,
		"Service":               svc.Spec.Selector,
		"Deployment":            deploy.Spec.Selector.MatchLabels,
		"proxy's NetworkPolicy": proxyNP.Spec.PodSelector.MatchLabels,
	} {
		if !labels.SelectorFromSet(sel).Matches(podLabels) {
			t.Errorf("the %s selector %v does not match the proxy's pod labels %v", what, sel, podLabels)
		}
	}
	if got := agentsNP.Spec.Egress[0].Ports[0].Port.IntValue(); got != egress.DefaultPort {
		t.Errorf("agents may reach the proxy on port %d, it listens on %d", got, egress.DefaultPort)
	}
	agentLabels := labels.Set(m.Nodes[0].Job.Spec.Template.Labels)
	if !labels.SelectorFromSet(proxyNP.Spec.Ingress[0].From[0].PodSelector.MatchLabels).Matches(agentLabels) {
		t.Error("the proxy's NetworkPolicy does not admit the agents' pods")
	}
	var egressPorts []int
	for _, p := range proxyNP.Spec.Egress[1].Ports {
		egressPorts = append(egressPorts, p.Port.IntValue())
	}
	if diff := cmp.Diff([]int{443}, egressPorts); diff != "" {
		t.Errorf("proxy egress ports (-want +got):\n%s", diff)
	}

	// The contract's hardening.
	pod := deploy.Spec.Template.Spec
	c := pod.Containers[0]
	sc := c.SecurityContext
	switch {
	case c.Image != proxyImage:
		t.Errorf("image %q", c.Image)
	case *pod.AutomountServiceAccountToken, *pod.EnableServiceLinks:
		t.Error("the proxy's pod mounts a service account token or gets service links")
	case *pod.SecurityContext.RunAsUser != 1001 || !*pod.SecurityContext.RunAsNonRoot || *sc.RunAsUser != 1001:
		t.Error("the proxy does not run as 1001")
	case !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL":
		t.Errorf("container security context %+v", sc)
	case sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Error("no RuntimeDefault seccomp profile")
	case strings.Join(c.Command, " ") != "/kewplan egress-proxy --config /etc/kewplan-egress/config.json":
		t.Errorf("command %q", c.Command)
	}

	ids := map[string]bool{}
	for _, d := range m.Differences {
		ids[d.ID] = true
	}
	if !ids[k8srender.DiffProxyCreds] || ids[k8srender.DiffEgressProxy] {
		t.Errorf("differences %v: want %s and not %s", ids, k8srender.DiffProxyCreds, k8srender.DiffEgressProxy)
	}

	for _, n := range cfg.Nodes {
		if n.Secret != applySecrets()[n.Name] {
			t.Errorf("user %s: secret %q, want the one given", n.Name, n.Secret)
		}
	}
}

// TestRenderEgressProxyPlaceholders: without apply's values (render, plan --format yaml) the manifests hold
// placeholders, the same on every render, and no value computable from the plan: the proxy refuses the secret
// placeholder, so such manifests applied by hand fail closed rather than run with a secret a plan's reader knows.
func TestRenderEgressProxyPlaceholders(t *testing.T) {
	m := proxyEngineRender(t, nil)
	a, err := m.YAML()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := proxyEngineRender(t, nil).YAML()
	if string(a) != string(b) {
		t.Error("two renders of the same plan differ")
	}
	secret := m.Shared[1].(*corev1.Secret)
	if _, err := egress.ParseConfig(secret.Data[k8srender.ProxyConfigKey]); err == nil || !strings.Contains(err.Error(), "shorter than 32") {
		t.Errorf("the proxy accepts the rendered configuration (%v); want the placeholder secret refused", err)
	}
	for key, v := range secret.Data {
		switch {
		case key == k8srender.ProxyConfigKey:
			continue
		case strings.HasPrefix(key, "placeholder."):
			if string(v) != k8srender.ProxySecretPlaceholder {
				t.Errorf("%s = %q, want %q", key, v, k8srender.ProxySecretPlaceholder)
			}
			continue
		case strings.HasPrefix(key, "base-url."):
			if !strings.Contains(string(v), k8srender.ProxyAddressPlaceholder+":3128") {
				t.Errorf("%s = %q, want the address placeholder", key, v)
			}
			continue
		}
		if want := ":" + url.UserPassword("x", k8srender.ProxySecretPlaceholder).String()[2:] + "@" + k8srender.ProxyAddressPlaceholder + ":3128"; !strings.Contains(string(v), want) {
			t.Errorf("%s = %q, want the placeholders (%s)", key, v, want)
		}
	}
	// No 64-hex-digit value (the shape of a secret, or of one derived from the digest) is anywhere in them.
	if hex := regexp.MustCompile(`[0-9a-f]{64}`).FindAllString(string(a), -1); len(hex) > 0 {
		for _, h := range hex {
			if !strings.Contains(string(a), "sha256:"+h) && !strings.Contains(string(a), "sha256: "+h) && !strings.Contains(string(a), "@sha256:"+h) {
				t.Errorf("the manifests hold %s, which is not a digest", h)
			}
		}
	}
}

func TestRenderEgressProxyRefusals(t *testing.T) {
	cfg, p, _ := k8stest.Plan(t, "../examples/kubernetes.hcl")
	e := k8stest.Engine(cfg, "agents")
	e.ProxyImage = proxyImage
	if users := k8srender.ProxyUsers(e, p); strings.Join(users, ",") != "fix,fix-git,review,review-git" {
		t.Errorf("ProxyUsers = %v", users)
	}
	partial := map[string]string{"fix": strings.Repeat("x", 64)}
	for _, kn := range k8srender.BrokerPlaceholderKeys(e, p, nil) {
		partial[kn[0]] = "kewplan-placeholder-" + strings.Repeat("p", 40)
	}
	_, diags := k8srender.Render(p, k8srender.Options{Engine: e, ProxySecrets: partial})
	if !diags.HasErrors() || !strings.Contains(diags.Error(), `proxy user "fix-git"`) {
		t.Errorf("Render with a missing proxy secret: %v", diags)
	}
}

// Without proxy_image nothing runs the proxy the pods point at: a named difference says so.
func TestRenderNoProxyImage(t *testing.T) {
	m := render(t, "../examples/kubernetes.hcl", k8srender.Options{})
	if len(m.Shared) != 1 {
		t.Errorf("shared objects %d, want the NetworkPolicy only", len(m.Shared))
	}
	for _, d := range m.Differences {
		if d.ID == k8srender.DiffEgressProxy {
			if !strings.Contains(d.Kubernetes, "the Service kewplan-egress-proxy in the namespace agents") || !strings.Contains(d.Kubernetes, "proxy_image") {
				t.Errorf("egress-proxy difference: %s", d.Kubernetes)
			}
			return
		}
	}
	t.Errorf("no %s difference in %v", k8srender.DiffEgressProxy, m.Differences)
}

// With every node's network open no pod goes through a proxy, so none is rendered, even with proxy_image.
func TestRenderEgressProxyOpenNetwork(t *testing.T) {
	path := filepath.Join(t.TempDir(), "open.hcl")
	src := `
sandbox {
  network = "open"
  memory  = "4g"
  images  = { "claude-code" = "ghcr.io/acme/agent@sha256:5a1b6c9a0d3e4f7081926354a7b8c9d0e1f2a3b4c5d6e7f8091a2b3c4d5e6f70" }
}

node "fix" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Fix the bug."
}
`
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	e := k8stest.TestEngine("agents")
	e.ProxyImage = proxyImage
	m := render(t, path, k8srender.Options{Engine: e})
	if len(m.Shared) != 1 {
		t.Errorf("shared objects %d, want the open NetworkPolicy only", len(m.Shared))
	}
	for _, d := range m.Differences {
		if d.ID == k8srender.DiffProxyCreds || d.ID == k8srender.DiffEgressProxy {
			t.Errorf("difference %s without a proxied node", d.ID)
		}
	}
	for _, ev := range m.Nodes[0].Job.Spec.Template.Spec.InitContainers[1].Env {
		if ev.Name == "HTTPS_PROXY" {
			t.Error("an open node's agent has HTTPS_PROXY")
		}
	}
}

// A node named like another's git steps' user ("fix-git" beside "fix"), or like a fallback name, gets a user of its
// own: no two nodes ever share a proxy user, whatever their order.
func TestProxyUsersNeverCollide(t *testing.T) {
	for _, order := range [][]string{{"fix", "fix-git", "node2"}, {"fix-git", "fix", "node1"}} {
		var nodes strings.Builder
		for _, n := range order {
			fmt.Fprintf(&nodes, "node %q {\n  runner = \"claude-code\"\n  model = \"claude-sonnet-4-5\"\n  repo = \"https://github.com/acme/widgets.git\"\n  prompt = \"p\"\n}\n", n)
		}
		src := "engine \"kubernetes\" {\n  namespace = \"agents\"\n  git_secret = \"g\"\n  credentials_secret = \"c\"\n  proxy_image = \"" + proxyImage + "\"\n}\nsandbox {\n  network = \"allowlist\"\n  images = { \"claude-code\" = \"ghcr.io/kewplan/kew-agent@sha256:5a1b6c9a0d3e4f7081926354a7b8c9d0e1f2a3b4c5d6e7f8091a2b3c4d5e6f70\" }\n}\n" + nodes.String()
		cfg, p, _ := k8stest.PlanSource(t, src)
		users := k8srender.ProxyUsers(cfg.Engine(config.EngineKubernetes).Kubernetes, p)
		seen := map[string]bool{}
		for _, u := range users {
			if seen[u] {
				t.Errorf("order %v: proxy user %q twice in %v", order, u, users)
			}
			seen[u] = true
		}
		if len(users) != 2*len(order) {
			t.Errorf("order %v: users %v, want two a node", order, users)
		}
	}
}
