package main

import (
	"context"
	"time"

	"github.com/kewplan/kewplan/executor/conform"
	"github.com/kewplan/kewplan/executor/engine"
	"github.com/kewplan/kewplan/views"
)

// ConformCmd is `kewplan conform IMAGE --runner NAME [--json]`.
type ConformCmd struct {
	Image   string        `arg:"" help:"The image to check. It must be present in the local engine: kewplan never pulls."`
	Runner  string        `name:"runner" required:"" placeholder:"NAME" help:"Built-in runner the image serves: its container args, credential names and stdout vocabulary are checked."`
	JSON    bool          `name:"json" help:"Print the report as JSON."`
	Agent   string        `name:"agent" placeholder:"BINARY" help:"Name of the agent binary the entrypoint runs (default: the runner's, such as claude or opencode)."`
	Timeout time.Duration `name:"timeout" default:"2m" help:"Kill each container if it has not finished after this long."`
	Runtime string        `name:"runtime" placeholder:"NAME" help:"Container runtime (isolation tier) to run under, such as runsc for gVisor; default: the engine's default runtime."`
}

// Help shows an example.
func (ConformCmd) Help() string {
	return "Example:\n  kewplan conform kew-agent:latest --runner claude-code\n  kewplan conform kew-opencode:latest --runner opencode --json\n  kewplan conform kew-agent:latest --runner claude-code --runtime runsc\n\n" +
		"Runs the container entrypoint contract's implementer checklist against IMAGE: seven rows, each PASS, FAIL or\n" +
		"NOT VERIFIABLE with its evidence. The agent is intercepted by a probe placed first on PATH inside the mount;\n" +
		"it receives dummy credentials only, on no network. Exit status 1 when any row fails."
}

// Run checks the image.
func (c *ConformCmd) Run(env *Env) error {
	view := views.NewCheck(views.ViewTypeOf(c.JSON), env.streams())
	return runCheck(env, view, c.Runner, c.Timeout, func(ctx context.Context, eng *engine.Engine) (*conform.Report, error) {
		return conform.Run(ctx, eng, conform.Options{
			ProbeOptions: conform.ProbeOptions{Image: c.Image, Runner: c.Runner, Timeout: c.Timeout, Runtime: c.Runtime, Progress: view.Progress()},
			Agent:        c.Agent,
		})
	}, func(rep *conform.Report) (bool, error) { return rep.Passed, view.Conform(rep) })
}
