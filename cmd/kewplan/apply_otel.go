package main

import (
	"context"
	"strings"
	"time"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/executor"
	"github.com/kewplan/kewplan/telemetry"
)

// telemetryHooks puts the OpenTelemetry exporter in front of the view's hooks when export is on (an OTLP
// endpoint in the environment, or --otel), so that its end-of-run warning reaches the view before the summary.
// The returned func shuts the exporter down; it is a no-op when export is off.
func (c *ApplyCmd) telemetryHooks(env *Env, a *toApply, hooks []executor.Hook) ([]executor.Hook, func(), error) {
	getenv := environGetter(env.Environ)
	if !telemetry.Enabled(getenv, c.OTel) {
		return hooks, func() {}, nil
	}
	engine := a.engine
	if engine == "" {
		engine = config.EngineDocker
	}
	warn := func(msg string) {
		for _, h := range hooks {
			h.Warning(executor.WarningEvent{Message: msg, Time: time.Now()})
		}
	}
	exp, err := telemetry.New(context.Background(), telemetry.Options{
		Getenv: getenv, Secrets: planSecrets(a, getenv), PlanDigest: a.gate.Plan.Digest, Engine: engine,
		Version: version, Warn: warn,
	})
	if err != nil {
		return nil, nil, err
	}
	return append([]executor.Hook{exp}, hooks...), exp.Close, nil
}

// planSecrets are the values of every credential the plan forwards to a node, masked in everything exported.
func planSecrets(a *toApply, getenv func(string) string) []string {
	var out []string
	seen := map[string]bool{}
	for _, np := range a.plan.Nodes {
		for _, name := range np.Credentials {
			if v := getenv(name); v != "" && !seen[v] {
				seen[v] = true
				out = append(out, v)
			}
		}
	}
	return out
}

// environGetter reads an os.Environ-shaped list (the last setting of a name wins, as in the process).
func environGetter(environ []string) func(string) string {
	m := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return func(k string) string { return m[k] }
}
