// Command kewplan plans and applies fleets of contained coding agents declared in HCL.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/alecthomas/kong"
	"golang.org/x/term"

	"github.com/kewplan/kewplan/views"
)

// version is set at build time with -ldflags "-X main.version=…"; unstamped (go install, go build), init reads
// it from the module's build information (versionFrom).
var version string

func init() { version = versionFrom(version, buildInfo) }

// CLI is the kong grammar. Each command's struct and Run method live in the file named after it.
type CLI struct {
	NoColor bool             `help:"Disable colour and terminal styling in output." name:"no-color"`
	Version kong.VersionFlag `help:"Print kewplan's version and exit." name:"version"`

	Validate  ValidateCmd  `cmd:"" help:"Check a configuration: syntax, schema, types, references, variables and the fail-closed rules."`
	Fmt       FmtCmd       `cmd:"" help:"Rewrite configuration files in the canonical format."`
	Plan      PlanCmd      `cmd:"" help:"Show the exact docker run argv and the credential exposure of every node."`
	Show      ShowCmd      `cmd:"" help:"Render a saved plan."`
	Graph     GraphCmd     `cmd:"" help:"Print the dispatch graph as Graphviz DOT."`
	Runners   RunnersCmd   `cmd:"" help:"List built-in and declared runners with their credentials and protocol."`
	Pricing   PricingCmd   `cmd:"" help:"Show the price table (USD per million tokens) that estimates costs, with a configuration's overrides."`
	Apply     ApplyCmd     `cmd:"" help:"Run the dispatch graph: containers on the Docker engine, or Jobs on Kubernetes (--engine kubernetes)."`
	Approve   ApproveCmd   `cmd:"" help:"Sign a saved plan's digest with your SSH key, as an approval apply checks."`
	Verify    VerifyCmd    `cmd:"" help:"Check a receipt's signature, and that it records a run of a saved plan."`
	Runs      RunsCmd      `cmd:"" help:"List recorded runs, or show one."`
	Salvage   SalvageCmd   `cmd:"" help:"Publish what a stopped worker made (kept by apply) to a new branch, through the host broker."`
	Telemetry TelemetryCmd `cmd:"" help:"Meter a recorded agent stream offline and print its totals."`
	Logs      LogsCmd      `cmd:"" help:"Show a readable transcript of what an agent did: a run's nodes, or a recorded stream."`
	Diff      DiffCmd      `cmd:"" help:"Compare two plans and flag any widening of credential exposure."`
	Egress    EgressCmd    `cmd:"" help:"Learn an egress allowlist from a run's recorded denials."`
	Policy    PolicyCmd    `cmd:"" help:"Test an organisation's policy rules against fixtures (policy test)."`
	Smoke     SmokeCmd     `cmd:"" help:"Check an image's launch, mount and prompt handoff without invoking the agent."`
	Conform   ConformCmd   `cmd:"" help:"Run the container entrypoint contract's implementer checklist against an image."`
	VersionC  VersionCmd   `cmd:"" name:"version" help:"Print kewplan's version."`

	Render RenderCmd `cmd:"" help:"Write the plan's Kubernetes manifests (engine \"kubernetes\"), or summarise them."`

	EgressProxy EgressProxyCmd `cmd:"" name:"egress-proxy" hidden:"" help:"Run kewplan's egress proxy (apply starts it in its own container)."`
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

// Exit statuses: one table for every command, each code with one meaning, never reused (README "Exit
// statuses"). A CI gate on diff's 2 must never read a typo or a crash as a widening.
const (
	exitOK          = 0   // success
	exitError       = 1   // any error, usage errors included (a missing argument, a mistyped flag)
	exitWidened     = 2   // diff: the change widens credential exposure or a review rule matched (review required); nothing else
	exitUnformatted = 3   // fmt --check: files are not in the canonical format; nothing else
	exitCrash       = 70  // kewplan itself crashed (a bug: please report it); EX_SOFTWARE of sysexits.h
	exitInterrupted = 130 // interrupted (SIGINT or SIGTERM), after cleaning up
)

// exitTable is the table of exit statuses in `kewplan --help`.
const exitTable = `Exit statuses (the same for every command, each with one meaning):
  0    success
  1    error, usage errors included (a missing argument, a mistyped flag)
  2    kewplan diff only: the change widens credential exposure, or (--policy) a review rule matched (review required)
  3    kewplan fmt --check only: files are not in the canonical format
  70   kewplan crashed (a bug; please report it)
  130  interrupted`

func main() {
	tuneGC()
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run runs one command line and returns its exit status; a panic is reported as a crash (exitCrash), never with
// the Go runtime's status 2, which diff uses for a widening.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	view := views.NewView(views.Streams{Stdout: stdout, Stderr: stderr})
	return crashGuard(view, func() int { return runCommand(args, stdin, stdout, stderr) })
}

// crashGuard runs f and turns a panic into a short report and exitCrash; the stack trace is printed only when
// KEWPLAN_DEBUG is set.
func crashGuard(view *views.View, f func() int) (code int) {
	defer func() {
		if r := recover(); r != nil {
			var stack []byte
			if os.Getenv("KEWPLAN_DEBUG") != "" {
				stack = debug.Stack()
			}
			view.Crash(r, stack)
			code = exitCrash
		}
	}()
	return f()
}

func runCommand(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var cli CLI
	exitCode := -1
	view := views.NewView(views.Streams{Stdout: stdout, Stderr: stderr})
	// `kewplan` alone and `kewplan help [COMMAND]` print the help, exit 0.
	switch {
	case len(args) == 0:
		args = []string{"--help"}
	case args[0] == "help":
		args = append(append([]string{}, args[1:]...), "--help")
	}
	parser, err := kong.New(&cli,
		kong.Name("kewplan"),
		kong.Description("Plan and apply fleets of contained coding agents, declared in HCL.\n\n"+exitTable),
		kong.Writers(stdout, stderr),
		kong.Exit(func(code int) { exitCode = code }),
		kong.ConfigureHelp(kong.HelpOptions{Compact: true}),
		kong.Vars{"version": "kewplan " + version},
	)
	if err != nil {
		view.SetupError(err)
		return exitError
	}
	kctx, err := parser.Parse(args)
	if exitCode >= 0 { // --help or --version (0), or kong's own exit
		if exitCode != exitOK {
			return exitError
		}
		return exitOK
	}
	if err != nil {
		view.UsageError(err)
		return exitError
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
		view.Error(err)
		return exitError
	}
	return exitOK
}

func isTerminal(v any) bool {
	f, ok := v.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
