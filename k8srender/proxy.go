package k8srender

import (
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/egress"
	"github.com/kewplan/kewplan/internal/brokerplan"
	"github.com/kewplan/kewplan/planner"
)

// StepEgressProxy is the kewplan.step label of the egress proxy's pods.
const StepEgressProxy = "egress-proxy"

// ProxyConfigKey is the key of the egress proxy's configuration (egress.Config, JSON) in the proxy's Secret; a
// node's proxy URL is under ProxyURLKey(user).
const ProxyConfigKey = "config.json"

// proxyConfigMount is where the proxy's pod mounts its Secret.
const proxyConfigMount = "/etc/kewplan-egress"

// ProxyControlKey is the key, in Options.ProxySecrets, of the secret of the proxy's control endpoint (apply mints
// it per run; "." is in no user name). It is in the proxy's configuration only, in the proxy's Secret, which no
// agent step reads but for its own URL, placeholders and base URL.
const ProxyControlKey = "control.secret"

// ProxyURLKey is the key of one proxy user's URL (http://user:secret@service:port) in the proxy's Secret.
func ProxyURLKey(user string) string { return "url-" + user }

// proxyUserPattern is what the egress proxy accepts as a user (egress.NodeConfig.Name).
var proxyUserPattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,58}$`)

// kewplanProxy is kewplan's own egress proxy of one run, rendered when the engine names proxy_image: as on Docker,
// every proxied node has its own user and secret, so the proxy holds each node to its own allowlist; on Kubernetes
// each node also has a "-git" user that may reach only its repository's host, for the clone and push steps.
type kewplanProxy struct {
	name    string // the Secret, Deployment, Service and NetworkPolicy name
	users   map[string]string
	cfg     egress.Config
	urls    map[string]string // ProxyURLKey(user) -> URL
	ports   map[int]bool      // the ports of the allowlisted hosts
	secrets map[string]string // Options.ProxySecrets
	private bool              // some user may reach hosts on private addresses (private_hosts)
	// brokered are the nodes whose credentials the proxy brokers, by node name; credentials the names the
	// proxy's pod reads from credentials_secret for them.
	brokered    map[string]*brokerUse
	credentials map[string]bool
}

// brokerUse is what a brokered node's agent step gets: a placeholder (from the proxy's Secret) for each of its
// credentials the credentials Secret holds, and its base-URL variable pointing at the proxy's broker.
type brokerUse struct {
	user, baseURLVar string
	names            []string
}

// PlaceholderKey is the key, in the proxy's Secret, of the placeholder a brokered node's user holds for the
// credential name; BaseURLKey the key of its base URL. Neither can be a user's URL key ("." is in no user name).
func PlaceholderKey(user, name string) string { return "placeholder." + user + "." + name }

// BaseURLKey is the key of a brokered user's base URL in the proxy's Secret.
func BaseURLKey(user string) string { return "base-url." + user }

// CredentialEnv is the environment variable of the proxy's pod that holds the credential name's real value (from
// credentials_secret by secretKeyRef).
func CredentialEnv(name string) string { return "KEW_CREDENTIAL_" + name }

// usesProxy says whether the node's pod goes through the egress proxy.
func usesProxy(np *planner.NodePlan) bool { return np.Network != config.NetworkOpen }

// newKewplanProxy gives every proxied node its users, secrets and allowlists.
func (r *renderer) newKewplanProxy(p *planner.Plan, secrets map[string]string) (*kewplanProxy, error) {
	kp := &kewplanProxy{name: r.sharedName("egress-proxy"), users: map[string]string{}, urls: map[string]string{},
		ports: map[int]bool{}, secrets: secrets, brokered: map[string]*brokerUse{}, credentials: map[string]bool{},
		cfg: egress.Config{Listen: egress.DefaultListen, Nodes: []egress.NodeConfig{}, UpstreamCAPEM: r.upstreamCA}}
	if net.ParseIP(r.proxyAddress) != nil {
		// A brokered agent's base-URL requests that go through HTTP_PROXY name the Service, not the pod.
		kp.cfg.SelfAddresses = []string{net.JoinHostPort(r.proxyAddress, strconv.FormatInt(r.e.ProxyPort, 10))}
	}
	host := r.proxyAddress
	taken := map[string]bool{}
	for i, np := range p.Nodes {
		if np.Errors || !usesProxy(np) {
			continue
		}
		// A node's user and its git steps' user ("-git") are both the node's: a name whose either is taken (a node
		// named "fix-git" beside "fix") or that the proxy would refuse gets the first free "node<N>".
		user := np.Slug
		for n := i + 1; !proxyUserPattern.MatchString(user+"-git") || taken[user] || taken[user+"-git"]; n++ {
			user = "node" + strconv.Itoa(n)
		}
		taken[user], taken[user+"-git"] = true, true
		kp.users[np.Name] = user
		allow := make([]string, 0, len(np.Egress))
		for _, h := range np.Egress {
			allow = append(allow, h.String())
			kp.ports[h.Port] = true
		}
		var gitAllow, gitPrivate []string
		if h, port, ok := repoHost(np); ok {
			gitAllow = []string{config.HostPattern{Host: h, Port: port}.String()}
			kp.ports[port] = true
			gitPrivate = privateFor(np.PrivateHosts, h)
		}
		for _, u := range []struct {
			name    string
			allow   []string
			private []string
		}{{user, allow, np.PrivateHosts}, {user + "-git", gitAllow, gitPrivate}} {
			secret, err := r.proxySecret(secrets, u.name)
			if err != nil {
				return nil, err
			}
			nc := egress.NodeConfig{Name: u.name, Secret: secret, Allow: nonNilStrings(u.allow), PrivateHosts: u.private}
			if u.name == user {
				if nc.Broker, err = r.broker(kp, np, user, secret, secrets); err != nil {
					return nil, err
				}
			}
			kp.cfg.Nodes = append(kp.cfg.Nodes, nc)
			kp.private = kp.private || len(u.private) > 0
			kp.urls[ProxyURLKey(u.name)] = egress.ProxyURL(host, int(r.e.ProxyPort), u.name, secret)
		}
	}
	if len(kp.brokered) > 0 {
		// Apply ends each brokered node, and starts each retry, on the proxy's control endpoint.
		secret, err := r.proxySecret(secrets, ProxyControlKey)
		if err != nil {
			return nil, err
		}
		kp.cfg.ControlSecret = secret
	}
	return kp, nil
}

// broker is a brokered node's broker section (nil for one whose credentials are forwarded, or whose runner reads
// its API's address from no variable): the real values come from the proxy pod's environment, the placeholders
// and the base URL go to the proxy's Secret, which the agent step reads them from.
func (r *renderer) broker(kp *kewplanProxy, np *planner.NodePlan, user, proxySecret string, secrets map[string]string) (*egress.BrokerConfig, error) {
	if !brokerplan.Brokered(np) || np.Container == nil || np.Container.BaseURL == "" {
		return nil, nil
	}
	held := func(name string) bool { return r.credentialKeys == nil || slices.Contains(r.credentialKeys, name) }
	src := func(name string) (string, string, bool) { return "", CredentialEnv(name), held(name) }
	mint := func(name string) (string, error) {
		key := PlaceholderKey(user, name)
		ph, err := r.proxySecret(secrets, key)
		kp.urls[key] = ph
		return ph, err
	}
	cfg, t, phs, err := brokerplan.Config(np, src, mint)
	if err != nil || cfg == nil || len(phs) == 0 {
		return nil, err
	}
	if t, ok := r.endsAt[np.Name]; ok {
		t = t.UTC()
		cfg.EndsAt = &t
	}
	bu := &brokerUse{user: user, baseURLVar: np.Container.BaseURL}
	for _, name := range np.Credentials {
		if _, ok := phs[name]; ok {
			bu.names = append(bu.names, name)
			kp.credentials[name] = true
		}
	}
	kp.brokered[np.Name] = bu
	kp.urls[BaseURLKey(user)] = egress.BrokerBaseURL(r.proxyAddress, int(r.e.ProxyPort), user, proxySecret, t.Endpoint, t.Path)
	return cfg, nil
}

// BrokerPlaceholderKeys are the keys of the placeholders apply mints (Options.ProxySecrets), in plan order, each
// with the credential it stands for: the brokered nodes' credentials that credentialKeys (the credentials
// Secret's keys; nil: all) holds.
func BrokerPlaceholderKeys(e *config.KubernetesEngine, p *planner.Plan, credentialKeys []string) [][2]string {
	if e == nil || e.ProxyImage == "" {
		return nil
	}
	r := &renderer{e: e, run: "x", digest: p.ConfigDigest, credentialKeys: credentialKeys}
	kp, err := r.newKewplanProxy(p, nil)
	if err != nil {
		return nil
	}
	var out [][2]string
	for _, np := range p.Nodes {
		if bu := kp.brokered[np.Name]; bu != nil {
			for _, name := range bu.names {
				out = append(out, [2]string{PlaceholderKey(bu.user, name), name})
			}
		}
	}
	return out
}

// BrokeredUsers are the proxy users of the brokered nodes (by node name) when the engine names proxy_image: the
// names apply ends them and starts their retries by on the proxy's control endpoint. credentialKeys is as in
// BrokerPlaceholderKeys.
func BrokeredUsers(e *config.KubernetesEngine, p *planner.Plan, credentialKeys []string) map[string]string {
	if e == nil || e.ProxyImage == "" {
		return nil
	}
	r := &renderer{e: e, run: "x", digest: p.ConfigDigest, credentialKeys: credentialKeys}
	kp, err := r.newKewplanProxy(p, nil)
	if err != nil {
		return nil
	}
	out := map[string]string{}
	for node, bu := range kp.brokered {
		out[node] = bu.user
	}
	return out
}

// ProxyUserNodes maps each proxy user of kewplan's proxy (ProxyUsers) to its node's name: a node's "-git" user is
// the node's too. Apply reads the proxy's decision log by it.
func ProxyUserNodes(e *config.KubernetesEngine, p *planner.Plan) map[string]string {
	if e == nil || e.ProxyImage == "" {
		return nil
	}
	r := &renderer{e: e, run: "x", digest: p.ConfigDigest}
	kp, err := r.newKewplanProxy(p, nil)
	if err != nil {
		return nil
	}
	out := map[string]string{}
	for node, user := range kp.users {
		out[user], out[user+"-git"] = node, node
	}
	return out
}

// privateFor is the node's private_hosts entries that name host: the git steps' user may reach the repository on
// a private address when, and only when, the node's configuration names its host there.
func privateFor(private []string, host string) []string {
	var out []string
	for _, e := range private {
		if p, why := config.ParseHostPattern(e); why == "" && p.MatchHost(host) {
			out = append(out, e)
		}
	}
	return out
}

// proxySecret is a proxy user's secret: the one apply passes in Options.ProxySecrets, or, for render and plan,
// ProxySecretPlaceholder. Nothing a plan shows (its digest, its run id) may yield a secret: the plan is posted
// where agents and reviewers read it.
func (r *renderer) proxySecret(secrets map[string]string, user string) (string, error) {
	if secrets == nil {
		return ProxySecretPlaceholder, nil
	}
	s, ok := secrets[user]
	if !ok || len(s) < 32 {
		return "", fmt.Errorf("no proxy secret of at least 32 characters for the proxy user %q", user)
	}
	return s, nil
}

// ProxyUsers are the egress proxy users a plan's Jobs use when the engine names proxy_image, in plan order: each
// proxied node's user and its "-git" user. Apply gives each a fresh secret in Options.ProxySecrets.
func ProxyUsers(e *config.KubernetesEngine, p *planner.Plan) []string {
	if e == nil || e.ProxyImage == "" {
		return nil
	}
	r := &renderer{e: e, run: "x", digest: p.ConfigDigest}
	kp, err := r.newKewplanProxy(p, nil)
	if err != nil {
		return nil
	}
	out := make([]string, 0, len(kp.cfg.Nodes))
	for _, n := range kp.cfg.Nodes {
		out = append(out, n.Name)
	}
	return out
}

// repoHost is the host and port the git steps reach for an https repository; ok is false for another scheme
// (ssh does not go through an HTTP proxy) or a repository known only after apply.
func repoHost(np *planner.NodePlan) (string, int, bool) {
	if contains(np.Unknown, "repo") {
		return "", 0, false
	}
	u, err := url.Parse(np.Repo)
	if err != nil || u.Scheme != "https" || u.Hostname() == "" {
		return "", 0, false
	}
	port := 443
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return "", 0, false
		}
		port = n
	}
	if _, why := config.ParseHostPattern(u.Hostname()); why != "" {
		return "", 0, false
	}
	return u.Hostname(), port, true
}

// proxyEnvFrom is the proxy environment of a container whose proxy user is user: every variable reads the URL,
// which holds the user's secret, from the proxy's Secret, so it is in no pod spec.
func (kp *kewplanProxy) env(user string) []corev1.EnvVar {
	ref := func(name string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: kp.name}, Key: ProxyURLKey(user)}}}
	}
	return []corev1.EnvVar{
		ref("HTTPS_PROXY"), ref("HTTP_PROXY"), ref("https_proxy"), ref("http_proxy"),
		{Name: "NO_PROXY", Value: "localhost,127.0.0.1"}, {Name: "no_proxy", Value: "localhost,127.0.0.1"},
	}
}

// proxyCredentialEnv is the real values of the brokered credentials, from credentials_secret by secretKeyRef: the
// proxy's pod is the only one that holds them.
func (r *renderer) proxyCredentialEnv(kp *kewplanProxy) []corev1.EnvVar {
	var env []corev1.EnvVar
	for _, name := range slices.Sorted(maps.Keys(kp.credentials)) {
		env = append(env, corev1.EnvVar{Name: CredentialEnv(name), ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: r.e.CredentialsSecret}, Key: name, Optional: ptr(true)}}})
	}
	return env
}

// brokerEnv is a brokered node's agent step's credentials and base URL, each from the proxy's Secret; nil for a
// node whose credentials are forwarded.
func (r *renderer) brokerEnv(np *planner.NodePlan) []corev1.EnvVar {
	if r.proxy == nil || r.proxy.brokered[np.Name] == nil {
		return nil
	}
	bu := r.proxy.brokered[np.Name]
	ref := func(name, key string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: r.proxy.name}, Key: key}}}
	}
	var env []corev1.EnvVar
	for _, name := range bu.names {
		env = append(env, ref(name, PlaceholderKey(bu.user, name)))
	}
	return append(env, ref(bu.baseURLVar, BaseURLKey(bu.user)))
}

// podLabels are the labels of the proxy's pods: the default proxy selector, so an agent NetworkPolicy written for
// kewplan's proxy matches, and the run, so two runs' proxies stay apart.
func (r *renderer) proxyPodLabels() map[string]string {
	l := copyMap(config.DefaultProxySelector)
	l[LabelManagedBy] = ManagedBy
	l[LabelRun] = r.run
	l[LabelStep] = StepEgressProxy
	return l
}

// proxySelector selects the run's proxy pods.
func (r *renderer) proxySelector() map[string]string {
	l := copyMap(config.DefaultProxySelector)
	l[LabelRun] = r.run
	return l
}

// proxyObjects are kewplan's egress proxy of the run: the Secret with its configuration and the nodes' URLs, the
// Deployment running `kewplan egress-proxy` with the contract's hardening, the Service the agents' HTTPS_PROXY names,
// and the proxy's NetworkPolicy (in: the run's pods on the proxy port; out: DNS and the allowlisted ports of public
// addresses, the proxy itself holding each node to its hosts).
func (r *renderer) proxyObjects(kp *kewplanProxy) ([]Object, error) {
	cfg, err := json.MarshalIndent(kp.cfg, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode the egress proxy configuration: %w", err)
	}
	data := map[string][]byte{ProxyConfigKey: append(cfg, '\n')}
	for k, v := range kp.urls {
		data[k] = []byte(v)
	}
	secret := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: r.meta(kp.name, ""),
		Type:       corev1.SecretTypeOpaque,
		Data:       data,
	}
	secret.Annotations[AnnotationRole] = StepEgressProxy

	podLabels := r.proxyPodLabels()
	tcp := corev1.ProtocolTCP
	sc := hardened()
	deploy := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: r.meta(kp.name, ""),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: r.proxySelector()},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels,
					// A new configuration (other nodes, new secrets) rolls the pod.
					Annotations: map[string]string{AnnotationDigest: r.digest, "kewplan.dev/proxy-config-sha256": planner.SHA256Hex(cfg)}},
				Spec: corev1.PodSpec{
					AutomountServiceAccountToken:  ptr(false),
					EnableServiceLinks:            ptr(false),
					TerminationGracePeriodSeconds: ptr(int64(10)),
					SecurityContext:               hardenedPod(),
					Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
						SecretName: kp.name, DefaultMode: ptr(int32(0o440)),
						Items: []corev1.KeyToPath{{Key: ProxyConfigKey, Path: ProxyConfigKey}}}}}},
					Containers: []corev1.Container{{
						Name: StepEgressProxy, Image: r.e.ProxyImage, ImagePullPolicy: corev1.PullIfNotPresent,
						Command:         []string{egress.BinaryPath, egress.Subcommand, "--config", proxyConfigMount + "/" + ProxyConfigKey},
						Ports:           []corev1.ContainerPort{{Name: "proxy", ContainerPort: egress.DefaultPort, Protocol: tcp}},
						VolumeMounts:    []corev1.VolumeMount{{Name: "config", MountPath: proxyConfigMount, ReadOnly: true}},
						Env:             r.proxyCredentialEnv(kp),
						SecurityContext: sc,
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{
							Port: intstr.FromInt32(egress.DefaultPort)}}, PeriodSeconds: 5},
						Resources: corev1.ResourceRequirements{
							Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
							Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}},
						TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
					}},
				},
			},
		},
	}
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: r.meta(kp.name, ""),
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: r.proxySelector(),
			Ports: []corev1.ServicePort{{Name: "proxy", Protocol: tcp, Port: int32(r.e.ProxyPort),
				TargetPort: intstr.FromInt32(egress.DefaultPort)}},
		},
	}
	return []Object{secret, deploy, svc, r.proxyNetworkPolicy(kp)}, nil
}

// Addresses the proxy's NetworkPolicy keeps it from: private, shared, loopback and link-local ranges (cloud
// metadata), which the proxy refuses too (egress.Config.AllowPrivateAddresses is false).
var (
	privateIPv4 = []string{"10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12", "192.168.0.0/16"}
	privateIPv6 = []string{"fc00::/7", "fe80::/10"}
	// What no private_hosts entry opens: loopback and link-local.
	neverIPv4 = []string{"127.0.0.0/8", "169.254.0.0/16"}
	neverIPv6 = []string{"fe80::/10"}
)

func (r *renderer) proxyNetworkPolicy(kp *kewplanProxy) *networkingv1.NetworkPolicy {
	udp, tcp := corev1.ProtocolUDP, corev1.ProtocolTCP
	dns := intstr.FromInt32(53)
	listen := intstr.FromInt32(egress.DefaultPort)
	ports := make([]int, 0, len(kp.ports))
	for p := range kp.ports {
		ports = append(ports, p)
	}
	sort.Ints(ports)
	var out []networkingv1.NetworkPolicyPort
	for _, p := range ports {
		port := intstr.FromInt32(int32(p))
		out = append(out, networkingv1.NetworkPolicyPort{Protocol: &tcp, Port: &port})
	}
	np := &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: r.meta(kp.name, ""),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: r.proxySelector()},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{LabelManagedBy: ManagedBy, LabelRun: r.run, LabelStep: StepAgent}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &listen}},
			}},
			Egress: []networkingv1.NetworkPolicyEgressRule{{
				To: []networkingv1.NetworkPolicyPeer{{
					NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "kube-system"}},
					PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "kube-dns"}},
				}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &udp, Port: &dns}, {Protocol: &tcp, Port: &dns}},
			}},
		},
	}
	if len(out) > 0 {
		except4, except6 := privateIPv4, privateIPv6
		if kp.private {
			// A node names hosts that may resolve to private ranges (private_hosts): the proxy itself holds each
			// name to them, so the policy keeps the proxy only from loopback and link-local (cloud metadata).
			except4, except6 = neverIPv4, neverIPv6
		}
		np.Spec.Egress = append(np.Spec.Egress, networkingv1.NetworkPolicyEgressRule{
			To: []networkingv1.NetworkPolicyPeer{
				{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0", Except: except4}},
				{IPBlock: &networkingv1.IPBlock{CIDR: "::/0", Except: except6}},
			},
			Ports: out,
		})
	}
	return np
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
