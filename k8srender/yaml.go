package k8srender

import (
	"bytes"
	"fmt"
	"sort"

	"sigs.k8s.io/yaml"
)

// File is one manifest file of the rendered output: a name relative to the output directory and its YAML.
type File struct {
	Name string
	Data []byte
}

// Files renders the manifests as YAML files: "00-shared.yaml" with the shared objects, then one file per node
// ("<nn>-<node object name>.yaml", in plan order) holding its prompt Secret and its Job. Objects are separated by
// "---"; every file says in a comment what it is. The output is deterministic for a given plan.
func (m *Manifests) Files() ([]File, error) {
	var files []File
	head := "Shared objects of run " + m.RunID + ": the egress NetworkPolicy of every node's pod."
	if len(m.Shared) > 1 {
		head = "Shared objects of run " + m.RunID + ": the egress NetworkPolicy of every node's pod, then kewplan's egress proxy (Secret, Deployment, Service, NetworkPolicy)."
	}
	shared, err := encode(head, m.Shared)
	if err != nil {
		return nil, err
	}
	files = append(files, File{Name: "00-shared.yaml", Data: shared})
	for i, n := range m.Nodes {
		head := fmt.Sprintf("Node %q: its prompt Secret and its Job.", n.Node)
		if len(n.WaitsFor) > 0 {
			head += fmt.Sprintf(" Values marked %q wait for %v (annotation %s).", "(known after apply)", n.WaitsFor, AnnotationWaitsFor)
		}
		data, err := encode(head, n.Objects())
		if err != nil {
			return nil, err
		}
		files = append(files, File{Name: fmt.Sprintf("%02d-%s.yaml", i+1, n.Job.Name), Data: data})
	}
	return files, nil
}

// YAML renders every object as one multi-document stream.
func (m *Manifests) YAML() ([]byte, error) {
	return encode("", m.All())
}

func encode(head string, objs []Object) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("# Rendered by kewplan; do not edit: render again from the configuration.\n")
	if head != "" {
		b.WriteString("# " + head + "\n")
	}
	for i, o := range objs {
		data, err := MarshalObject(o)
		if err != nil {
			return nil, fmt.Errorf("encode %s %s: %w", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
		}
		if i > 0 {
			b.WriteString("---\n")
		}
		b.Write(data)
	}
	return b.Bytes(), nil
}

// MarshalObject is one object's YAML without the fields the API server owns (status, creationTimestamp), so the
// manifests hold only what kewplan decides.
func MarshalObject(o Object) ([]byte, error) {
	js, err := yaml.Marshal(o)
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := yaml.Unmarshal(js, &doc); err != nil {
		return nil, err
	}
	delete(doc, "status")
	prune(doc)
	return yaml.Marshal(doc)
}

// prune removes null creationTimestamp fields and empty maps the typed structs leave behind.
func prune(v any) {
	switch t := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if k == "creationTimestamp" && t[k] == nil {
				delete(t, k)
				continue
			}
			prune(t[k])
			if k == "resources" || k == "metadata" {
				if mm, ok := t[k].(map[string]any); ok && len(mm) == 0 {
					delete(t, k)
				}
			}
		}
	case []any:
		for _, x := range t {
			prune(x)
		}
	}
}
