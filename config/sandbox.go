package config

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// Sandbox defaults.
// Credential modes (sandbox and node `credentials`).
const (
	// CredentialsBrokered: the container holds a placeholder minted per node and run; kewplan's egress proxy
	// swaps it for the real value, only on requests to the node's runner endpoints, only while the node runs.
	CredentialsBrokered = "brokered"
	// CredentialsForward: the container holds the credential's value, as the container entrypoint contract
	// describes; whatever the agent can read, it can send.
	CredentialsForward = "forward"
)

// checkCredentialMode returns the rest of a diagnostic's detail when s is not a credential mode, else "".
func checkCredentialMode(s string) string {
	if s == CredentialsBrokered || s == CredentialsForward {
		return ""
	}
	return fmt.Sprintf("%q, which is not a credentials mode.%s Use %q (the container holds a placeholder and kewplan's egress proxy adds the real credential for the runner's endpoint only; the default) or %q (the container holds the credential's value).",
		s, didYouMean(s, []string{CredentialsBrokered, CredentialsForward}), CredentialsBrokered, CredentialsForward)
}

const (
	DefaultAllowlistNetwork = "kew-allowlist"
	DefaultPidsLimit        = 512
	// DefaultTmpfsSize bounds /tmp and /home/agent each: room for a tool cache, not for a host's memory.
	DefaultTmpfsSize = "512m"
)

var sandboxSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "network"},
		{Name: "allowlist_network"},
		{Name: "pids_limit"},
		{Name: "memory"},
		{Name: "cpus"},
		{Name: "image"},
		{Name: "images"},
		{Name: "runtime"},
		{Name: "tmpfs_size"},
		{Name: "credentials"},
		{Name: "protected_branches"},
		{Name: "resume_from_salvage"},
	},
	Blocks: []hcl.BlockHeaderSchema{{Type: "egress"}, {Type: "retry"}, {Type: "budget"}},
}

// tmpfsSizePattern is what kewplan accepts for a tmpfs size= option: a whole number with a k, m or g unit.
var tmpfsSizePattern = regexp.MustCompile(`^([1-9][0-9]{0,9})([kKmMgG])$`)

// networkNamePattern is Docker's rule for network names.
var networkNamePattern = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`)

// memoryPattern is what `docker run --memory` accepts (go-units RAMInBytes).
var memoryPattern = regexp.MustCompile(`^(\d+(?:\.\d+)?) ?([kKmMgGtTpP])?[iI]?[bB]?$`)

// minMemoryBytes is the engine's minimum memory limit; below it `docker run` fails at apply, so refuse at plan.
const minMemoryBytes = 6 << 20

func defaultSandbox() *Sandbox {
	return &Sandbox{
		Network:          NetworkAllowlist,
		AllowlistNetwork: DefaultAllowlistNetwork,
		PidsLimit:        DefaultPidsLimit,
		TmpfsSize:        DefaultTmpfsSize,
		Credentials:      CredentialsBrokered,
		Egress:           SandboxEgress{ProxyNetwork: DefaultProxyNetwork},
		Images:           map[string]string{},
		ImageRanges:      map[string]hcl.Range{},
	}
}

func decodeSandboxBlock(block *hcl.Block) (*Sandbox, hcl.Diagnostics) {
	sb := defaultSandbox()
	sb.DeclRange = block.DefRange
	const where = "the sandbox block"
	content, diags := bodyContent(block.Body, sandboxSchema, where)

	if attr, ok := content.Attributes["network"]; ok {
		s, d := constString(attr, where)
		diags = append(diags, d...)
		if !d.HasErrors() {
			if s != NetworkAllowlist && s != NetworkOpen {
				diags = append(diags, errorDiag("Invalid network mode",
					fmt.Sprintf("The sandbox network is %q, which is not a network mode.%s Use %q (containers reach only the hosts of the allowlist network; the default) or %q (containers reach any host).", s, didYouMean(s, []string{NetworkAllowlist, NetworkOpen}), NetworkAllowlist, NetworkOpen),
					attr.Expr.Range()))
			} else {
				sb.Network = s
			}
			sb.NetworkRange = attr.Expr.Range()
		}
	}
	if attr, ok := content.Attributes["credentials"]; ok {
		s, d := constString(attr, where)
		diags = append(diags, d...)
		if !d.HasErrors() {
			if msg := checkCredentialMode(s); msg != "" {
				diags = append(diags, errorDiag("Invalid credentials mode", fmt.Sprintf("The credentials of %s are %s", where, msg), attr.Expr.Range()))
			} else {
				sb.Credentials, sb.CredentialsExplicit = s, true
			}
			sb.CredentialsRange = attr.Expr.Range()
		}
	}
	if attr, ok := content.Attributes["protected_branches"]; ok {
		list, ranges, d := constStringList(attr, where)
		diags = append(diags, d...)
		for i, pat := range list {
			if msg := CheckBranchPattern(pat); msg != "" {
				diags = append(diags, errorDiag("Invalid protected branch pattern",
					fmt.Sprintf("The entry %q of protected_branches cannot be used: %s", printable(pat), msg), ranges[i]))
				continue
			}
			sb.ProtectedBranches = append(sb.ProtectedBranches, strings.TrimPrefix(pat, "refs/heads/"))
		}
		sb.ProtectedBranchesRange = attr.Range
	}
	if attr, ok := content.Attributes["resume_from_salvage"]; ok {
		b, d := constBool(attr, where)
		diags = append(diags, d...)
		sb.ResumeFromSalvage = b
	}
	if attr, ok := content.Attributes["allowlist_network"]; ok {
		s, d := constString(attr, where)
		diags = append(diags, d...)
		if !d.HasErrors() {
			if !networkNamePattern.MatchString(s) {
				diags = append(diags, errorDiag("Invalid network name",
					fmt.Sprintf("The allowlist_network %q is not a Docker network name. A network name starts with a letter or digit and holds letters, digits, '_', '.' and '-'; the default is %q.", s, DefaultAllowlistNetwork),
					attr.Expr.Range()))
			} else {
				sb.AllowlistNetwork = s
			}
		}
	}
	if attr, ok := content.Attributes["pids_limit"]; ok {
		n, d := constWholeNumber(attr, where)
		diags = append(diags, d...)
		if !d.HasErrors() {
			if n < 1 {
				diags = append(diags, errorDiag("Invalid pids_limit",
					fmt.Sprintf("The pids_limit is %d, which would leave the container without a process limit. Set a positive number of processes; the default is %d.", n, DefaultPidsLimit),
					attr.Expr.Range()))
			} else {
				sb.PidsLimit = n
			}
			sb.PidsLimitRange = attr.Expr.Range()
		}
	}
	if attr, ok := content.Attributes["memory"]; ok {
		s, d := constString(attr, where)
		diags = append(diags, d...)
		if !d.HasErrors() {
			if msg := checkMemory(s); msg != "" {
				diags = append(diags, errorDiag("Invalid memory limit", msg, attr.Expr.Range()))
			} else {
				sb.Memory = s
			}
			sb.MemoryRange = attr.Expr.Range()
		}
	}
	if attr, ok := content.Attributes["cpus"]; ok {
		s, d := decodeCPUs(attr, where)
		diags = append(diags, d...)
		if !d.HasErrors() {
			sb.CPUs = s
			sb.CPUsRange = attr.Expr.Range()
		}
	}
	if attr, ok := content.Attributes["image"]; ok {
		s, d := constString(attr, where)
		diags = append(diags, d...)
		if !d.HasErrors() {
			if msg := checkImageRef(s); msg != "" {
				diags = append(diags, errorDiag("Invalid image reference", msg, attr.Expr.Range()))
			} else {
				sb.Image = s
			}
			sb.ImageRange = attr.Expr.Range()
		}
	}
	if attr, ok := content.Attributes["images"]; ok {
		diags = append(diags, decodeImages(attr, sb)...)
	}
	if attr, ok := content.Attributes["runtime"]; ok {
		s, d := constString(attr, where)
		diags = append(diags, d...)
		if !d.HasErrors() {
			if msg := checkRuntimeName(s, runtimeFix); msg != "" {
				diags = append(diags, errorDiag("Invalid runtime", "The runtime of the sandbox block is not valid: "+msg, attr.Expr.Range()))
			} else {
				sb.Runtime = s
			}
			sb.RuntimeRange = attr.Expr.Range()
		}
	}
	if attr, ok := content.Attributes["tmpfs_size"]; ok {
		s, d := constString(attr, where)
		diags = append(diags, d...)
		if !d.HasErrors() {
			if msg := checkTmpfsSize(s); msg != "" {
				diags = append(diags, errorDiag("Invalid tmpfs_size", msg, attr.Expr.Range()))
			} else {
				sb.TmpfsSize = strings.ToLower(s)
			}
			sb.TmpfsSizeRange = attr.Expr.Range()
		}
	}
	for _, b := range content.Blocks {
		if b.Type != "egress" {
			continue
		}
		if sb.Egress.DeclRange.Filename != "" {
			diags = append(diags, errorDiag("Duplicate egress block",
				fmt.Sprintf("The sandbox already has an egress block at %s. Merge the two blocks into one.", rangeString(sb.Egress.DeclRange)),
				b.DefRange))
			continue
		}
		diags = append(diags, decodeSandboxEgress(b, &sb.Egress)...)
	}
	retry, d := decodeRetryBlocks(content.Blocks, where)
	diags = append(diags, d...)
	sb.Retry = retry
	diags = append(diags, decodeBudgetBlocks(content.Blocks, "the sandbox", &sb.Budget)...)
	if sb.Image != "" {
		if r, ok := sb.ImageRanges["claude-code"]; ok {
			diags = append(diags, errorDiag("Conflicting images for claude-code",
				fmt.Sprintf("The legacy image argument (at %s) serves the claude-code runner, and images also maps \"claude-code\". Keep only one: remove image, or remove the \"claude-code\" entry of images.", rangeString(sb.ImageRange)),
				r))
		}
	}
	return sb, diags
}

func decodeImages(attr *hcl.Attribute, sb *Sandbox) hcl.Diagnostics {
	const where = "the sandbox block"
	pairs, diags := hcl.ExprMap(attr.Expr)
	if diags.HasErrors() {
		return hcl.Diagnostics{errorDiag("Wrong value type",
			fmt.Sprintf("The images argument of %s must be a map from runner name to image reference, written in braces, for example images = { \"claude-code\" = \"ghcr.io/acme/agent@sha256:...\" }.", where),
			attr.Expr.Range())}
	}
	for _, kv := range pairs {
		keyAttr := &hcl.Attribute{Name: "images", Expr: kv.Key, Range: kv.Key.Range(), NameRange: attr.NameRange}
		key, d := constString(keyAttr, where)
		diags = append(diags, d...)
		if d.HasErrors() {
			continue
		}
		if prev, ok := sb.ImageRanges[key]; ok {
			diags = append(diags, errorDiag("Duplicate image mapping",
				fmt.Sprintf("The runner %q is already mapped to an image at %s. Map each runner once.", key, rangeString(prev)),
				kv.Key.Range()))
			continue
		}
		valAttr := &hcl.Attribute{Name: "images", Expr: kv.Value, Range: kv.Value.Range(), NameRange: attr.NameRange}
		img, d := constString(valAttr, where)
		diags = append(diags, d...)
		if d.HasErrors() {
			continue
		}
		if msg := checkImageRef(img); msg != "" {
			diags = append(diags, errorDiag("Invalid image reference", msg, kv.Value.Range()))
			continue
		}
		sb.Images[key] = img
		sb.ImageRanges[key] = kv.Value.Range()
	}
	return diags
}

// checkImageRef refuses what cannot be an image reference, especially what `docker run` would read as an option.
func checkImageRef(s string) string {
	switch {
	case s == "":
		return "The image reference is empty. Give an image reference such as \"ghcr.io/acme/agent@sha256:<digest>\"."
	case strings.HasPrefix(s, "-"):
		return "The image reference starts with '-', so docker would read it as an option. Give an image reference such as \"ghcr.io/acme/agent@sha256:<digest>\"."
	case strings.ContainsAny(s, " \t\r\n"):
		return "The image reference holds white space, which no image reference does. Remove the white space."
	}
	return ""
}

// checkTmpfsSize validates a tmpfs size and returns a diagnostic detail, or "".
func checkTmpfsSize(s string) string {
	m := tmpfsSizePattern.FindStringSubmatch(s)
	if m == nil {
		return fmt.Sprintf("The tmpfs_size %q is not a size kewplan accepts. Write a whole number with a unit k, m or g, for example %q (the default); it bounds /tmp and /home/agent each.", printable(s), DefaultTmpfsSize)
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	bytes := n * map[string]int64{"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[strings.ToLower(m[2])]
	if bytes < 1<<20 {
		return fmt.Sprintf("The tmpfs_size %q is below 1m, too small for the agent's HOME. Raise it, for example to %q.", s, DefaultTmpfsSize)
	}
	return ""
}

// checkMemory validates a memory limit the way the engine reads it and returns a diagnostic detail, or "".
func checkMemory(s string) string {
	m := memoryPattern.FindStringSubmatch(s)
	if m == nil {
		return fmt.Sprintf("The memory limit %q is not a size. Write a number with an optional unit b, k, m or g, for example \"4g\" or \"512m\".", s)
	}
	n, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return fmt.Sprintf("The memory limit %q is not a size. Write a number with an optional unit, for example \"4g\".", s)
	}
	mult := map[string]float64{"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}[strings.ToLower(m[2])]
	if n*mult < minMemoryBytes {
		return fmt.Sprintf("The memory limit %q is below the engine's minimum of 6m, so every container would fail to start. Raise it, for example to \"4g\".", s)
	}
	return ""
}

func decodeCPUs(attr *hcl.Attribute, where string) (string, hcl.Diagnostics) {
	v, diags := constValue(attr, where)
	if diags.HasErrors() {
		return "", diags
	}
	nv, err := convert.Convert(v, cty.Number)
	if err != nil || nv.IsNull() {
		return "", hcl.Diagnostics{wrongTypeDiag(attr, where, "a number of CPUs", v.Type())}
	}
	bf := nv.AsBigFloat()
	if bf.Sign() <= 0 {
		return "", hcl.Diagnostics{errorDiag("Invalid cpus",
			"The cpus limit must be a positive number of CPUs, such as 2 or 1.5. Remove the argument for no CPU limit.",
			attr.Expr.Range())}
	}
	return bf.Text('f', -1), nil
}
