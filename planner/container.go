package planner

import "strconv"

// Placeholders in a planned argv: the checkout directory and the run id exist only at apply, which fills them in.
const (
	CheckoutPlaceholder = "<checkout>"
	RunPlaceholder      = "<run>"
)

// Container paths fixed by the container entrypoint contract.
const (
	WorkDir           = "/work"
	PromptFilename    = ".kew-prompt.txt"
	VerdictFilename   = ".kew-review-verdict.json"
	VerdictMountPath  = WorkDir + "/" + VerdictFilename
	AgentUID          = 1001
	AgentHomeTmpfs    = "/home/agent"
	AgentHomeTmpfsOpt = "exec,uid=1001,gid=1001,mode=0700"
	ScratchTmpfs      = "/tmp"
	LabelNode         = "kewplan.node"
	LabelRun          = "kewplan.run"
	ContainerPrefix   = "kew-"
)

// Container is the single source of truth for one node's container: Argv renders it for people, and the
// executor derives the Engine API configuration from the same fields, so the two cannot drift.
type Container struct {
	Name      string   // "kew-<node>"
	Node      string   // node name, value of the kewplan.node label
	RunID     string   // value of the kewplan.run label; RunPlaceholder in a plan
	Checkout  string   // host directory bound at /work; CheckoutPlaceholder in a plan
	Image     string   // image reference
	Network   string   // network name: the allowlist network, or "bridge" for open
	Runtime   string   // --runtime (the isolation tier, e.g. "runsc"); "" for the engine's default: no flag
	PidsLimit int64    // --pids-limit
	Memory    string   // --memory as written ("4g"); "" when unset
	CPUs      string   // --cpus as written ("2", "1.5"); "" when unset
	Env       []string // credential names forwarded by name, in declared order; never NAME=value
	Args      []string // container command (the entrypoint's "$@")
}

// Argv is the exact `docker run` argv, one element per word. The prompt never appears in it (the entrypoint reads
// /work/.kew-prompt.txt), and credentials are forwarded by name only, so the argv can be shown and logged.
func (c *Container) Argv() []string {
	argv := make([]string, 0, 32+2*len(c.Env)+len(c.Args))
	argv = append(argv,
		"docker", "run", "--rm", "--name", c.Name)
	if c.Runtime != "" {
		argv = append(argv, "--runtime", c.Runtime)
	}
	argv = append(argv, "--read-only", "--tmpfs", ScratchTmpfs,
		"--tmpfs", AgentHomeTmpfs+":"+AgentHomeTmpfsOpt, "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
		"--pids-limit", strconv.FormatInt(c.PidsLimit, 10), "--network", c.Network)
	if c.Memory != "" {
		argv = append(argv, "--memory", c.Memory)
	}
	if c.CPUs != "" {
		argv = append(argv, "--cpus", c.CPUs)
	}
	argv = append(argv,
		"--label", LabelNode+"="+c.Node, "--label", LabelRun+"="+c.RunID,
		"-v", c.Checkout+":"+WorkDir, "-w", WorkDir)
	for _, name := range c.Env {
		argv = append(argv, "-e", name)
	}
	argv = append(argv, c.Image)
	return append(argv, c.Args...)
}
