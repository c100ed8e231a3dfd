package config

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/tryfunc"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"

	"github.com/kewplan/kewplan/internal/safefile"
)

// MaxFileBytes is the largest file file() and templatefile() read: prompts are text, and a bigger file is
// almost always a mistake (a build artefact, a data dump) that would bloat every plan.
const MaxFileBytes = 1 << 20

// stdlibFunctions are the go-cty functions available everywhere. There is deliberately no env(): credentials
// never pass through the configuration as values.
func stdlibFunctions() map[string]function.Function {
	return map[string]function.Function{
		// numeric
		"abs":      stdlib.AbsoluteFunc,
		"ceil":     stdlib.CeilFunc,
		"floor":    stdlib.FloorFunc,
		"log":      stdlib.LogFunc,
		"max":      stdlib.MaxFunc,
		"min":      stdlib.MinFunc,
		"parseint": stdlib.ParseIntFunc,
		"pow":      stdlib.PowFunc,
		"signum":   stdlib.SignumFunc,
		// string
		"chomp":       stdlib.ChompFunc,
		"endswith":    endsWithFunc,
		"format":      stdlib.FormatFunc,
		"formatlist":  stdlib.FormatListFunc,
		"indent":      stdlib.IndentFunc,
		"join":        stdlib.JoinFunc,
		"lower":       stdlib.LowerFunc,
		"regex":       stdlib.RegexFunc,
		"regexall":    stdlib.RegexAllFunc,
		"replace":     stdlib.ReplaceFunc,
		"split":       stdlib.SplitFunc,
		"startswith":  startsWithFunc,
		"strcontains": strContainsFunc,
		"strlen":      stdlib.StrlenFunc,
		"strrev":      stdlib.ReverseFunc,
		"substr":      stdlib.SubstrFunc,
		"title":       stdlib.TitleFunc,
		"trim":        stdlib.TrimFunc,
		"trimprefix":  stdlib.TrimPrefixFunc,
		"trimspace":   stdlib.TrimSpaceFunc,
		"trimsuffix":  stdlib.TrimSuffixFunc,
		"upper":       stdlib.UpperFunc,
		// collection
		"chunklist":       stdlib.ChunklistFunc,
		"coalesce":        stdlib.CoalesceFunc,
		"coalescelist":    stdlib.CoalesceListFunc,
		"compact":         stdlib.CompactFunc,
		"concat":          stdlib.ConcatFunc,
		"contains":        stdlib.ContainsFunc,
		"distinct":        stdlib.DistinctFunc,
		"element":         stdlib.ElementFunc,
		"flatten":         stdlib.FlattenFunc,
		"keys":            stdlib.KeysFunc,
		"length":          lengthFunc,
		"lookup":          stdlib.LookupFunc,
		"merge":           stdlib.MergeFunc,
		"range":           stdlib.RangeFunc,
		"reverse":         stdlib.ReverseListFunc,
		"setintersection": stdlib.SetIntersectionFunc,
		"setproduct":      stdlib.SetProductFunc,
		"setsubtract":     stdlib.SetSubtractFunc,
		"setunion":        stdlib.SetUnionFunc,
		"slice":           stdlib.SliceFunc,
		"sort":            stdlib.SortFunc,
		"values":          stdlib.ValuesFunc,
		"zipmap":          stdlib.ZipmapFunc,
		// encoding
		"base64decode": base64DecodeFunc,
		"base64encode": base64EncodeFunc,
		"csvdecode":    stdlib.CSVDecodeFunc,
		"jsondecode":   stdlib.JSONDecodeFunc,
		"jsonencode":   stdlib.JSONEncodeFunc,
		"sha256":       sha256Func,
		// time
		"formatdate": stdlib.FormatDateFunc,
		"timeadd":    stdlib.TimeAddFunc,
		// type conversion and error handling
		"tobool":   stdlib.MakeToFunc(cty.Bool),
		"tolist":   stdlib.MakeToFunc(cty.List(cty.DynamicPseudoType)),
		"tomap":    stdlib.MakeToFunc(cty.Map(cty.DynamicPseudoType)),
		"tonumber": stdlib.MakeToFunc(cty.Number),
		"toset":    stdlib.MakeToFunc(cty.Set(cty.DynamicPseudoType)),
		"tostring": stdlib.MakeToFunc(cty.String),
		"can":      tryfunc.CanFunc,
		"try":      tryfunc.TryFunc,
	}
}

// functionNames is every function name a configuration may call, for static checks and suggestions.
var functionNames = func() map[string]struct{} {
	m := map[string]struct{}{"file": {}, "templatefile": {}}
	for k := range stdlibFunctions() {
		m[k] = struct{}{}
	}
	return m
}()

// FunctionNames lists the functions a configuration may call, sorted.
func FunctionNames() []string { return slices.Sorted(maps.Keys(functionNames)) }

func stringFunc(params []function.Parameter, impl func(args []cty.Value) (cty.Value, error)) function.Function {
	return function.New(&function.Spec{
		Params: params,
		Type:   function.StaticReturnType(cty.String),
		Impl:   func(args []cty.Value, _ cty.Type) (cty.Value, error) { return impl(args) },
	})
}

var base64EncodeFunc = stringFunc([]function.Parameter{{Name: "str", Type: cty.String}}, func(args []cty.Value) (cty.Value, error) {
	return cty.StringVal(base64.StdEncoding.EncodeToString([]byte(args[0].AsString()))), nil
})

var base64DecodeFunc = stringFunc([]function.Parameter{{Name: "str", Type: cty.String}}, func(args []cty.Value) (cty.Value, error) {
	b, err := base64.StdEncoding.DecodeString(args[0].AsString())
	if err != nil {
		return cty.UnknownVal(cty.String), function.NewArgErrorf(0, "the string is not valid base64")
	}
	if !utf8.Valid(b) {
		return cty.UnknownVal(cty.String), function.NewArgErrorf(0, "the decoded bytes are not UTF-8 text")
	}
	return cty.StringVal(string(b)), nil
})

var sha256Func = stringFunc([]function.Parameter{{Name: "str", Type: cty.String}}, func(args []cty.Value) (cty.Value, error) {
	sum := sha256.Sum256([]byte(args[0].AsString()))
	return cty.StringVal(hex.EncodeToString(sum[:])), nil
})

func boolStringFunc(test func(s, sub string) bool, second string) function.Function {
	return function.New(&function.Spec{
		Params: []function.Parameter{{Name: "str", Type: cty.String}, {Name: second, Type: cty.String}},
		Type:   function.StaticReturnType(cty.Bool),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			return cty.BoolVal(test(args[0].AsString(), args[1].AsString())), nil
		},
	})
}

var (
	startsWithFunc  = boolStringFunc(strings.HasPrefix, "prefix")
	endsWithFunc    = boolStringFunc(strings.HasSuffix, "suffix")
	strContainsFunc = boolStringFunc(strings.Contains, "substr")
)

// lengthFunc is Terraform's length(): the number of elements of a collection, or of characters of a string.
var lengthFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "value", Type: cty.DynamicPseudoType, AllowDynamicType: true, AllowUnknown: true, AllowMarked: true}},
	Type:   function.StaticReturnType(cty.Number),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		v := args[0]
		if v.Type() == cty.String {
			if !v.IsKnown() {
				return cty.UnknownVal(cty.Number), nil
			}
			if v.IsNull() {
				return cty.UnknownVal(cty.Number), function.NewArgErrorf(0, "argument must not be null")
			}
			return stdlib.Strlen(v)
		}
		if v.Type().IsObjectType() && v.IsKnown() && !v.IsNull() {
			return cty.NumberIntVal(int64(len(v.Type().AttributeTypes()))), nil
		}
		return stdlib.Length(v)
	},
})

// fileReader serves file() and templatefile() from a file system rooted at the configuration's directory.
type fileReader struct {
	fsys  fs.FS
	reads *ReadLog
	// resolved names the directory in errors when the configuration was reached through a symbolic link: the
	// reader then looks beside the file the link leads to, which the user may not expect.
	resolved string
}

// read returns the text of the file at p, relative to the configuration's directory, refusing anything that
// is not a small UTF-8 text file inside that directory.
func (r *fileReader) read(p string) (string, error) {
	if p == "" {
		return "", errors.New("the path is empty; give a path relative to the configuration's directory")
	}
	if filepath.IsAbs(p) || strings.HasPrefix(p, "/") || strings.HasPrefix(p, `\`) {
		return "", fmt.Errorf("%s is an absolute path; give a path relative to the configuration's directory, so the configuration means the same on every machine", p)
	}
	clean := path.Clean(filepath.ToSlash(p))
	if clean == ".." || strings.HasPrefix(clean, "../") || !fs.ValidPath(clean) {
		return "", fmt.Errorf("%s leaves the configuration's directory; keep the files a configuration reads inside its directory", p)
	}
	if r.fsys == nil {
		return "", errors.New("no files are available here")
	}
	f, err := r.fsys.Open(clean)
	if err != nil {
		var refused *safefile.Error
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if r.resolved != "" {
				return "", fmt.Errorf("no file %s exists in the configuration's directory %s (the configuration file is a link to %s, and paths are relative to the file it leads to); check the path", p, filepath.Dir(r.resolved), r.resolved)
			}
			return "", fmt.Errorf("no file %s exists in the configuration's directory; check the path, which is relative to that directory", p)
		case strings.Contains(err.Error(), "escapes"):
			return "", fmt.Errorf("%s is a link that leads outside the configuration's directory; keep the files a configuration reads inside its directory", p)
		case errors.As(err, &refused):
			return "", fmt.Errorf("%s %s; file() and templatefile() read regular text files only", p, refused.Reason)
		}
		return "", fmt.Errorf("cannot open %s: %s", p, describeFSError(err))
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("cannot read %s: %s", p, describeFSError(err))
	}
	switch {
	case info.IsDir():
		return "", fmt.Errorf("%s is a directory; give the path of a file", p)
	case !info.Mode().IsRegular():
		return "", fmt.Errorf("%s is not a regular file", p)
	case info.Size() > MaxFileBytes:
		return "", fmt.Errorf("%s is %d bytes, over the 1 MiB limit for a file read by the configuration", p, info.Size())
	}
	src, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return "", fmt.Errorf("cannot read %s: %s", p, describeFSError(err))
	}
	if len(src) > MaxFileBytes {
		return "", fmt.Errorf("%s is over the 1 MiB limit for a file read by the configuration", p)
	}
	if bytes.IndexByte(src, 0) >= 0 || !utf8.Valid(src) {
		return "", fmt.Errorf("%s is a binary file (it holds NUL bytes or is not UTF-8 text); file() and templatefile() read text", p)
	}
	if r.reads != nil {
		sum := sha256.Sum256(src)
		r.reads.record(clean, hex.EncodeToString(sum[:]))
	}
	return string(src), nil
}

func (r *fileReader) fileFunc() function.Function {
	return function.New(&function.Spec{
		Params: []function.Parameter{{Name: "path", Type: cty.String}},
		Type:   function.StaticReturnType(cty.String),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			s, err := r.read(args[0].AsString())
			if err != nil {
				return cty.UnknownVal(cty.String), function.NewArgError(0, err)
			}
			return cty.StringVal(s), nil
		},
	})
}

// templateFileFunc renders a template file with the given variables, Terraform's templatefile(). funcs is the
// function table available inside the template (without templatefile itself, so templates cannot recurse).
func (r *fileReader) templateFileFunc(funcs map[string]function.Function) function.Function {
	return function.New(&function.Spec{
		Params: []function.Parameter{
			{Name: "path", Type: cty.String},
			// Unknown values are allowed in so that the file is still read and checked; an unknown variable
			// makes the rendered result unknown, not an error.
			{Name: "vars", Type: cty.DynamicPseudoType, AllowUnknown: true, AllowDynamicType: true},
		},
		Type: function.StaticReturnType(cty.DynamicPseudoType),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			p := args[0].AsString()
			src, err := r.read(p)
			if err != nil {
				return cty.DynamicVal, function.NewArgError(0, err)
			}
			vars := args[1]
			if !vars.IsKnown() {
				return cty.DynamicVal, nil
			}
			if vars.IsNull() || !(vars.Type().IsObjectType() || vars.Type().IsMapType()) {
				return cty.DynamicVal, function.NewArgErrorf(1, "the template variables must be an object, such as { commit = node.fix.commit }")
			}
			ctx := &hcl.EvalContext{Variables: map[string]cty.Value{}, Functions: funcs}
			for it := vars.ElementIterator(); it.Next(); {
				k, v := it.Element()
				name := k.AsString()
				if !hclsyntax.ValidIdentifier(name) {
					return cty.DynamicVal, function.NewArgErrorf(1, "the template variable name %q is not a valid identifier", name)
				}
				ctx.Variables[name] = v
			}
			if d := CheckTemplateNesting(p, []byte(src)); d != nil {
				return cty.DynamicVal, function.NewArgErrorf(0, "%s is not a valid template: line %d: %s (over %d levels)", p, d.Subject.Start.Line, d.Summary, MaxNesting)
			}
			expr, diags := hclsyntax.ParseTemplate([]byte(src), p, hcl.InitialPos)
			if diags.HasErrors() {
				return cty.DynamicVal, function.NewArgErrorf(0, "%s is not a valid template: %s", p, DiagnosticsText(diags))
			}
			for _, t := range expr.Variables() {
				if _, ok := ctx.Variables[t.RootName()]; !ok {
					rng := t.SourceRange()
					return cty.DynamicVal, function.NewArgErrorf(1, "the template %s refers to %q at line %d, which the variables object does not set; add %s = ... to it", p, t.RootName(), rng.Start.Line, t.RootName())
				}
			}
			val, diags := expr.Value(ctx)
			if diags.HasErrors() {
				return cty.DynamicVal, function.NewArgErrorf(0, "rendering %s failed: %s", p, DiagnosticsText(diags))
			}
			return val, nil
		},
	})
}

// DirFS serves file() and templatefile() from dir, refusing symbolic links that lead outside it, so that a
// configuration under review cannot read the reviewer's files through a link.
func DirFS(dir string) fs.FS { return rootFS{dir: dir} }

type rootFS struct{ dir string }

func (r rootFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	root, err := os.OpenRoot(r.dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	// Opened without blocking and refused unless regular: file("pipe.md") on a FIFO must not wait for a writer.
	return safefile.OpenIn(root, filepath.FromSlash(name), 0)
}
