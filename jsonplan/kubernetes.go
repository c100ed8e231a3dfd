package jsonplan

import (
	"encoding/json"
	"fmt"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/k8srender"
)

// Kubernetes is a document's "kubernetes" object: k8srender's summary of the rendered objects and the engine
// block's settings. It is encoded as encoding/json.Marshal encodes it (HTML characters escaped), the bytes plans
// have always held. One that cannot be read (a hand-edited plan file) decodes empty, with Err saying why, so that
// the rest of the plan can still be shown.
type Kubernetes struct {
	k8srender.PlanDocument
	err error
}

// MarshalJSON encodes the object with HTML characters escaped.
func (k *Kubernetes) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(&k.PlanDocument)
	if err != nil {
		return nil, fmt.Errorf("encode the kubernetes plan: %w", err)
	}
	return b, nil
}

// UnmarshalJSON decodes the object; one that cannot be read leaves it empty and is reported by Err.
func (k *Kubernetes) UnmarshalJSON(b []byte) error {
	var d k8srender.PlanDocument
	if err := json.Unmarshal(b, &d); err != nil {
		*k = Kubernetes{err: fmt.Errorf("the plan's kubernetes object cannot be read: %w", err)}
		return nil
	}
	*k = Kubernetes{PlanDocument: d}
	return nil
}

// Err is why the object read from a plan file could not be read; nil when it could.
func (k *Kubernetes) Err() error { return k.err }

// EngineName is the engine the plan runs on: Engine, or "docker" when the document names none (plans written
// before engines existed are Docker plans). It is the one place an empty engine is read as Docker.
func (d *Document) EngineName() string {
	if d.Engine == "" {
		return config.EngineDocker
	}
	return d.Engine
}

// SetEngine records the engine a plan runs on: "docker", or "kubernetes" with the rendered objects' summary and
// the engine block's settings (m and e are used only then).
func (d *Document) SetEngine(engine string, m *k8srender.Manifests, e *config.KubernetesEngine) {
	d.Engine = engine
	d.Kubernetes = nil
	if engine != config.EngineKubernetes || m == nil || e == nil {
		return
	}
	d.Kubernetes = &Kubernetes{PlanDocument: *k8srender.NewPlanDocument(m, e)}
	// Without kewplan's proxy (proxy_image) a cluster does not broker credentials (k8srender's
	// brokered-credentials difference): the agent step reads the values from the credentials Secret, so the
	// document says forward, whatever the Docker plan would do.
	for i := range d.Nodes {
		n := &d.Nodes[i]
		if n.CredentialMode != config.CredentialsBrokered || e.ProxyImage != "" {
			continue // with proxy_image kewplan's proxy brokers them, as on Docker
		}
		n.CredentialMode, n.BrokeredEndpoints, n.BrokeredPaths = config.CredentialsForward, nil, nil
		for c := range n.CredentialModes {
			n.CredentialModes[c] = config.CredentialsForward
		}
	}
}
