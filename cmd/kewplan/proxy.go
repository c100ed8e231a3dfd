package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"

	"github.com/kewplan/kewplan/egress"
	"github.com/kewplan/kewplan/views"
)

// EgressProxyCmd runs kewplan's egress proxy: the process apply starts in the proxy container (hidden: operators
// never run it by hand). Decisions go to stdout, one JSON line each; diagnostics to stderr. The two --print flags
// serve `make proxy-image`, so that the Makefile and apply build the same image under the same tag.
type EgressProxyCmd struct {
	Config          string `help:"The proxy's JSON configuration file; - reads it from standard input." type:"string" placeholder:"FILE"`
	PrintDockerfile bool   `help:"Print the proxy image's Dockerfile and exit." name:"print-dockerfile"`
	PrintImageTag   string `help:"Print the proxy image's name:tag for the kewplan binary BINARY and exit." name:"print-image-tag" placeholder:"BINARY" type:"path"`
}

// Help shows an example.
func (EgressProxyCmd) Help() string {
	return "Example:\n  kewplan egress-proxy --config - < egress.json"
}

// Run serves until SIGINT or SIGTERM.
func (c *EgressProxyCmd) Run(env *Env) error {
	view := views.NewEgressProxy(env.streams())
	switch {
	case c.PrintDockerfile:
		return view.Dockerfile(egress.Dockerfile)
	case c.PrintImageTag != "":
		tag, err := imageTag(c.PrintImageTag)
		if err != nil {
			return err
		}
		return view.ImageTag(tag)
	case c.Config == "":
		return errors.New("egress-proxy needs --config FILE (or --config - to read the configuration from standard input)")
	}
	cfg, err := egress.LoadConfig(c.Config, env.Stdin)
	if err != nil {
		return err
	}
	s, err := egress.NewServer(cfg, view.Decisions(), egress.Options{})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	view.Listening(cfg.Listen, len(cfg.Nodes))
	return s.ListenAndServe(ctx)
}

// imageTag is the tag apply gives the egress proxy image of binary: of the binary alone when it is static, of the
// binary and the runtime files it needs (its ELF interpreter and shared libraries) when it is dynamic.
func imageTag(binary string) (string, error) {
	rf, err := egress.RuntimeFiles(binary)
	if err != nil {
		return "", err
	}
	data, err := os.ReadFile(binary)
	if err != nil {
		return "", err
	}
	ic, err := egress.NewImageContext(data, rf)
	if err != nil {
		return "", err
	}
	return ic.Tag, nil
}
