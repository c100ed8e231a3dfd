package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/kewplan/kewplan/executor"
	"github.com/kewplan/kewplan/views"
)

// SalvageCmd is `kewplan salvage RUN NODE [--branch NAME] [--pull-request]`.
type SalvageCmd struct {
	RunID       string `arg:"" name:"run" help:"The run id (from kewplan runs)."`
	Node        string `arg:"" name:"node" help:"The node whose kept work to publish (kewplan runs show RUN says what was kept)."`
	Branch      string `name:"branch" placeholder:"NAME" help:"The branch to push to (default kew/salvage/<node>-<run>)."`
	PullRequest bool   `name:"pull-request" help:"Open a draft pull request after the push (needs gh, authenticated)."`
	StateDir    string `name:"state-dir" placeholder:"DIR" help:"The state directory of the run (default: .kewplan in the current directory)."`
	JSON        bool   `name:"json" help:"Print JSON."`
}

// Help shows an example.
func (SalvageCmd) Help() string {
	return "Publishes what a worker made before it was stopped (budget, timeout, cancellation, failure, hold, or a\n" +
		"refused push) through the host broker, with every check of a normal push and no force. Nothing kept is\n" +
		"pushed without this command.\n\nExample:\n  kewplan runs show 20261130T101430Z-8f5b00\n" +
		"  kewplan salvage 20261130T101430Z-8f5b00 fix --pull-request"
}

// Run publishes the kept work.
func (c *SalvageCmd) Run(env *Env) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	recoverState(env, c.StateDir)
	out, err := executor.PublishSalvage(ctx, executor.SalvageOptions{StateDir: c.StateDir, RunID: c.RunID, Node: c.Node,
		Branch: c.Branch, PullRequest: c.PullRequest, Environ: env.Environ})
	if err != nil {
		return err
	}
	return views.NewSalvage(views.ViewTypeOf(c.JSON), env.streams()).Published(out)
}
