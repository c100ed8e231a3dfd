package views

import (
	"fmt"
	"strings"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/jsonplan"
	"github.com/kewplan/kewplan/k8srender"
)

// planKubernetes is the kubernetes object of a document, nil on Docker. A document whose object cannot be read
// (a hand-edited plan file) is shown with an empty one, its nodes saying they have no objects, rather than not
// at all.
func planKubernetes(doc *jsonplan.Document) *k8srender.PlanDocument {
	if doc.EngineName() != config.EngineKubernetes {
		return nil
	}
	if doc.Kubernetes == nil {
		return &k8srender.PlanDocument{}
	}
	return &doc.Kubernetes.PlanDocument
}

// writePlanKubernetesHead says where the objects go, after the plan's first line.
func writePlanKubernetesHead(ew *planWriter, k *k8srender.PlanDocument) {
	ew.printf("Engine kubernetes: namespace %s, run %s (the manifests: kewplan plan --engine kubernetes --format yaml).\n",
		diffSafe(k.Namespace), diffSafe(k.RunID))
}

// writePlanKubernetesNode is a node's Job summary, in place of the Docker argv.
func writePlanKubernetesNode(ew *planWriter, n *jsonplan.NodeDocument, k *k8srender.PlanDocument) {
	kn := k.Node(n.Name)
	if kn == nil {
		ew.printf("  %-12s %s\n", "job", "(none: the node has errors, see below)")
		return
	}
	job, secret := "", ""
	for _, o := range kn.Objects {
		switch o.Kind {
		case "Job":
			job = o.Name
		case "Secret":
			secret = o.Name
		}
	}
	ew.printf("  %-12s %s in namespace %s (activeDeadlineSeconds %d, ttlSecondsAfterFinished %d)\n", "job",
		diffSafe(job), diffSafe(k.Namespace), kn.ActiveDeadlineSeconds, kn.TTLSecondsAfterFinished)
	ew.printf("  %-12s %s\n", "steps", planKubernetesSteps(kn, " -> "))
	rc := "(cluster default)"
	if kn.RuntimeClass != "" {
		rc = kn.RuntimeClass
	}
	ew.printf("  %-12s %s\n", "runtime", diffSafe(rc))
	secrets := make([]string, len(kn.Secrets))
	for i, s := range kn.Secrets {
		secrets[i] = s
		if s == secret {
			secrets[i] += " (the prompt, clone step only)"
		}
	}
	ew.printf("  %-12s %s\n", "secrets", diffSafe(strings.Join(secrets, ", ")))
	if len(kn.WaitsFor) > 0 {
		ew.printf("  %-12s %s\n", "waits for", diffSafe(strings.Join(kn.WaitsFor, ", "))+" ("+diffSafe(strings.Join(kn.Unknown, ", "))+" rendered as (known after apply))")
	}
}

// planKubernetesSteps is the pod's steps in order, "clone (init) -> agent (init) -> push" with sep " -> ".
func planKubernetesSteps(kn *k8srender.NodeDocument, sep string) string {
	parts := make([]string, len(kn.Steps))
	for i, s := range kn.Steps {
		parts[i] = s.Name
		if s.Init {
			parts[i] += " (init)"
		}
	}
	return diffSafe(strings.Join(parts, sep))
}

// writePlanKubernetesTail lists the shared objects and every named difference from Docker.
func writePlanKubernetesTail(ew *planWriter, k *k8srender.PlanDocument) {
	if len(k.Shared) > 0 {
		ew.printf("\nShared Kubernetes objects\n")
		for _, o := range k.Shared {
			ew.printf("  %-14s %s\n", diffSafe(o.Kind), diffSafe(o.Name))
		}
	}
	ew.printf("\nDifferences from Docker\n")
	for _, d := range k.Differences {
		ew.printf("  %s\n", diffSafe(d.ID))
		ew.printf("    docker:     %s\n", diffSafe(d.Docker))
		ew.printf("    kubernetes: %s\n", diffSafe(d.Kubernetes))
		if len(d.Conform) > 0 {
			ew.printf("    conform rows that depend on it: %s\n", diffSafe(strings.Join(d.Conform, ", ")))
		}
	}
}

// writePlanKubernetesMarkdown is the engine's sections of a markdown plan: the Jobs in place of the argv, then the
// named differences.
func writePlanKubernetesMarkdown(ew *planWriter, doc *jsonplan.Document, k *k8srender.PlanDocument) {
	if len(doc.Nodes) > 0 {
		ew.printf("\n### Kubernetes Jobs\n\n| Node | Job | Steps | Runtime class | Secrets | Waits for |\n|---|---|---|---|---|---|\n")
		for i := range doc.Nodes {
			n := &doc.Nodes[i]
			kn := k.Node(n.Name)
			if kn == nil {
				ew.printf("| %s | %s | | | | |\n", mdCode(n.Name), mdText("(none: the node has errors)"))
				continue
			}
			job := ""
			for _, o := range kn.Objects {
				if o.Kind == "Job" {
					job = o.Name
				}
			}
			rc := "(cluster default)"
			if kn.RuntimeClass != "" {
				rc = kn.RuntimeClass
			}
			ew.printf("| %s | %s | %s | %s | %s | %s |\n", mdCode(n.Name), mdCode(job), mdText(planKubernetesSteps(kn, ", ")),
				planMDCode(rc), mdCodeList(kn.Secrets), mdText(strings.Join(kn.WaitsFor, ", ")))
		}
	}
	ew.printf("\n### Differences from Docker\n\n")
	for _, d := range k.Differences {
		ew.printf("- %s: %s", mdCode(d.ID), mdText(d.Kubernetes))
		if len(d.Conform) > 0 {
			ew.printf(" (conform: %s)", mdText(strings.Join(d.Conform, ", ")))
		}
		ew.printf("\n")
	}
}

// planKubernetesMarkdownHead is the markdown plan's engine line.
func planKubernetesMarkdownHead(k *k8srender.PlanDocument) string {
	return fmt.Sprintf("Engine: kubernetes, namespace %s, run %s", mdCode(k.Namespace), mdCode(k.RunID))
}
