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
}

// Help shows an example.
func (SmokeCmd) Help() string {
	return "Example:\n  kewplan smoke kew-agent:latest\n  kewplan smoke kew-opencode:latest --runner opencode\n\n" +
		"Runs IMAGE under apply's hardening (on no network) with its entrypoint replaced by /bin/sh, which prints\n" +
		"/work/.kew-prompt.txt back. PASS or FAIL for the contract's elements 1-3: the mounted checkout, the prompt\n" +
		"file and the \"$@\" slot. The agent is never started. Exit status 1 when any element fails."
}

// Run checks the image.
func (c *SmokeCmd) Run(env *Env) error {
	if err := checkProbeFlags(c.Runner, c.Timeout); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	eng, err := engine.Connect(ctx, env.Environ)
	if err != nil {
		return err
	}
	defer eng.Close()
	rep, err := conform.Smoke(ctx, eng, conform.ProbeOptions{
		Image: c.Image, Runner: c.Runner, Timeout: c.Timeout, Progress: progressLine(env, c.JSON),
	})
	if err != nil {
		return interrupted(ctx, env, err)
	}
	if c.JSON {
		err = views.SmokeReportJSON(env.Stdout, rep)
	} else {
		err = views.SmokeReportHuman(env.Stdout, rep, env.Terminal && !env.NoColor)
	}
	if err != nil {
		return err
	}
	if !rep.Passed {
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

// progressLine reports the steps of a check on stderr when a person is watching and the output is not JSON.
func progressLine(env *Env, jsonOut bool) func(string) {
	if jsonOut || !env.Terminal {
		return nil
	}
	return func(step string) { fmt.Fprintf(env.Stderr, "kewplan: %s…\n", step) }
}

// interrupted turns a cancellation by Ctrl-C into exit status 130 with a one-line note; the check removed its
// containers and scratch checkouts on the way out.
func interrupted(ctx context.Context, env *Env, err error) error {
	if ctx.Err() != nil {
		fmt.Fprintln(env.Stderr, "kewplan: interrupted; the check's containers were removed.")
		return ExitCode(130)
	}
	return err
}
