package k8sengine

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/k8srender"
)

// PreflightReport is what apply checks before the first Job: Errors stop the run, Warnings travel with its start.
type PreflightReport struct {
	ServerVersion string
	Errors        []string
	Warnings      []string
}

// Preflight checks that the API answers, the namespace exists and enforces Pod Security "restricted" (a warning
// when it does not), the git Secret holds "token", the credentials Secret holds every credential name some node
// needs (a missing key is a warning: like an unset -e NAME on Docker, the variable stays unset), and the runtime
// class exists when one is named. It never reads a Secret's values into a message.
func (c *Cluster) Preflight(ctx context.Context, e *config.KubernetesEngine, credentials []string) (*PreflightReport, error) {
	r := &PreflightReport{}
	v, err := c.API.Version(ctx)
	if err != nil {
		return nil, fmt.Errorf("the Kubernetes API does not answer: %w", err)
	}
	r.ServerVersion = v

	var ns metav1.PartialObjectMetadata
	err = c.API.Get(ctx, Namespaces, "", e.Namespace, &ns)
	switch {
	case apierrors.IsNotFound(err):
		r.Errors = append(r.Errors, fmt.Sprintf("The namespace %q does not exist. Create it with the label pod-security.kubernetes.io/enforce=restricted (see README, Kubernetes).", e.Namespace))
	case err != nil:
		return nil, fmt.Errorf("read namespace %s: %w", e.Namespace, err)
	default:
		if lvl := ns.Labels["pod-security.kubernetes.io/enforce"]; lvl != "restricted" {
			if lvl == "" {
				lvl = "none (the cluster default)"
			}
			r.Warnings = append(r.Warnings, fmt.Sprintf("The namespace %q enforces Pod Security %s, not restricted, so the API server would admit a pod weaker than kewplan renders. Label it: kubectl label namespace %s pod-security.kubernetes.io/enforce=restricted.", e.Namespace, lvl, e.Namespace))
		}
	}

	check := func(secret string, keys []string, missingIsError bool) error {
		var s corev1.Secret
		err := c.API.Get(ctx, Secrets, e.Namespace, secret, &s)
		if apierrors.IsNotFound(err) {
			r.Errors = append(r.Errors, fmt.Sprintf("The Secret %q does not exist in the namespace %q. Create it (see README, Kubernetes).", secret, e.Namespace))
			return nil
		}
		if err != nil {
			return fmt.Errorf("read Secret %s: %w", secret, err)
		}
		var missing []string
		for _, k := range keys {
			if _, ok := s.Data[k]; !ok {
				missing = append(missing, k)
			}
		}
		sort.Strings(missing)
		if len(missing) > 0 {
			msg := fmt.Sprintf("The Secret %q has no key %s.", secret, quoteKeys(missing))
			if missingIsError {
				r.Errors = append(r.Errors, msg+" Add it: the clone and push steps read it.")
			} else {
				r.Warnings = append(r.Warnings, msg+" The agents that need it start with the variable unset.")
			}
		}
		return nil
	}
	if err := check(e.GitSecret, []string{k8srender.GitTokenKey}, true); err != nil {
		return nil, err
	}
	if err := check(e.CredentialsSecret, credentials, false); err != nil {
		return nil, err
	}
	if e.RuntimeClass != "" {
		err := c.API.Get(ctx, RuntimeClasses, "", e.RuntimeClass, &metav1.PartialObjectMetadata{})
		switch {
		case apierrors.IsNotFound(err):
			r.Errors = append(r.Errors, fmt.Sprintf("The RuntimeClass %q does not exist, so every pod would be refused. Install it (e.g. gVisor's runsc handler) or remove runtime_class.", e.RuntimeClass))
		case apierrors.IsForbidden(err):
			r.Warnings = append(r.Warnings, fmt.Sprintf("kewplan may not read RuntimeClasses, so it cannot check that %q exists.", e.RuntimeClass))
		case err != nil:
			return nil, fmt.Errorf("read RuntimeClass %s: %w", e.RuntimeClass, err)
		}
	}
	return r, nil
}

// SecretKeys returns the names of a Secret's keys, sorted, never their values; found is false when the Secret
// does not exist. Apply's preflight uses it to check that each node's runner finds at least one of its credentials.
func (c *Cluster) SecretKeys(ctx context.Context, name string) (keys []string, found bool, err error) {
	var s corev1.Secret
	err = c.API.Get(ctx, Secrets, c.Namespace, name, &s)
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read Secret %s: %w", name, err)
	}
	for k := range s.Data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys, true, nil
}
