package planner

import (
	"slices"
	"strconv"
)

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
	ScratchTmpfsOpt   = "rw,noexec,nosuid,nodev"
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
	TmpfsSize string   // size= of both tmpfs mounts ("512m"); "" leaves them unbounded (containers not from a plan)
	DNS       []string // --dns upstreams of the embedded resolver; [ClosedDNS] for allowlist nodes
	// Proxied is true for an allowlist node that reaches hosts through the egress proxy: the argv forwards
	// ProxyVariables by name (apply supplies their values, which hold the node's proxy secret) and sets NO_PROXY.
	Proxied bool
	Env     []string // credential names forwarded by name, in declared order; never NAME=value
	// BaseURL is the base-URL variable of a brokered node, forwarded by name: apply sets it to the egress proxy's
	// broker, and the credentials of Env to placeholders. "" for a node whose credentials are forwarded.
	BaseURL string
	Args    []string // container command (the entrypoint's "$@")
}

// TmpfsMounts are the container's tmpfs mounts with their options, as the Engine API's HostConfig.Tmpfs takes
// them and as Argv renders them (--tmpfs PATH:OPTIONS). With a TmpfsSize (every planned container) /tmp is
// rw,noexec,nosuid,nodev and both mounts are bounded; without one (a container built by hand, as smoke does) the
// engine's defaults apply, as before sizes existed.
func (c *Container) TmpfsMounts() map[string]string {
	return map[string]string{ScratchTmpfs: c.tmpfsOptions(ScratchTmpfs), AgentHomeTmpfs: c.tmpfsOptions(AgentHomeTmpfs)}
}

// tmpfsOptions are the mount options of one of TmpfsMounts.
func (c *Container) tmpfsOptions(path string) string {
	opt := AgentHomeTmpfsOpt
	if path == ScratchTmpfs {
		if c.TmpfsSize == "" {
			return ""
		}
		opt = ScratchTmpfsOpt
	}
	if c.TmpfsSize == "" {
		return opt
	}
	return opt + ",size=" + c.TmpfsSize
}

// FixedEnv are the environment entries whose values the plan knows and shows (NAME=value, never a secret):
// NO_PROXY for a proxied container. The Engine API config sets them as written.
func (c *Container) FixedEnv() []string {
	if !c.Proxied {
		return nil
	}
	return slices.Clone(fixedEnv)
}

var fixedEnv = []string{NoProxyVariable + "=" + NoProxyValue}

// ProxyEnv are the names forwarded by name whose values apply takes from the egress proxy it starts (not from
// kewplan's environment); nil when the container is not proxied.
func (c *Container) ProxyEnv() []string {
	if !c.Proxied {
		return nil
	}
	return slices.Clone(ProxyVariables)
}

// Argv is the exact `docker run` argv, one element per word. The prompt never appears in it (the entrypoint reads
// /work/.kew-prompt.txt), and credentials are forwarded by name only, so the argv can be shown and logged.
func (c *Container) Argv() []string {
	var proxy, fixed []string
	if c.Proxied {
		proxy, fixed = ProxyVariables, fixedEnv
	}
	// 33 words at most besides the repeated ones: a large plan builds an argv per node, in one allocation each.
	argv := make([]string, 0, 35+2*(len(c.DNS)+len(c.Env)+len(proxy)+len(fixed))+len(c.Args))
	mount := func(path string) string {
		if opt := c.tmpfsOptions(path); opt != "" {
			return path + ":" + opt
		}
		return path
	}
	argv = append(argv,
		"docker", "run", "--rm", "--name", c.Name)
	if c.Runtime != "" {
		argv = append(argv, "--runtime", c.Runtime)
	}
	argv = append(argv, "--read-only", "--tmpfs", mount(ScratchTmpfs),
		"--tmpfs", mount(AgentHomeTmpfs), "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
		"--pids-limit", strconv.FormatInt(c.PidsLimit, 10), "--network", c.Network)
	for _, d := range c.DNS {
		argv = append(argv, "--dns", d)
	}
	if c.Memory != "" {
		argv = append(argv, "--memory", c.Memory)
	}
	if c.CPUs != "" {
		argv = append(argv, "--cpus", c.CPUs)
	}
	argv = append(argv,
		"--label", LabelNode+"="+c.Node, "--label", LabelRun+"="+c.RunID,
		"-v", c.Checkout+":"+WorkDir, "-w", WorkDir)
	var baseURL []string
	if c.BaseURL != "" {
		baseURL = []string{c.BaseURL}
	}
	for _, names := range [][]string{c.Env, baseURL, proxy, fixed} {
		for _, name := range names {
			argv = append(argv, "-e", name)
		}
	}
	argv = append(argv, c.Image)
	return append(argv, c.Args...)
}
