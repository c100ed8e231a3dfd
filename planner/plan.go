package planner

import (
	"io/fs"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/kewplan/kewplan/config"
)

// FormatVersion is the version of the plan's JSON shape (saved plans and `plan --json`). A major change is a
// breaking change for `kewplan diff` and `kewplan apply PLANFILE`.
const FormatVersion = "1.0"

// Inputs are what Build needs besides the configuration.
type Inputs struct {
	Vars map[string]cty.Value // resolved variable values (config.ResolveVariables)
	// Outputs are the known outputs of nodes that already finished (apply re-renders downstream nodes with them).
	Outputs map[string]map[string]cty.Value
	FS      fs.FS    // serves file()/templatefile(), rooted at the configuration's directory
	Targets []string // --target: plan these nodes and everything they depend on; empty means all
}

// Plan is the result of Build.
type Plan struct {
	FormatVersion string
	ConfigDigest  string       // sha256 over configuration files, files read by functions, and variable values
	Nodes         []*NodePlan  // dependency order; ties broken by name
	Exposure      map[string][]string // credential name -> nodes it reaches, sorted
	Diagnostics   hcl.Diagnostics
}

// NodePlan is one node's decisions.
type NodePlan struct {
	Name        string
	Runner      string
	Protocol    string
	Role        string // config.RoleWorker or config.RoleReviewer
	Image       string
	Network     string // config.NetworkAllowlist or config.NetworkOpen
	Model       string
	Repo        string
	Ref         string
	Branch      string
	Timeout     time.Duration
	Credentials []string // names, in declared order
	// CredentialOrigins says where each credential came from, parallel to Credentials: "builtin" or the
	// runner block's range as "file:line" for an override or a custom runner. Policy review flags widening.
	CredentialOrigins []string
	DependsOn         []string
	Prompt            Prompt
	// Unknown names the attributes whose values are known only after apply (e.g. "ref", "prompt").
	Unknown   []string
	Container *Container // nil when the node has an error
	DeclRange hcl.Range
}

// Prompt describes the prompt without ever placing it in argv.
type Prompt struct {
	Text   string // the full prompt, reviewer paragraph included; never rendered in views
	SHA256 string // hex digest of Text
	Bytes  int
}

// Build plans every node of cfg. It never reads the environment, Docker or git.
// STUB: the planner work replaces this body.
func Build(cfg *config.Config, in Inputs) (*Plan, hcl.Diagnostics) {
	return &Plan{FormatVersion: FormatVersion}, nil
}
