package policyrules

import (
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2/ext/tryfunc"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
)

// functions are what a condition may call: pure functions of their arguments, each linear (or close) in its
// input, so that a rule over a plan from a pull request cannot read a file, the environment or the clock, and
// its cost is the cost of the expression. There is no file(), templatefile(), env(), timestamp() or range().
var functions = map[string]function.Function{
	"abs":             stdlib.AbsoluteFunc,
	"alltrue":         allTrueFunc,
	"anytrue":         anyTrueFunc,
	"can":             tryfunc.CanFunc,
	"coalesce":        stdlib.CoalesceFunc,
	"concat":          stdlib.ConcatFunc,
	"contains":        stdlib.ContainsFunc,
	"distinct":        stdlib.DistinctFunc,
	"endswith":        stringPredicate(strings.HasSuffix),
	"flatten":         stdlib.FlattenFunc,
	"format":          stdlib.FormatFunc,
	"join":            stdlib.JoinFunc,
	"keys":            stdlib.KeysFunc,
	"length":          lengthFunc,
	"lookup":          stdlib.LookupFunc,
	"lower":           stdlib.LowerFunc,
	"max":             stdlib.MaxFunc,
	"min":             stdlib.MinFunc,
	"one":             oneFunc,
	"regex":           stdlib.RegexFunc,
	"regexall":        stdlib.RegexAllFunc,
	"replace":         stdlib.ReplaceFunc,
	"setintersection": stdlib.SetIntersectionFunc,
	"setsubtract":     stdlib.SetSubtractFunc,
	"split":           stdlib.SplitFunc,
	"startswith":      stringPredicate(strings.HasPrefix),
	"strcontains":     stringPredicate(strings.Contains),
	"sum":             sumFunc,
	"tobool":          stdlib.MakeToFunc(cty.Bool),
	"tolist":          stdlib.MakeToFunc(cty.List(cty.DynamicPseudoType)),
	"tonumber":        stdlib.MakeToFunc(cty.Number),
	"toset":           stdlib.MakeToFunc(cty.Set(cty.DynamicPseudoType)),
	"tostring":        stdlib.MakeToFunc(cty.String),
	"trimprefix":      stdlib.TrimPrefixFunc,
	"trimsuffix":      stdlib.TrimSuffixFunc,
	"try":             tryfunc.TryFunc,
	"upper":           stdlib.UpperFunc,
	"values":          stdlib.ValuesFunc,
}

// FunctionNames are the functions a condition may call, sorted (for the documentation and error messages).
func FunctionNames() []string {
	out := make([]string, 0, len(functions))
	for k := range functions {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func stringPredicate(f func(s, affix string) bool) function.Function {
	return function.New(&function.Spec{
		Params: []function.Parameter{{Name: "str", Type: cty.String}, {Name: "substr", Type: cty.String}},
		Type:   function.StaticReturnType(cty.Bool),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			return cty.BoolVal(f(args[0].AsString(), args[1].AsString())), nil
		},
	})
}

// boolFold is anytrue or alltrue: a collection of bools (a for expression's tuple) folded with or / and.
func boolFold(any bool) function.Function {
	return function.New(&function.Spec{
		Params: []function.Parameter{{Name: "list", Type: cty.DynamicPseudoType}},
		Type:   function.StaticReturnType(cty.Bool),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			l := args[0]
			if !l.Type().IsListType() && !l.Type().IsTupleType() && !l.Type().IsSetType() {
				return cty.NilVal, function.NewArgErrorf(0, "%s needs a list of bools, such as [for n in plan.nodes : n.network == \"open\"], not %s", foldName(any), l.Type().FriendlyName())
			}
			for it := l.ElementIterator(); it.Next(); {
				_, v := it.Element()
				if v.IsNull() || !v.Type().Equals(cty.Bool) {
					return cty.NilVal, function.NewArgErrorf(0, "%s needs a list of bools; an element is %s", foldName(any), friendly(v))
				}
				if v.True() == any {
					return cty.BoolVal(any), nil
				}
			}
			return cty.BoolVal(!any), nil
		},
	})
}

func foldName(any bool) string {
	if any {
		return "anytrue"
	}
	return "alltrue"
}

func friendly(v cty.Value) string {
	if v.IsNull() {
		return "null"
	}
	return v.Type().FriendlyName()
}

var (
	anyTrueFunc = boolFold(true)
	allTrueFunc = boolFold(false)
)

var lengthFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "value", Type: cty.DynamicPseudoType}},
	Type:   function.StaticReturnType(cty.Number),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		v := args[0]
		switch t := v.Type(); {
		case v.IsNull():
			return cty.NilVal, function.NewArgErrorf(0, "length of null: check for null first (x != null && length(x) > 0)")
		case t == cty.String:
			return stdlib.Strlen(v)
		case t.IsListType(), t.IsSetType(), t.IsMapType(), t.IsTupleType():
			return cty.NumberIntVal(int64(v.LengthInt())), nil
		case t.IsObjectType():
			return cty.NumberIntVal(int64(len(t.AttributeTypes()))), nil
		}
		return cty.NilVal, function.NewArgErrorf(0, "length needs a string, list, map or object, not %s", v.Type().FriendlyName())
	},
})

var sumFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "list", Type: cty.DynamicPseudoType}},
	Type:   function.StaticReturnType(cty.Number),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		l := args[0]
		if !l.Type().IsListType() && !l.Type().IsTupleType() && !l.Type().IsSetType() {
			return cty.NilVal, function.NewArgErrorf(0, "sum needs a list of numbers, not %s", l.Type().FriendlyName())
		}
		total := cty.Zero
		for it := l.ElementIterator(); it.Next(); {
			_, v := it.Element()
			if v.IsNull() || !v.Type().Equals(cty.Number) {
				return cty.NilVal, function.NewArgErrorf(0, "sum needs a list of numbers; an element is %s (a node without max_usd has a null worst_case_usd: filter it out with if x != null)", friendly(v))
			}
			total = total.Add(v)
		}
		return total, nil
	},
})

var oneFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "list", Type: cty.DynamicPseudoType}},
	Type:   function.StaticReturnType(cty.DynamicPseudoType),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		l := args[0]
		if !l.Type().IsListType() && !l.Type().IsTupleType() && !l.Type().IsSetType() {
			return cty.NilVal, function.NewArgErrorf(0, "one needs a list, not %s", l.Type().FriendlyName())
		}
		switch l.LengthInt() {
		case 0:
			return cty.NullVal(cty.DynamicPseudoType), nil
		case 1:
			it := l.ElementIterator()
			it.Next()
			_, v := it.Element()
			return v, nil
		}
		return cty.NilVal, function.NewArgErrorf(0, "one needs a list of at most one element; this has %d", l.LengthInt())
	},
})
