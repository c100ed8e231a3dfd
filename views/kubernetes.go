package views

import (
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kewplan/kewplan/k8srender"
)

// writeKubernetesSummary renders the Kubernetes objects of a plan for people: per node its Job and prompt Secret,
// the pod's steps with what each mounts, the values waiting for other nodes, then the shared objects and the
// named differences from the Docker engine. Every value from the configuration goes through diffSafe, so nothing
// a terminal interprets is printed.
func writeKubernetesSummary(w io.Writer, m *k8srender.Manifests) error {
	ew := &planWriter{w: w}
	ew.printf("Kubernetes objects in namespace %s (run %s)\n", diffSafe(m.Namespace), diffSafe(m.RunID))
	for _, n := range m.Nodes {
		pod := n.Job.Spec.Template.Spec
		ew.printf("\nnode %q\n", diffSafe(n.Node))
		ew.printf("  Job     %s  (backoffLimit 0, activeDeadlineSeconds %d, ttlSecondsAfterFinished %d)\n",
			n.Job.Name, *n.Job.Spec.ActiveDeadlineSeconds, *n.Job.Spec.TTLSecondsAfterFinished)
		ew.printf("  Secret  %s  (the prompt; mounted by the clone step only)\n", n.Prompt.Name)
		if pod.RuntimeClassName != nil {
			ew.printf("  runtimeClassName  %s\n", diffSafe(*pod.RuntimeClassName))
		}
		steps := append(append([]corev1.Container{}, pod.InitContainers...), pod.Containers...)
		for i, c := range steps {
			ew.printf("  step %d  %-8s %s\n", i+1, c.Name, diffSafe(c.Image))
			ew.printf("          mounts %s%s\n", mountList(c), limitList(c))
		}
		if len(n.WaitsFor) > 0 {
			ew.printf("  waits for %s: %s rendered as (known after apply)\n", diffSafe(strings.Join(n.WaitsFor, ", ")), diffSafe(strings.Join(n.Unknown, ", ")))
		}
	}
	ew.printf("\nShared\n")
	for _, o := range m.Shared {
		ew.printf("  %-14s %s\n", o.GetObjectKind().GroupVersionKind().Kind, o.GetName())
	}
	ew.printf("\nDifferences from the Docker engine\n")
	for _, d := range m.Differences {
		ew.printf("  %s\n", d.ID)
		ew.printf("    docker:     %s\n", diffSafe(d.Docker))
		ew.printf("    kubernetes: %s\n", diffSafe(d.Kubernetes))
		if len(d.Conform) > 0 {
			ew.printf("    conform rows that depend on it: %s\n", strings.Join(d.Conform, ", "))
		}
	}
	ew.printf("\nRender: %d nodes, %d objects, %d differences.\n", len(m.Nodes), len(m.All()), len(m.Differences))
	return ew.err
}

func mountList(c corev1.Container) string {
	var parts []string
	for _, vm := range c.VolumeMounts {
		s := vm.MountPath
		if vm.ReadOnly {
			s += " (ro)"
		}
		switch vm.Name {
		case "git-credential":
			s += " [git credential]"
		case "prompt":
			s += " [prompt]"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

func limitList(c corev1.Container) string {
	var parts []string
	if q, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
		parts = append(parts, "cpu "+q.String())
	}
	if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
		parts = append(parts, "memory "+q.String())
	}
	if len(parts) == 0 {
		return ""
	}
	return "; limits " + strings.Join(parts, ", ")
}
