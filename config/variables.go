package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/kewplan/kewplan/internal/safefile"
)

// EnvVarPrefix prefixes the environment variables that set configuration variables: KEWPLAN_VAR_<name>.
const EnvVarPrefix = "KEWPLAN_VAR_"

// rawValue is one variable value from outside the configuration, before conversion.
type rawValue struct {
	// expr is set for a value from a variable file (an HCL expression); raw for --var and the environment.
	expr   hcl.Expression
	raw    string
	origin string // "--var", "the environment variable KEWPLAN_VAR_x", "FILE"
	rng    hcl.Range
	failed bool // the value was already reported as invalid
}

// ResolveVariables decides every variable's value (inputs, else default), converts it to the declared type,
// runs validation blocks, and reports a required variable with no value by name.
//
// Precedence follows Terraform: the environment (KEWPLAN_VAR_<name>) is lowest, then --var-file files in the
// order given, then --var flags in the order given. An undeclared --var is an error, an undeclared name in a
// variable file is a warning, and an undeclared KEWPLAN_VAR_ is ignored (the environment is shared with other
// configurations). A variable whose value fails is returned unknown, so that later checks can go on.
func (c *Config) ResolveVariables(in VariableInputs) (map[string]cty.Value, hcl.Diagnostics) {
	raws := map[string]rawValue{}
	var diags hcl.Diagnostics
	// A variable file that does not parse may have set any variable: then "no value" would be a guess.
	unparsedFile := false

	for _, kv := range in.Env {
		if !strings.HasPrefix(kv, EnvVarPrefix) {
			continue
		}
		name, value, ok := strings.Cut(strings.TrimPrefix(kv, EnvVarPrefix), "=")
		if !ok || c.Variables[name] == nil {
			continue
		}
		raws[name] = rawValue{raw: value, origin: "the environment variable " + EnvVarPrefix + name}
	}
	for _, file := range in.VarFiles {
		d, parsed := c.readVarFile(file, raws)
		diags = append(diags, d...)
		unparsedFile = unparsedFile || !parsed
	}
	for _, flag := range in.Vars {
		name, value, ok := strings.Cut(flag, "=")
		if !ok || name == "" {
			diags = append(diags, errorDiag("Invalid --var option",
				fmt.Sprintf("The option --var %q is not of the form name=value. Write it as --var name=value, for example --var model=claude-sonnet-4-5.", redactFlag(flag)),
				hcl.Range{}))
			continue
		}
		if c.Variables[name] == nil {
			diags = append(diags, errorDiag("Value for undeclared variable",
				fmt.Sprintf("--var sets %q, but the configuration declares no such variable.%s Declare it with a variable %q { } block, or remove the option.", name, didYouMean(name, slices.Sorted(maps.Keys(c.Variables))), name),
				hcl.Range{}))
			continue
		}
		raws[name] = rawValue{raw: value, origin: "--var"}
	}

	vals := make(map[string]cty.Value, len(c.Variables))
	valueRanges := map[string]hcl.Range{}
	for _, name := range slices.Sorted(maps.Keys(c.Variables)) {
		v := c.Variables[name]
		raw, ok := raws[name]
		switch {
		case ok && raw.failed:
			vals[name] = cty.UnknownVal(v.Type)
		case ok:
			val, d := convertRaw(v, raw)
			diags = append(diags, d...)
			if d.HasErrors() {
				val = cty.UnknownVal(v.Type)
			}
			vals[name] = val
			valueRanges[name] = raw.rng
		case v.Default != cty.NilVal:
			vals[name] = v.Default
		case unparsedFile:
			vals[name] = cty.UnknownVal(v.Type)
		default:
			diags = append(diags, errorDiag("No value for required variable",
				fmt.Sprintf("The variable %q has no default, so it needs a value. Set it with --var %s=VALUE, in a --var-file, or with the environment variable %s%s.", name, name, EnvVarPrefix, name),
				v.DeclRange))
			vals[name] = cty.UnknownVal(v.Type)
		}
	}
	diags = append(diags, c.validateVariables(vals, valueRanges)...)
	return vals, diags
}

// redactFlag keeps a malformed --var short in messages.
func redactFlag(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// readVarFile reads one --var-file into raws; parsed is false when the file could not be read as a whole.
func (c *Config) readVarFile(file string, raws map[string]rawValue) (diags hcl.Diagnostics, parsed bool) {
	src, err := safefile.Read(file, maxConfigFileBytes)
	if err != nil {
		return hcl.Diagnostics{errorDiag("Cannot read variable file",
			fmt.Sprintf("Reading the --var-file %s failed: %s. Check the path, which is relative to the working directory.", file, describeFSError(err)),
			hcl.Range{})}, false
	}
	if c.VarFiles == nil {
		c.VarFiles = map[string][]byte{}
	}
	c.VarFiles[file] = src
	body, diags := parseConfigSource(file, src)
	if diags.HasErrors() || body == nil {
		return diags, false
	}
	for _, b := range body.Blocks {
		diags = append(diags, errorDiag("Unexpected block in variable file",
			fmt.Sprintf("A variable file holds only name = value lines, so a %q block is not expected here. Keep blocks in the configuration.", b.Type),
			b.TypeRange))
	}
	for _, name := range slices.Sorted(maps.Keys(body.Attributes)) {
		attr := body.Attributes[name]
		if c.Variables[name] == nil {
			diags = append(diags, warningDiag("Value for undeclared variable",
				fmt.Sprintf("The variable file sets %q, but the configuration declares no such variable, so the value is ignored.%s Remove the line, or declare the variable.", name, didYouMean(name, slices.Sorted(maps.Keys(c.Variables)))),
				attr.NameRange))
			continue
		}
		if len(attr.Expr.Variables()) > 0 || hasFunctionCall(attr.Expr) {
			diags = append(diags, errorDiag("Variable value must be constant",
				fmt.Sprintf("The value of %q in a variable file must be a literal value: references and function calls are not evaluated there.", name),
				attr.Expr.Range()))
			raws[name] = rawValue{failed: true}
			continue
		}
		raws[name] = rawValue{expr: attr.Expr, origin: file, rng: attr.Expr.Range()}
	}
	return diags, true
}

// convertRaw turns a raw value into the variable's type. Like Terraform, a value from the command line or the
// environment is taken as a literal string for a string (or untyped) variable, and parsed as an HCL expression
// for any other type, so that --var 'tags=["a","b"]' gives a list.
func convertRaw(v *Variable, raw rawValue) (cty.Value, hcl.Diagnostics) {
	var val cty.Value
	if raw.expr != nil {
		var diags hcl.Diagnostics
		val, diags = raw.expr.Value(nil)
		if diags.HasErrors() {
			return cty.NilVal, diags
		}
	} else if v.Type == cty.String || v.Type == cty.DynamicPseudoType {
		val = cty.StringVal(raw.raw)
	} else {
		filename := fmt.Sprintf("<value for var.%s>", v.Name)
		var expr hclsyntax.Expression
		var diags hcl.Diagnostics
		if d := CheckNesting(filename, []byte(raw.raw)); d != nil {
			diags = hcl.Diagnostics{d}
		} else {
			expr, diags = hclsyntax.ParseExpression([]byte(raw.raw), filename, hcl.InitialPos)
		}
		if diags.HasErrors() || len(expr.Variables()) > 0 || hasFunctionCall(expr) {
			return cty.NilVal, hcl.Diagnostics{errorDiag("Invalid value for variable",
				fmt.Sprintf("The value given by %s for the variable %q is not a valid %s value. Write it in HCL syntax, for example %s.", raw.origin, v.Name, typeexpr.TypeString(v.Type), typeExample(v.Type)),
				hcl.Range{})}
		}
		val, diags = expr.Value(nil)
		if diags.HasErrors() {
			return cty.NilVal, hcl.Diagnostics{errorDiag("Invalid value for variable",
				fmt.Sprintf("The value given by %s for the variable %q cannot be evaluated. Write it in HCL syntax, for example %s.", raw.origin, v.Name, typeExample(v.Type)),
				hcl.Range{})}
		}
	}
	conv, err := convert.Convert(val, v.Type)
	if err != nil {
		return cty.NilVal, hcl.Diagnostics{errorDiag("Invalid value for variable",
			fmt.Sprintf("The value given by %s for the variable %q does not match its type %s: %s. Give a value of that type, for example %s.", raw.origin, v.Name, typeexpr.TypeString(v.Type), convertErrorText(err), typeExample(v.Type)),
			raw.rng)}
	}
	if conv.IsNull() {
		return cty.NilVal, hcl.Diagnostics{errorDiag("Invalid value for variable",
			fmt.Sprintf("The value given by %s for the variable %q is null. Give a value, or stop setting it to use the default.", raw.origin, v.Name),
			raw.rng)}
	}
	return conv, nil
}

func typeExample(ty cty.Type) string {
	switch {
	case ty == cty.Number:
		return "42"
	case ty == cty.Bool:
		return "true"
	case ty.IsListType() || ty.IsSetType() || ty.IsTupleType():
		return `["a", "b"]`
	case ty.IsMapType() || ty.IsObjectType():
		return `{ key = "value" }`
	}
	return `"text"`
}

// validateVariables runs every validation block against the resolved values.
func (c *Config) validateVariables(vals map[string]cty.Value, valueRanges map[string]hcl.Range) hcl.Diagnostics {
	ctx := &hcl.EvalContext{
		Variables: map[string]cty.Value{"var": cty.ObjectVal(vals)},
		Functions: stdlibFunctions(),
	}
	var diags hcl.Diagnostics
	for _, name := range slices.Sorted(maps.Keys(c.Variables)) {
		v := c.Variables[name]
		if !vals[name].IsWhollyKnown() {
			continue
		}
		for _, vv := range v.Validations {
			cond, d := vv.Condition.Value(ctx)
			if d.HasErrors() {
				diags = append(diags, d...)
				continue
			}
			if !cond.IsWhollyKnown() {
				continue
			}
			cb, err := convert.Convert(cond, cty.Bool)
			if err != nil || cb.IsNull() {
				diags = append(diags, errorDiag("Invalid validation condition",
					fmt.Sprintf("The condition of a validation of variable %q must be true or false, but it is %s. Write an expression that is true for a valid value, such as a comparison with var.%s.", name, typeName(cond.Type()), name),
					vv.Condition.Range()))
				continue
			}
			if cb.True() {
				continue
			}
			msg := "The value is not valid."
			if mv, d := vv.ErrorMessage.Value(ctx); !d.HasErrors() {
				if ms, err := convert.Convert(mv, cty.String); err == nil && ms.IsKnown() && !ms.IsNull() {
					msg = ms.AsString()
				}
			}
			subject := valueRanges[name]
			if subject.Filename == "" {
				subject = vv.Condition.Range()
			}
			diags = append(diags, errorDiag("Invalid value for variable",
				fmt.Sprintf("%s\n\nThis was checked by the validation rule at %s.", msg, rangeString(vv.DeclRange)),
				subject))
		}
	}
	return diags
}
