package k8srender

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/kewplan/kewplan/config"
)

// PlanDocument is the "kubernetes" object of a plan document (`kewplan plan --engine kubernetes --json`, and saved
// plans): where the objects go, what each node becomes, the named differences from Docker, and the engine block's
// settings, so that a saved plan says on what it is applied and can be rendered again.
type PlanDocument struct {
	Namespace   string           `json:"namespace"`
	RunID       string           `json:"run_id"`
	Settings    EngineSettings   `json:"settings"`
	Nodes       []NodeDocument   `json:"nodes"`
	Shared      []ObjectDocument `json:"shared"`
	Differences []Difference     `json:"differences"`
}

// ObjectDocument names one rendered object.
type ObjectDocument struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// NodeDocument is one node's Job summary: its objects, the pod's steps, the Secrets it reads by name, and the nodes
// whose outputs its values wait for.
type NodeDocument struct {
	Node                    string           `json:"node"`
	Objects                 []ObjectDocument `json:"objects"`
	Steps                   []StepDocument   `json:"steps"`
	RuntimeClass            string           `json:"runtime_class,omitempty"`
	Secrets                 []string         `json:"secrets"`
	ActiveDeadlineSeconds   int64            `json:"active_deadline_seconds"`
	TTLSecondsAfterFinished int32            `json:"ttl_seconds_after_finished"`
	WaitsFor                []string         `json:"waits_for"`
	Unknown                 []string         `json:"known_after_apply,omitempty"`
}

// StepDocument is one container of a node's pod, in the order they run.
type StepDocument struct {
	Name  string `json:"name"`
	Image string `json:"image"`
	// Init is true for an init container (the clone and the agent), false for the last step.
	Init bool `json:"init"`
}

// EngineSettings are the engine "kubernetes" block's values, as rendered (defaults filled in).
type EngineSettings struct {
	Context           string            `json:"context,omitempty"`
	Namespace         string            `json:"namespace"`
	RuntimeClass      string            `json:"runtime_class,omitempty"`
	GitSecret         string            `json:"git_secret"`
	CredentialsSecret string            `json:"credentials_secret"`
	GitImage          string            `json:"git_image,omitempty"`
	ProxyImage        string            `json:"proxy_image,omitempty"`
	ProxySelector     map[string]string `json:"proxy_selector"`
	ProxyNamespace    string            `json:"proxy_namespace"`
	ProxyService      string            `json:"proxy_service"`
	ProxyPort         int64             `json:"proxy_port"`
	TTLAfterFinished  int64             `json:"ttl_seconds_after_finished"`
	ScratchSize       string            `json:"tmp_size"`
	HomeSize          string            `json:"home_size"`
}

// NewEngineSettings copies an engine block's values.
func NewEngineSettings(e *config.KubernetesEngine) EngineSettings {
	return EngineSettings{
		Context: e.Context, Namespace: e.Namespace, RuntimeClass: e.RuntimeClass, GitSecret: e.GitSecret,
		CredentialsSecret: e.CredentialsSecret, GitImage: e.GitImage, ProxyImage: e.ProxyImage,
		ProxySelector: copyMap(e.ProxySelector), ProxyNamespace: e.ProxyNamespace, ProxyService: e.ProxyService,
		ProxyPort: e.ProxyPort, TTLAfterFinished: e.TTLAfterFinished, ScratchSize: e.ScratchSize, HomeSize: e.HomeSize,
	}
}

// Engine is the engine block the settings were copied from (without its source ranges), to render again.
func (s EngineSettings) Engine() *config.KubernetesEngine {
	return &config.KubernetesEngine{
		Context: s.Context, Namespace: s.Namespace, RuntimeClass: s.RuntimeClass, GitSecret: s.GitSecret,
		CredentialsSecret: s.CredentialsSecret, GitImage: s.GitImage, ProxyImage: s.ProxyImage,
		ProxySelector: copyMap(s.ProxySelector), ProxyNamespace: s.ProxyNamespace, ProxyService: s.ProxyService,
		ProxyPort: s.ProxyPort, TTLAfterFinished: s.TTLAfterFinished, ScratchSize: s.ScratchSize, HomeSize: s.HomeSize,
	}
}

// NewPlanDocument summarises rendered manifests for a plan document.
func NewPlanDocument(m *Manifests, e *config.KubernetesEngine) *PlanDocument {
	d := &PlanDocument{Namespace: m.Namespace, RunID: m.RunID, Settings: NewEngineSettings(e),
		Nodes: make([]NodeDocument, 0, len(m.Nodes)), Shared: objectDocuments(m.Shared),
		Differences: append([]Difference{}, m.Differences...)}
	for _, n := range m.Nodes {
		pod := n.Job.Spec.Template.Spec
		nd := NodeDocument{Node: n.Node, Objects: objectDocuments(n.Objects()), Secrets: podSecrets(pod),
			WaitsFor: append([]string{}, n.WaitsFor...), Unknown: append([]string(nil), n.Unknown...)}
		if pod.RuntimeClassName != nil {
			nd.RuntimeClass = *pod.RuntimeClassName
		}
		if n.Job.Spec.ActiveDeadlineSeconds != nil {
			nd.ActiveDeadlineSeconds = *n.Job.Spec.ActiveDeadlineSeconds
		}
		if n.Job.Spec.TTLSecondsAfterFinished != nil {
			nd.TTLSecondsAfterFinished = *n.Job.Spec.TTLSecondsAfterFinished
		}
		for _, c := range pod.InitContainers {
			nd.Steps = append(nd.Steps, StepDocument{Name: c.Name, Image: c.Image, Init: true})
		}
		for _, c := range pod.Containers {
			nd.Steps = append(nd.Steps, StepDocument{Name: c.Name, Image: c.Image})
		}
		d.Nodes = append(d.Nodes, nd)
	}
	return d
}

// Node returns the document of node name, or nil when it was not rendered (it has errors).
func (d *PlanDocument) Node(name string) *NodeDocument {
	for i := range d.Nodes {
		if d.Nodes[i].Node == name {
			return &d.Nodes[i]
		}
	}
	return nil
}

func objectDocuments(objs []Object) []ObjectDocument {
	out := make([]ObjectDocument, 0, len(objs))
	for _, o := range objs {
		out = append(out, ObjectDocument{Kind: o.GetObjectKind().GroupVersionKind().Kind, Name: o.GetName()})
	}
	return out
}

// podSecrets are the names of the Secrets a pod reads, by volume or by secretKeyRef, sorted.
func podSecrets(pod corev1.PodSpec) []string {
	seen := map[string]bool{}
	for _, v := range pod.Volumes {
		if v.Secret != nil {
			seen[v.Secret.SecretName] = true
		}
	}
	for _, c := range append(append([]corev1.Container{}, pod.InitContainers...), pod.Containers...) {
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				seen[e.ValueFrom.SecretKeyRef.Name] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for s := range seen {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}
