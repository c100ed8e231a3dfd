package runners

import (
	"slices"
	"sort"
)

// builtin is a runner kewplan ships: fixed name, vocabulary, credential names and argv shape.
type builtin struct {
	name        string
	protocol    string
	credentials []string
	endpoints   []string
	args        func(model string) []string
}

func (r *builtin) Name() string     { return r.name }
func (r *builtin) Protocol() string { return r.protocol }

// RequiredCredentials returns a fresh copy, so that a caller cannot widen the built-in's declaration.
func (r *builtin) RequiredCredentials() []string { return slices.Clone(r.credentials) }

// Endpoints returns a fresh copy, for the same reason.
func (r *builtin) Endpoints() []string { return slices.Clone(r.endpoints) }

func (r *builtin) ContainerArgs(model string) []string { return r.args(model) }

func (r *builtin) NewMeter(routedModel string) Meter {
	m, _ := NewMeter(r.protocol, routedModel)
	return m
}

var builtins = map[string]*builtin{
	claudeCode.name: claudeCode,
	opencode.name:   opencode,
	pi.name:         pi,
	hermes.name:     hermes,
	lemonade.name:   lemonade,
}

// Builtin returns the built-in runner of that name: claude-code, opencode, pi, hermes, lemonade.
func Builtin(name string) (Runner, bool) {
	r, ok := builtins[name]
	if !ok {
		return nil, false
	}
	return r, true
}

// BuiltinNames lists the built-in runners, sorted.
func BuiltinNames() []string {
	names := make([]string, 0, len(builtins))
	for n := range builtins {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Protocols lists the stdout vocabularies a custom runner may declare. "lemonade" is not among them: it is
// pi's vocabulary with the cost forced to zero, a property of the built-in, not a wire format.
func Protocols() []string { return []string{"claude-code", "hermes", "opencode", "pi"} }

// NewMeter starts a meter for a vocabulary ("claude-code", "opencode", "pi", "hermes" or "lemonade"); false when
// the protocol is unknown. routedModel is reported, with ModelSource "routed", when the stream names no model.
func NewMeter(protocol, routedModel string) (Meter, bool) {
	switch protocol {
	case "claude-code":
		return newClaudeMeter(routedModel), true
	case "opencode":
		return newOpencodeMeter(routedModel), true
	case "pi":
		return newPiMeter(routedModel), true
	case "hermes":
		return newHermesMeter(routedModel), true
	case "lemonade":
		return newLemonadeMeter(routedModel), true
	}
	return nil, false
}
