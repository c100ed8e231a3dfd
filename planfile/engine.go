package planfile

import (
	"fmt"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/jsonplan"
)

// Engine is the engine the plan runs on: "docker" or "kubernetes". A plan saved before engines existed names
// none and is a Docker plan.
func (f *File) Engine() string { return f.Doc.EngineName() }

// Kubernetes is a kubernetes plan's object: the run id, the engine block's settings it was rendered with, each
// node's objects and the named differences. It is nil, with no error, for a Docker plan; a kubernetes plan without
// a readable object is an error (the file was edited: CheckIntegrity says so too).
func (f *File) Kubernetes() (*jsonplan.Kubernetes, error) {
	switch f.Engine() {
	case config.EngineDocker:
		return nil, nil
	case config.EngineKubernetes:
	default:
		return nil, fmt.Errorf("the plan names the engine %q, which this kewplan does not drive (docker or kubernetes); run kewplan plan again", f.Doc.Engine)
	}
	if f.Doc.Kubernetes == nil {
		return nil, fmt.Errorf("the plan runs on kubernetes but has no kubernetes object (namespace, run id, settings); run kewplan plan --engine kubernetes again")
	}
	if err := f.Doc.Kubernetes.Err(); err != nil {
		return nil, err
	}
	return f.Doc.Kubernetes, nil
}
