package config

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

var variableSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "type"},
		{Name: "default"},
		{Name: "description"},
	},
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "validation"},
	},
}

var validationSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "condition"},
		{Name: "error_message"},
	},
}

func decodeVariableBlock(block *hcl.Block) (*Variable, hcl.Diagnostics) {
	name := block.Labels[0]
	var diags hcl.Diagnostics
	if !hclsyntax.ValidIdentifier(name) {
		diags = append(diags, errorDiag("Invalid variable name",
			fmt.Sprintf("The variable name %q is not a valid identifier. A variable name starts with a letter and holds letters, digits, underscores and dashes, so that it can be referred to as var.<name>.", name),
			block.LabelRanges[0]))
		return nil, diags
	}
	v := &Variable{Name: name, Type: cty.DynamicPseudoType, Default: cty.NilVal, DeclRange: block.DefRange}
	where := fmt.Sprintf("variable %q", name)
	content, d := bodyContent(block.Body, variableSchema, "a variable block")
	diags = append(diags, d...)

	if attr, ok := content.Attributes["description"]; ok {
		s, d := constString(attr, where)
		diags = append(diags, d...)
		v.Description = s
	}
	if attr, ok := content.Attributes["type"]; ok {
		ty, d := typeexpr.TypeConstraint(attr.Expr)
		if d.HasErrors() {
			diags = append(diags, errorDiag("Invalid type constraint",
				fmt.Sprintf("The type of %s is not a type constraint. Write a type such as string, number, bool, list(string), map(string), object({ name = string }) or any, without quotes.", where),
				attr.Expr.Range()))
		} else {
			v.Type = ty
		}
	}
	if attr, ok := content.Attributes["default"]; ok {
		val, d := constValue(attr, where)
		diags = append(diags, d...)
		if !d.HasErrors() {
			conv, err := convert.Convert(val, v.Type)
			if err != nil {
				diags = append(diags, errorDiag("Invalid default value for variable",
					fmt.Sprintf("The default of %s does not match its type %s: %s. Change the default or the type so that they agree.", where, typeexpr.TypeString(v.Type), convertErrorText(err)),
					attr.Expr.Range()))
			} else {
				v.Default = conv
			}
		}
	}
	for _, vb := range content.Blocks {
		vv, d := decodeValidationBlock(vb, where)
		diags = append(diags, d...)
		if vv != nil {
			v.Validations = append(v.Validations, vv)
		}
	}
	return v, diags
}

func decodeValidationBlock(block *hcl.Block, where string) (*VariableValidation, hcl.Diagnostics) {
	content, diags := bodyContent(block.Body, validationSchema, "a validation block")
	vv := &VariableValidation{DeclRange: block.DefRange}
	for _, name := range []string{"condition", "error_message"} {
		attr, ok := content.Attributes[name]
		if !ok {
			diags = append(diags, errorDiag("Missing required argument",
				fmt.Sprintf("A validation block of %s needs both condition (a bool expression over var.<name>) and error_message (the sentence shown when the condition is false); %s is missing.", where, name),
				block.DefRange))
			continue
		}
		if name == "condition" {
			vv.Condition = attr.Expr
		} else {
			vv.ErrorMessage = attr.Expr
		}
	}
	if vv.Condition == nil || vv.ErrorMessage == nil {
		return nil, diags
	}
	return vv, diags
}

func decodeLocalsBlock(block *hcl.Block) ([]*Local, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	if syn, ok := block.Body.(*hclsyntax.Body); ok {
		for _, b := range syn.Blocks {
			diags = append(diags, errorDiag("Unsupported block type",
				fmt.Sprintf("A locals block holds only name = value arguments, so a %q block is not expected here. Write it as an argument with an equals sign.", b.Type),
				b.TypeRange))
		}
		if len(syn.Blocks) > 0 {
			// JustAttributes would repeat the same complaint.
			syn = &hclsyntax.Body{Attributes: syn.Attributes, SrcRange: syn.SrcRange, EndRange: syn.EndRange}
			block = &hcl.Block{Type: block.Type, Body: syn, DefRange: block.DefRange, TypeRange: block.TypeRange}
		}
	}
	attrs, d := block.Body.JustAttributes()
	diags = append(diags, d...)
	locals := make([]*Local, 0, len(attrs))
	for name, attr := range attrs {
		if !hclsyntax.ValidIdentifier(name) {
			diags = append(diags, errorDiag("Invalid local value name",
				fmt.Sprintf("The local value name %q is not a valid identifier. Use letters, digits, underscores and dashes, starting with a letter.", name),
				attr.NameRange))
			continue
		}
		locals = append(locals, &Local{Name: name, Expr: attr.Expr, DeclRange: attr.Range})
	}
	return locals, diags
}

// convertErrorText words a go-cty conversion error for a diagnostic.
func convertErrorText(err error) string {
	if pe, ok := err.(cty.PathError); ok && len(pe.Path) > 0 {
		return fmt.Sprintf("at %s, %s", pathString(pe.Path), pe.Error())
	}
	return err.Error()
}

func pathString(p cty.Path) string {
	s := ""
	for _, step := range p {
		switch st := step.(type) {
		case cty.GetAttrStep:
			s += "." + st.Name
		case cty.IndexStep:
			if st.Key.Type() == cty.String {
				s += fmt.Sprintf("[%q]", st.Key.AsString())
			} else if st.Key.Type() == cty.Number {
				s += "[" + st.Key.AsBigFloat().Text('f', -1) + "]"
			}
		}
	}
	if s == "" {
		return "the top level"
	}
	if s[0] == '.' {
		s = s[1:]
	}
	return s
}
