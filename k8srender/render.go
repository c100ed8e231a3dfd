package k8srender

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/egress"
	"github.com/kewplan/kewplan/planner"
)

// Object is one rendered Kubernetes object: typed, with its apiVersion and kind set.
type Object interface {
	runtime.Object
	metav1.Object
}

// Labels and annotations kewplan puts on its objects. The label keys are the Docker engine's, so one orphan sweep
// reads both; the annotations carry what a label value cannot hold.
const (
	LabelManagedBy      = "app.kubernetes.io/managed-by"
	ManagedBy           = "kewplan"
	LabelNode           = planner.LabelNode // "kewplan.node"
	LabelRun            = planner.LabelRun  // "kewplan.run"
	LabelStep           = "kewplan.step"    // on pods: "agent"
	AnnotationNode      = "kewplan.dev/node"
	AnnotationWaitsFor  = "kewplan.dev/waits-for"
	AnnotationUnknown   = "kewplan.dev/known-after-apply"
	AnnotationPrompt    = "kewplan.dev/prompt-sha256"
	AnnotationDigest    = "kewplan.dev/config-digest"
	AnnotationRole      = "kewplan.dev/role"
	AnnotationDependsOn = "kewplan.dev/depends-on"
)

// Container names inside a node's pod, in the order they run.
const (
	StepClone   = "clone"
	StepAgent   = "agent"
	StepPush    = "push"    // a worker's last step
	StepVerdict = "verdict" // a reviewer's last step
)

// Mount paths of the pod. /work, /tmp and /home/agent are the contract's; the rest belong to the git steps.
const (
	workMount      = planner.WorkDir
	promptMount    = "/var/run/kewplan/prompt"
	gitSecretMount = "/var/run/kewplan/git"
	gitHomeMount   = "/var/run/kewplan/home"
)

// PromptKey is the key of the prompt in a node's prompt Secret.
const PromptKey = "prompt"

// GitTokenKey is the key the git Secret must hold (an HTTPS token); KEW_GIT_USERNAME is read from GitUsernameKey
// when the Secret has it.
const (
	GitTokenKey    = "token"
	GitUsernameKey = "username"
)

// Options say where and as what the plan is rendered.
type Options struct {
	Engine *config.KubernetesEngine
	// RunID is the value of the kewplan.run label. "" renders "plan-" and the first 12 hex digits of the config
	// digest, so that rendering the same configuration twice yields the same manifests (GitOps).
	RunID string
	// NameSuffix is appended to every object name (apply uses the run id so runs do not collide); "" for render.
	NameSuffix string
	// ProxySecrets are the egress proxy users' secrets (ProxyUsers names them) when the engine names proxy_image:
	// apply passes fresh random ones. nil renders ProxySecretPlaceholder for each (render, plan), so that no
	// manifest a plan's reader sees holds or implies a secret; the proxy refuses to start with a placeholder.
	ProxySecrets map[string]string
	// ProxyAddress is the cluster IP of the Service the proxied pods' HTTPS_PROXY names (kewplan's proxy, or the
	// operator's proxy_service): those pods have no DNS, so they reach the proxy by address. "" renders
	// ProxyAddressPlaceholder (render, plan); apply reads the Service first.
	ProxyAddress string
	// CredentialKeys are the keys of credentials_secret (apply reads them): a brokered node gets placeholders for
	// those of its credentials only. nil (render, plan) assumes every credential is there.
	CredentialKeys []string
	// UpstreamCAPEM is sandbox.egress.upstream_ca_file's content, the authorities kewplan's proxy trusts beside the
	// system's roots for brokered requests; "" for none.
	UpstreamCAPEM string
	// BrokerEndsAt is, by node name, when kewplan's proxy stops accepting a brokered node's placeholders whatever
	// apply tells it (egress.BrokerConfig.EndsAt, the backstop to ending the node on the proxy's control
	// endpoint); apply computes it when the run starts. nil (render, plan) renders none.
	BrokerEndsAt map[string]time.Time
}

// Placeholders of what only apply knows. A secret placeholder is shorter than any secret the egress proxy
// accepts, and the address is in the .invalid domain, so manifests rendered without apply's values fail closed.
const (
	ProxySecretPlaceholder  = "(random, set by apply)"
	ProxyAddressPlaceholder = "proxy-cluster-ip.invalid"
)

// noDNSNameserver is the only nameserver of a proxied pod: its own loopback, where nothing of kewplan's answers,
// so no name a pod looks up leaves it (a query name is a channel out of the cluster through its resolver).
const noDNSNameserver = "127.0.0.1"

// Manifests are the objects of one plan.
type Manifests struct {
	Namespace string
	RunID     string
	Nodes     []*NodeObjects // in plan order
	// Shared are the objects every node's pod relies on: the egress NetworkPolicy, then, when the engine names
	// proxy_image, kewplan's egress proxy (its Secret, Deployment, Service and NetworkPolicy).
	Shared      []Object
	Differences []Difference
}

// NodeObjects are one node's objects.
type NodeObjects struct {
	Node   string
	Prompt *corev1.Secret
	Job    *batchv1.Job
	// WaitsFor names the nodes whose outputs the rendered values are waiting for (rendered as the plan shows them,
	// "(known after apply)").
	WaitsFor []string
	Unknown  []string
}

// Objects returns the node's objects in apply order (the prompt before the Job that mounts it).
func (n *NodeObjects) Objects() []Object { return []Object{n.Prompt, n.Job} }

// All returns every object of the manifests in apply order: shared objects first, then each node's.
func (m *Manifests) All() []Object {
	out := append([]Object(nil), m.Shared...)
	for _, n := range m.Nodes {
		out = append(out, n.Objects()...)
	}
	return out
}

// SummaryNodeNotRendered is the summary of Render's diagnostic for a node with errors: a caller that already shows
// the node's own errors (plan) leaves it out.
const SummaryNodeNotRendered = "Node not rendered"

// Render turns the plan's nodes into Kubernetes objects. A node with an error diagnostic is not rendered; Render
// reports it, so a caller that needs every node refuses the plan.
func Render(p *planner.Plan, opts Options) (*Manifests, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	if opts.Engine == nil {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "No kubernetes engine",
			Detail: `The configuration has no engine "kubernetes" block, so nothing says which namespace and Secrets the Jobs use. Add one, for example: engine "kubernetes" { namespace = "agents"  git_secret = "kewplan-git"  credentials_secret = "agent-keys" }.`}}
	}
	run := opts.RunID
	if run == "" {
		run = "plan-" + shortDigest(p.ConfigDigest)
	}
	if !labelValue.MatchString(run) {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Invalid run id",
			Detail: fmt.Sprintf("The run id %q cannot be a Kubernetes label value (at most 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit).", run)}}
	}
	r := &renderer{e: opts.Engine, run: run, suffix: opts.NameSuffix, digest: p.ConfigDigest, names: map[string]string{}, credentialKeys: opts.CredentialKeys, upstreamCA: opts.UpstreamCAPEM,
		proxyAddress: opts.ProxyAddress, endsAt: opts.BrokerEndsAt}
	if r.proxyAddress == "" {
		r.proxyAddress = ProxyAddressPlaceholder
	}
	m := &Manifests{Namespace: opts.Engine.Namespace, RunID: run}
	if opts.Engine.ProxyImage != "" {
		kp, err := r.newKewplanProxy(p, opts.ProxySecrets)
		if err != nil {
			return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Egress proxy not rendered", Detail: err.Error() + "."}}
		}
		if len(kp.users) > 0 { // every node's network is open: no pod goes through a proxy
			r.proxy = kp
		}
	}
	m.Shared = append(m.Shared, r.networkPolicy(p))
	if r.proxy != nil {
		objs, err := r.proxyObjects(r.proxy)
		if err != nil {
			return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Egress proxy not rendered", Detail: err.Error() + "."}}
		}
		m.Shared = append(m.Shared, objs...)
	}
	for _, np := range p.Nodes {
		if np.Errors {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: SummaryNodeNotRendered,
				Detail:  fmt.Sprintf("Node %q has errors in the plan, so it has no Kubernetes objects. Fix the errors reported for it.", np.Name),
				Subject: subject(np.DeclRange)})
			continue
		}
		name := r.objectName(np.Name)
		if prev, ok := r.names[name]; ok {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Object names collide",
				Detail:  fmt.Sprintf("Nodes %q and %q both become the Kubernetes name %q (names are lower-cased and '_' becomes '-'). Rename one of them.", prev, np.Name, name),
				Subject: subject(np.DeclRange)})
			continue
		}
		r.names[name] = np.Name
		m.Nodes = append(m.Nodes, r.node(np, name))
	}
	m.Differences = Differences(opts.Engine, p)
	return m, diags
}

type renderer struct {
	e      *config.KubernetesEngine
	run    string
	suffix string
	digest string
	names  map[string]string // object name -> node
	proxy  *kewplanProxy     // kewplan's egress proxy; nil when the operator runs one
	// proxyAddress is Options.ProxyAddress or its placeholder.
	proxyAddress string
	// credentialKeys and upstreamCA are Options.CredentialKeys and Options.UpstreamCAPEM.
	credentialKeys []string
	upstreamCA     string
	// endsAt is Options.BrokerEndsAt.
	endsAt map[string]time.Time
}

var (
	dnsLabel   = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	labelValue = regexp.MustCompile(`^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$`)
)

// objectName is "kew-<node>" (the Docker container's name) when that is a DNS label; otherwise the node name is
// lower-cased, '_' becomes '-', and a hash of the exact name keeps two such names apart.
func (r *renderer) objectName(node string) string {
	base := planner.ContainerPrefix + node
	if r.suffix != "" {
		base += "-" + r.suffix
	}
	if dnsLabel.MatchString(base) && len(base) <= 52 { // 52: the Job controller appends "-" and 5 characters to pod names, and a prompt Secret "-prompt"
		return base
	}
	s := strings.Trim(strings.Map(func(c rune) rune {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-':
			return c
		case c >= 'A' && c <= 'Z':
			return c + 'a' - 'A'
		}
		return '-'
	}, base), "-")
	h := sha256.Sum256([]byte(node))
	if len(s) > 43 {
		s = strings.TrimRight(s[:43], "-")
	}
	return s + "-" + hex.EncodeToString(h[:])[:8]
}

// NodeLabelValue is the kewplan.node label of a node's objects: the node name when it is a valid label value
// (config's names almost always are), otherwise a hash; the exact name is in the kewplan.dev/node annotation.
func NodeLabelValue(node string) string {
	if labelValue.MatchString(node) && len(node) <= 63 {
		return node
	}
	h := sha256.Sum256([]byte(node))
	return "node-" + hex.EncodeToString(h[:])[:16]
}

func (r *renderer) labels(node string) map[string]string {
	l := map[string]string{LabelManagedBy: ManagedBy, LabelRun: r.run}
	if node != "" {
		l[LabelNode] = NodeLabelValue(node)
	}
	return l
}

func (r *renderer) meta(name, node string) metav1.ObjectMeta {
	ann := map[string]string{}
	if r.digest != "" {
		ann[AnnotationDigest] = r.digest
	}
	if node != "" {
		ann[AnnotationNode] = node
	}
	return metav1.ObjectMeta{Name: name, Namespace: r.e.Namespace, Labels: r.labels(node), Annotations: ann}
}

func (r *renderer) node(np *planner.NodePlan, name string) *NodeObjects {
	out := &NodeObjects{Node: np.Name, Unknown: append([]string(nil), np.Unknown...)}
	if len(np.Unknown) > 0 {
		// Which upstream node a value waits for: the plan keeps the dependency edges, and only another node's
		// outputs are unknown at plan time, so the node waits for its dependencies.
		out.WaitsFor = append([]string(nil), np.DependsOn...)
	}
	promptText := np.Prompt.Text
	if !np.Prompt.Known() {
		promptText = planner.UnknownValue
	}
	secret := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: r.meta(name+"-prompt", np.Name),
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{PromptKey: []byte(promptText)},
	}
	if np.Prompt.Known() {
		secret.Annotations[AnnotationPrompt] = np.Prompt.SHA256
	}
	job := &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: r.meta(name, np.Name),
		Spec: batchv1.JobSpec{
			BackoffLimit:            ptr(int32(0)),
			Completions:             ptr(int32(1)),
			Parallelism:             ptr(int32(1)),
			ActiveDeadlineSeconds:   ptr(int64(np.Timeout.Seconds())),
			TTLSecondsAfterFinished: ptr(int32(r.e.TTLAfterFinished)),
			Template:                r.podTemplate(np, secret.Name),
		},
	}
	job.Annotations[AnnotationRole] = np.Role
	if len(np.DependsOn) > 0 {
		job.Annotations[AnnotationDependsOn] = strings.Join(np.DependsOn, ",")
	}
	if len(out.WaitsFor) > 0 {
		job.Annotations[AnnotationWaitsFor] = strings.Join(out.WaitsFor, ",")
		secret.Annotations[AnnotationWaitsFor] = strings.Join(out.WaitsFor, ",")
	}
	if len(np.Unknown) > 0 {
		job.Annotations[AnnotationUnknown] = strings.Join(np.Unknown, ",")
	}
	out.Prompt, out.Job = secret, job
	return out
}

func (r *renderer) podTemplate(np *planner.NodePlan, promptSecret string) corev1.PodTemplateSpec {
	labels := r.labels(np.Name)
	labels[LabelStep] = StepAgent
	gitImage := r.e.GitImage
	if gitImage == "" {
		gitImage = np.Image
	}
	last, lastScript := StepPush, pushScript
	if np.Role == config.RoleReviewer {
		last, lastScript = StepVerdict, verdictScript
	}
	spec := corev1.PodSpec{
		RestartPolicy:                 corev1.RestartPolicyNever,
		AutomountServiceAccountToken:  ptr(false),
		EnableServiceLinks:            ptr(false),
		TerminationGracePeriodSeconds: ptr(int64(10)),
		SecurityContext:               hardenedPod(),
		Volumes: []corev1.Volume{
			{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			memoryDir("tmp", r.e.ScratchSize),
			memoryDir("home", r.e.HomeSize),
			memoryDir("git-home", "16Mi"),
			{Name: "prompt", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
				SecretName: promptSecret, DefaultMode: ptr(int32(0o400)),
				Items: []corev1.KeyToPath{{Key: PromptKey, Path: PromptKey}}}}},
			{Name: "git-credential", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
				SecretName: r.e.GitSecret, DefaultMode: ptr(int32(0o400))}}},
		},
		InitContainers: []corev1.Container{
			r.gitStep(StepClone, gitImage, cloneScript, np, true),
			r.agent(np),
		},
		Containers: []corev1.Container{r.gitStep(last, gitImage, lastScript, np, last == StepPush)},
	}
	if r.e.RuntimeClass != "" {
		spec.RuntimeClassName = ptr(r.e.RuntimeClass)
	}
	if usesProxy(np) {
		// No DNS: the pod reaches the proxy by its Service's address, and the proxy resolves the hosts it allows.
		spec.DNSPolicy = corev1.DNSNone
		spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{noDNSNameserver}, Searches: []string{}}
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{AnnotationNode: np.Name}},
		Spec:       spec,
	}
}

func memoryDir(name, size string) corev1.Volume {
	q := resource.MustParse(size) // config validated the quantity's syntax
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
		Medium: corev1.StorageMediumMemory, SizeLimit: &q}}}
}

// hardened is the container-level half of the contract's hardening; the pod-level half is in podTemplate.
// hardenedPod is the pod-level security context of every pod kewplan renders (a node's and its egress proxy's):
// non-root as the contract's uid and gid, volumes owned by that group, seccomp RuntimeDefault.
func hardenedPod() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr(true),
		RunAsUser:      ptr(int64(planner.AgentUID)),
		RunAsGroup:     ptr(int64(planner.AgentUID)),
		FSGroup:        ptr(int64(planner.AgentUID)),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

func hardened() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		RunAsNonRoot:             ptr(true),
		RunAsUser:                ptr(int64(planner.AgentUID)),
		RunAsGroup:               ptr(int64(planner.AgentUID)),
		ReadOnlyRootFilesystem:   ptr(true),
		AllowPrivilegeEscalation: ptr(false),
		Privileged:               ptr(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

func (r *renderer) proxyEnv() []corev1.EnvVar {
	if r.e.ProxyService == "" {
		return nil
	}
	url := "http://" + net.JoinHostPort(r.proxyAddress, strconv.FormatInt(r.e.ProxyPort, 10))
	return []corev1.EnvVar{
		{Name: "HTTPS_PROXY", Value: url}, {Name: "HTTP_PROXY", Value: url},
		{Name: "https_proxy", Value: url}, {Name: "http_proxy", Value: url},
		{Name: "NO_PROXY", Value: "localhost,127.0.0.1"}, {Name: "no_proxy", Value: "localhost,127.0.0.1"},
	}
}

// networkProxyEnv is the proxy environment of a container of np's pod: the git steps' own proxy user when kewplan
// runs the proxy (it reaches only the repository's host), the node's user for the agent.
func (r *renderer) networkProxyEnv(np *planner.NodePlan, git bool) []corev1.EnvVar {
	if !usesProxy(np) {
		return nil
	}
	if r.proxy != nil {
		user := r.proxy.users[np.Name]
		if git {
			user += "-git"
		}
		return r.proxy.env(user)
	}
	return r.proxyEnv()
}

// safeWork tells git, in every container, that the checkout at /work is safe although the directory is not the
// container user's: the kubelet makes an emptyDir's root owned by root (group fsGroup, setgid), and git refuses a
// repository whose top directory another user owns ("detected dubious ownership"). It is command-scope
// configuration (GIT_CONFIG_COUNT), which git honours for safe.directory as it does the global file.
var safeWork = []corev1.EnvVar{{Name: "GIT_CONFIG_COUNT", Value: "1"}, {Name: "GIT_CONFIG_KEY_0", Value: "safe.directory"}, {Name: "GIT_CONFIG_VALUE_0", Value: workMount}}

// gitStep is the clone or the last step: the only containers that mount the git credential.
func (r *renderer) gitStep(name, image, script string, np *planner.NodePlan, withCredential bool) corev1.Container {
	ref, branch := np.Ref, np.Branch
	if contains(np.Unknown, "ref") {
		ref = planner.UnknownValue
	}
	if contains(np.Unknown, "branch") {
		branch = planner.UnknownValue
	}
	env := []corev1.EnvVar{
		{Name: "HOME", Value: gitHomeMount},
		{Name: "KEW_REPO", Value: valueOrUnknown(np.Repo, contains(np.Unknown, "repo"))},
		{Name: "KEW_REF", Value: ref},
		{Name: "KEW_BRANCH", Value: branch},
		{Name: "KEW_PROTECTED_BRANCHES", Value: strings.Join(np.ProtectedBranches, "\n")},
		{Name: "KEW_ALLOW_PROTECTED_PUSH", Value: strconv.FormatBool(np.AllowProtectedPush)},
		{Name: "KEW_GIT_USERNAME", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: r.e.GitSecret}, Key: GitUsernameKey, Optional: ptr(true)}}},
	}
	env = append(env, safeWork...)
	env = append(env, r.networkProxyEnv(np, true)...)
	mounts := []corev1.VolumeMount{
		{Name: "work", MountPath: workMount},
		{Name: "tmp", MountPath: planner.ScratchTmpfs},
		{Name: "git-home", MountPath: gitHomeMount},
	}
	if withCredential {
		mounts = append(mounts, corev1.VolumeMount{Name: "git-credential", MountPath: gitSecretMount, ReadOnly: true})
	}
	if name == StepClone {
		mounts = append(mounts, corev1.VolumeMount{Name: "prompt", MountPath: promptMount, ReadOnly: true})
	}
	return corev1.Container{
		Name: name, Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
		Command:         []string{"/bin/sh", "-c", script},
		Env:             env,
		VolumeMounts:    mounts,
		WorkingDir:      workMount,
		SecurityContext: hardened(),
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("512Mi")}},
		// A step that fails without writing its termination message (git's own error, say) reports the tail of its
		// log instead, which the failure's reason quotes.
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
}

// agent is the contract's container: /work is the checkout, /tmp and /home/agent are memory, credentials come by
// secretKeyRef (only the runner's names, optional like an unset -e NAME), and the prompt is the file the clone step
// wrote at /work/.kew-prompt.txt. It never mounts the git credential nor the prompt Secret.
func (r *renderer) agent(np *planner.NodePlan) corev1.Container {
	var args []string
	if np.Container != nil {
		args = append(args, np.Container.Args...)
	} else {
		args = []string{planner.UnknownValue}
	}
	env := []corev1.EnvVar{{Name: "HOME", Value: planner.AgentHomeTmpfs}}
	if broker := r.brokerEnv(np); broker != nil {
		env = append(env, broker...) // placeholders: the real values are in the proxy's pod only
	} else {
		for _, name := range np.Credentials {
			env = append(env, corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: r.e.CredentialsSecret}, Key: name, Optional: ptr(true)}}})
		}
	}
	env = append(env, safeWork...)
	env = append(env, r.networkProxyEnv(np, false)...)
	c := corev1.Container{
		Name: StepAgent, Image: np.Image, ImagePullPolicy: corev1.PullIfNotPresent,
		Args:       args,
		Env:        env,
		WorkingDir: workMount,
		VolumeMounts: []corev1.VolumeMount{
			{Name: "work", MountPath: workMount},
			{Name: "tmp", MountPath: planner.ScratchTmpfs},
			{Name: "home", MountPath: planner.AgentHomeTmpfs},
		},
		SecurityContext:          hardened(),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
	limits := corev1.ResourceList{}
	if q, ok := memoryQuantity(np.Memory); ok {
		limits[corev1.ResourceMemory] = q
	}
	if np.CPUs != "" {
		if q, err := resource.ParseQuantity(np.CPUs); err == nil {
			limits[corev1.ResourceCPU] = q
		}
	}
	if len(limits) > 0 {
		c.Resources = corev1.ResourceRequirements{Limits: limits, Requests: limits.DeepCopy()}
	}
	return c
}

// memoryQuantity converts a `docker run --memory` size ("4g", "512m", "1.5g", "1048576") to a quantity; Docker's
// units are binary, so "4g" is 4Gi.
func memoryQuantity(s string) (resource.Quantity, bool) {
	if s == "" {
		return resource.Quantity{}, false
	}
	m := dockerMemory.FindStringSubmatch(s)
	if m == nil {
		return resource.Quantity{}, false
	}
	unit := map[string]string{"": "", "b": "", "k": "Ki", "m": "Mi", "g": "Gi", "t": "Ti", "p": "Pi"}[strings.ToLower(m[2])]
	num := m[1]
	if strings.Contains(num, ".") && unit == "" {
		f, err := strconv.ParseFloat(num, 64)
		if err != nil {
			return resource.Quantity{}, false
		}
		num = strconv.FormatInt(int64(f), 10)
	}
	q, err := resource.ParseQuantity(num + unit)
	return q, err == nil
}

var dockerMemory = regexp.MustCompile(`^(\d+(?:\.\d+)?) ?([kKmMgGtTpP]|[bB])?[iI]?[bB]?$`)

// networkPolicy is the run's egress policy: its pods reach the egress proxy, nothing else (not the cluster DNS),
// and nothing reaches them. With the sandbox network "open" every node's egress is open, as on Docker's bridge.
func (r *renderer) networkPolicy(p *planner.Plan) *networkingv1.NetworkPolicy {
	open := len(p.Nodes) > 0
	for _, np := range p.Nodes {
		open = open && np.Network == config.NetworkOpen
	}
	tcp := corev1.ProtocolTCP
	proxyPort := intstr.FromInt32(int32(r.e.ProxyPort))
	proxyNamespace, proxySelector := r.e.ProxyNamespace, copyMap(r.e.ProxySelector)
	if r.proxy != nil {
		// A NetworkPolicy's ports are the pod's: kewplan's proxy listens on egress.DefaultPort behind its Service.
		proxyPort = intstr.FromInt32(egress.DefaultPort)
		proxyNamespace, proxySelector = r.e.Namespace, r.proxySelector()
	}
	np := &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: r.meta(r.sharedName("egress"), ""),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{LabelManagedBy: ManagedBy, LabelRun: r.run, LabelStep: StepAgent}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{},
		},
	}
	if open {
		np.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{}}
		return np
	}
	np.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{
		{
			To: []networkingv1.NetworkPolicyPeer{{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": proxyNamespace}},
				PodSelector:       &metav1.LabelSelector{MatchLabels: proxySelector},
			}},
			Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &proxyPort}},
		},
	}
	return np
}

func (r *renderer) sharedName(what string) string {
	n := "kewplan-" + what + "-" + strings.ToLower(r.run)
	n = strings.Map(func(c rune) rune {
		if c == '_' || c == '.' {
			return '-'
		}
		return c
	}, n)
	if len(n) > 63 {
		n = strings.TrimRight(n[:63], "-")
	}
	return n
}

func valueOrUnknown(v string, unknown bool) string {
	if unknown {
		return planner.UnknownValue
	}
	return v
}

func shortDigest(d string) string {
	d = strings.TrimPrefix(d, "sha256:")
	if len(d) > 12 {
		d = d[:12]
	}
	if d == "" {
		return "0"
	}
	return d
}

func subject(r hcl.Range) *hcl.Range {
	if r.Filename == "" {
		return nil
	}
	return &r
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out[k] = m[k]
	}
	return out
}

func ptr[T any](v T) *T { return &v }
