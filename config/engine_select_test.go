package config

import (
	"strings"
	"testing"
)

func TestSelectEngine(t *testing.T) {
	docker := &Config{}
	k8s := &Config{Engines: map[string]*Engine{EngineKubernetes: {Name: EngineKubernetes, Kubernetes: &KubernetesEngine{}}}}
	both := &Config{Engines: map[string]*Engine{EngineKubernetes: k8s.Engines[EngineKubernetes], EngineDocker: {Name: EngineDocker}}}
	for _, tc := range []struct {
		name   string
		cfg    *Config
		flag   string
		want   string
		errHas string
	}{
		{"no block, no flag: docker", docker, "", EngineDocker, ""},
		{"only engine is the default", k8s, "", EngineKubernetes, ""},
		{"two engines: docker unless asked", both, "", EngineDocker, ""},
		{"flag wins", k8s, EngineDocker, EngineDocker, ""},
		{"kubernetes needs its block", docker, EngineKubernetes, "", `no engine "kubernetes" block`},
		{"unknown engine", docker, "kubernets", "", `Did you mean "kubernetes"?`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, diags := tc.cfg.SelectEngine(tc.flag)
			if tc.errHas != "" {
				if !diags.HasErrors() || !strings.Contains(diags.Error(), tc.errHas) {
					t.Fatalf("SelectEngine(%q) = %q, %v; want an error containing %q", tc.flag, got, diags, tc.errHas)
				}
				return
			}
			if diags.HasErrors() || got != tc.want {
				t.Fatalf("SelectEngine(%q) = %q, %v; want %q", tc.flag, got, diags, tc.want)
			}
		})
	}
}
