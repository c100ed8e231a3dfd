package runners

import "slices"

// OriginBuiltin is the origin of a credential that a built-in runner declares itself.
const OriginBuiltin = "builtin"

// Credential is one credential name a runner forwards, and where it was declared: OriginBuiltin, or the
// `runner` block that added it (its range as "file:line"). A name an override adds to a built-in is a widening
// of what a prompt-injected agent could exfiltrate, which is exactly what the policy review flags; so the
// origin travels with the name.
type Credential struct {
	Name   string
	Origin string
}

// Definition is a runner assembled from configuration: a custom runner declared by a `runner` block, or a
// built-in whose credentials or args a `runner` block overrides. It implements Runner, so the planner and the
// executor treat the effective runner of a node the same way whatever its source.
//
// Args are evaluated per node (the block's args expression sees the node's routed model), so a Definition is
// built per node: ContainerArgs returns those args and ignores its model argument. Without args, an override
// keeps the built-in's own args for the model, and a custom runner has none.
type Definition struct {
	name        string
	protocol    string
	credentials []string // as written in the block, or the base's when the block wrote none
	declared    bool     // the block wrote credentials
	origin      string
	args        []string
	hasArgs     bool
	base        Runner // the overridden built-in; nil for a custom runner
}

// Custom returns a custom runner: its name, its stdout vocabulary (one of Protocols, or "lemonade"; an unknown
// one meters cost-blind), the credential names it forwards, and its container args already evaluated for the
// node's model. Call DeclaredAt to record where the block is.
func Custom(name, protocol string, credentials, args []string) *Definition {
	return &Definition{
		name:        name,
		protocol:    protocol,
		credentials: slices.Clone(credentials),
		declared:    true,
		args:        slices.Clone(args),
		hasArgs:     true,
		origin:      `runner "` + name + `"`,
	}
}

// Override returns base with a `runner` block's credentials and args in place of its own; a nil slice means
// the block did not write that attribute and the built-in's stands. Name and protocol stay the built-in's.
func Override(base Runner, credentials, args []string) *Definition {
	d := &Definition{
		name:        base.Name(),
		protocol:    base.Protocol(),
		credentials: base.RequiredCredentials(),
		base:        base,
		origin:      `runner "` + base.Name() + `"`,
	}
	if credentials != nil {
		d.credentials, d.declared = slices.Clone(credentials), true
	}
	if args != nil {
		d.args, d.hasArgs = slices.Clone(args), true
	}
	return d
}

// DeclaredAt records where the runner block is ("file:line"); it becomes the origin of every credential the
// block declared that the built-in does not. It returns d.
func (d *Definition) DeclaredAt(origin string) *Definition {
	d.origin = origin
	return d
}

func (d *Definition) Name() string     { return d.name }
func (d *Definition) Protocol() string { return d.protocol }

// Base is the built-in this definition overrides, or nil for a custom runner.
func (d *Definition) Base() Runner { return d.base }

// RequiredCredentials are the names forwarded into the container, in declared order.
func (d *Definition) RequiredCredentials() []string { return slices.Clone(d.credentials) }

// Credentials are the forwarded names with their origins: OriginBuiltin for a name the overridden built-in
// declares itself, the block's origin for every other name.
func (d *Definition) Credentials() []Credential {
	var builtin []string
	if d.base != nil {
		builtin = d.base.RequiredCredentials()
	}
	out := make([]Credential, len(d.credentials))
	for i, name := range d.credentials {
		origin := d.origin
		if slices.Contains(builtin, name) {
			origin = OriginBuiltin
		}
		out[i] = Credential{Name: name, Origin: origin}
	}
	return out
}

// CredentialOrigins is Credentials' origins alone, parallel to RequiredCredentials.
func (d *Definition) CredentialOrigins() []string {
	creds := d.Credentials()
	out := make([]string, len(creds))
	for i, c := range creds {
		out[i] = c.Origin
	}
	return out
}

// Added lists the credential names the block adds to the overridden built-in's declaration (for a custom
// runner, all of them): the widening a policy review must see.
func (d *Definition) Added() []string {
	var out []string
	for _, c := range d.Credentials() {
		if c.Origin != OriginBuiltin {
			out = append(out, c.Name)
		}
	}
	return out
}

// ContainerArgs returns the block's args (already evaluated for the node's model), or the overridden
// built-in's args for model when the block wrote none.
func (d *Definition) ContainerArgs(model string) []string {
	if d.hasArgs || d.base == nil {
		return slices.Clone(d.args)
	}
	return d.base.ContainerArgs(model)
}

// NewMeter starts a meter for the definition's protocol; an unknown protocol yields a meter that counts lines
// and reports no figures, because an image whose vocabulary kewplan cannot read is cost-blind, not broken.
func (d *Definition) NewMeter(routedModel string) Meter {
	if m, ok := NewMeter(d.protocol, routedModel); ok {
		return m
	}
	return &blindMeter{tally{routed: routedModel}}
}

// CredentialOrigins reports where each of r's credentials comes from, parallel to r.RequiredCredentials():
// OriginBuiltin for a built-in, the block's origin for what a Definition adds.
func CredentialOrigins(r Runner) []string {
	if d, ok := r.(*Definition); ok {
		return d.CredentialOrigins()
	}
	creds := r.RequiredCredentials()
	out := make([]string, len(creds))
	for i := range out {
		out[i] = OriginBuiltin
	}
	return out
}
