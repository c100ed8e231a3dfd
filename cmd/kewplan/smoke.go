package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/kewplan/kewplan/executor/conform"
	"github.com/kewplan/kewplan/executor/engine"
	"github.com/kewplan/kewplan/runners"
	"github.com/kewplan/kewplan/views"
)

// SmokeCmd is `kewplan smoke IMAGE [--runner NAME] [--json]`.
type SmokeCmd struct {
	Image   string        `arg:"" help:"The image to check. It must be present in the local engine: kewplan never pulls."`
	Runner  string        `name:"runner" default:"claude-code" placeholder:"NAME" help:"Built-in runner whose container args fill the \"$@\" slot."`
	JSON    bool          `name:"json" help:"Print the report as JSON."`
	Timeout time.Duration `name:"timeout" default:"2m" help:"Kill the container if it has not finished after this long."`
	Runtime string        `name:"runtime" placeholder:"NAME" help:"Container runtime (isolation tier) to run under, such as runsc for gVisor; default: the engine's default runtime."`
}

// Help shows an example.
func (SmokeCmd) Help() string {
	return "Example:\n  kewplan smoke kew-agent:latest\n  kewplan smoke kew-opencode:latest --runner opencode\n  kewplan smoke kew-agent:latest --runtime runsc\n\n" +
		"Runs IMAGE under apply's hardening (on no network) with its entrypoint replaced by /bin/sh, which prints\n" +
		"/work/.kew-prompt.txt back. PASS or FAIL for the contract's elements 1-3: the mounted checkout, the prompt\n" +
		"file and the \"$@\" slot. The agent is never started. Exit status 1 when any element fails."
}

// Run checks the image.
func (c *SmokeCmd) Run(env *Env) error {
	view := views.NewCheck(views.ViewTypeOf(c.JSON), env.streams())
	return runCheck(env, view, c.Runner, c.Timeout, func(ctx context.Context, eng *engine.Engine) (*conform.SmokeReport, error) {
		return conform.Smoke(ctx, eng, conform.ProbeOptions{
			Image: c.Image, Runner: c.Runner, Timeout: c.Timeout, Runtime: c.Runtime, Progress: view.Progress(),
		})
	}, func(rep *conform.SmokeReport) (bool, error) { return rep.Passed, view.Smoke(rep) })
}

// runCheck is what smoke and conform share: refuse bad flags before any engine is contacted, connect, run the
// check, show its report (show says whether it passed), and set the exit status: 1 when the check failed, 130
// with a one-line note when Ctrl-C cancelled it (it removed its containers and scratch checkouts on the way out).
func runCheck[R any](env *Env, view views.Check, runner string, timeout time.Duration,
	check func(context.Context, *engine.Engine) (R, error), show func(R) (bool, error)) error {
	if err := checkProbeFlags(runner, timeout); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	eng, err := engine.Connect(ctx, env.Environ)
	if err != nil {
		return err
	}
	defer eng.Close()
	rep, err := check(ctx, eng)
	if err != nil {
		if ctx.Err() != nil {
			view.Interrupted()
			return ExitCode(exitInterrupted)
		}
		return err
	}
	passed, err := show(rep)
	if err != nil {
		return err
	}
	if !passed {
		return ExitCode(1)
	}
	return nil
}

// checkProbeFlags refuses bad smoke and conform flags before any engine is contacted.
func checkProbeFlags(runner string, timeout time.Duration) error {
	if _, ok := runners.Builtin(runner); !ok {
		return fmt.Errorf("unknown runner %q: the built-in runners are %s", runner, strings.Join(runners.BuiltinNames(), ", "))
	}
	if timeout <= 0 {
		return fmt.Errorf("--timeout must be positive, not %s", timeout)
	}
	return nil
}
