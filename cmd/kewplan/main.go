// Command kewplan plans and applies fleets of contained coding agents declared in HCL.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/alecthomas/kong"
	"golang.org/x/term"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "0.1.0-dev"

// CLI is the kong grammar. Each command's struct and Run method live in the file named after it.
type CLI struct {
	NoColor bool `help:"Disable colour and terminal styling in output." name:"no-color"`

	Validate  ValidateCmd  `cmd:"" help:"Check a configuration: syntax, schema, types, references, variables and the fail-closed rules."`
	Fmt       FmtCmd       `cmd:"" help:"Rewrite configuration files in the canonical format."`
	Plan      PlanCmd      `cmd:"" help:"Show the exact docker run argv and the credential exposure of every node."`
	Show      ShowCmd      `cmd:"" help:"Render a saved plan."`
	Graph     GraphCmd     `cmd:"" help:"Print the dispatch graph as Graphviz DOT."`
	Runners   RunnersCmd   `cmd:"" help:"List built-in and declared runners with their credentials and protocol."`
	Apply     ApplyCmd     `cmd:"" help:"Run the dispatch graph on the Docker engine."`
	Runs      RunsCmd      `cmd:"" help:"List recorded runs, or show one."`
	Telemetry TelemetryCmd `cmd:"" help:"Meter a recorded agent stream offline and print its totals."`
	Diff      DiffCmd      `cmd:"" help:"Compare two plans and flag any widening of credential exposure."`
	Smoke     SmokeCmd     `cmd:"" help:"Check an image's launch, mount and prompt handoff without invoking the agent."`
	Conform   ConformCmd   `cmd:"" help:"Run the container entrypoint contract's implementer checklist against an image."`
	Version   VersionCmd   `cmd:"" help:"Print kewplan's version."`
	Render    RenderCmd    `cmd:"" help:"Write the plan's Kubernetes manifests (engine \"kubernetes\"), or summarise them."`
}

// Env is what every command receives: its streams and the process facts it may depend on, so that tests and
// testscript can drive commands without a real terminal.
type Env struct {
	Stdin    io.Reader
	Stdout   io.Writer
	Stderr   io.Writer
	Environ  []string
	NoColor  bool
	Terminal bool // stdout is a terminal (colour and live lines)
	StdinTTY bool // stdin is a terminal (interactive approval)
}

// ExitCode is returned by a command that has already reported why it failed and wants a specific exit status.
type ExitCode int

func (e ExitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var cli CLI
	exitCode := -1
	parser, err := kong.New(&cli,
		kong.Name("kewplan"),
		kong.Description("Plan and apply fleets of contained coding agents, declared in HCL."),
		kong.UsageOnError(),
		kong.Writers(stdout, stderr),
		kong.Exit(func(code int) { exitCode = code }),
		kong.ConfigureHelp(kong.HelpOptions{Compact: true}),
	)
	if err != nil {
		fmt.Fprintf(stderr, "kewplan: %v\n", err)
		return 1
	}
	kctx, err := parser.Parse(args)
	if exitCode >= 0 { // --help, or kong's own exit
		return exitCode
	}
	if err != nil {
		fmt.Fprintf(stderr, "Error: %v\n", err)
		fmt.Fprintf(stderr, "Run 'kewplan --help' for usage.\n")
		return 2
	}
	env := &Env{
		Stdin:    stdin,
		Stdout:   stdout,
		Stderr:   stderr,
		Environ:  os.Environ(),
		NoColor:  cli.NoColor || os.Getenv("NO_COLOR") != "",
		Terminal: isTerminal(stdout),
		StdinTTY: isTerminal(stdin),
	}
	if err := kctx.Run(env); err != nil {
		var code ExitCode
		if errors.As(err, &code) {
			return int(code)
		}
		fmt.Fprintf(stderr, "Error: %v\n", err)
		return 1
	}
	return 0
}

func isTerminal(v any) bool {
	f, ok := v.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
