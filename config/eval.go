package config

import (
	"io/fs"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// VariableInputs are the raw variable values from outside the configuration, in Terraform's precedence order:
// environment (lowest), then --var-file files in order, then --var flags in order (highest).
type VariableInputs struct {
	Env      []string // os.Environ()-style "KEY=value"; only KEWPLAN_VAR_<name> entries are used
	VarFiles []string // paths of .hcl variable files
	Vars     []string // "name=value" from --var
}

// ResolveVariables decides every variable's value (inputs, else default), converts it to the declared type,
// runs validation blocks, and reports a required variable with no value by name.
// STUB: the config work replaces this body.
func (c *Config) ResolveVariables(in VariableInputs) (map[string]cty.Value, hcl.Diagnostics) {
	return nil, nil
}

// Scope is what expressions are evaluated against.
type Scope struct {
	Vars map[string]cty.Value
	// Outputs holds the known outputs of finished nodes (node name -> output name -> value). A node absent here
	// has every output unknown (cty.UnknownVal(cty.String)), which the planner shows as "(known after apply)".
	Outputs map[string]map[string]cty.Value
	// FS serves file() and templatefile(), rooted at Config.Dir.
	FS fs.FS
	// Reads, when not nil, records every file read through FS (for the saved plan's config digest).
	Reads *ReadLog
}

// ReadLog records files read by file() and templatefile(): name (relative to Config.Dir) -> sha256 hex.
type ReadLog struct {
	Files map[string]string
}

// EvalContext builds the evaluation context for node attributes: var.*, local.* (evaluated here, in dependency
// order), node.<name>.<output>, and the function table (file, templatefile and the go-cty stdlib set).
// STUB: the config work replaces this body.
func (c *Config) EvalContext(s *Scope) (*hcl.EvalContext, hcl.Diagnostics) {
	return &hcl.EvalContext{}, nil
}

// EvalRunnerArgs evaluates a runner block's args for one node, with `model` bound to the node's routed model.
// STUB: the config work replaces this body.
func EvalRunnerArgs(r *Runner, ctx *hcl.EvalContext, model string) ([]string, hcl.Diagnostics) {
	return nil, nil
}
