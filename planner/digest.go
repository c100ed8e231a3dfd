package planner

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

// File kinds in a saved plan's digest inputs.
const (
	FileConfig = "config" // a configuration file
	FileRead   = "read"   // a file read by file() or templatefile()
)

// FileDigest is one file that went into the config digest. Name is relative to the configuration's directory,
// with forward slashes, so the digest does not depend on where the checkout lives.
type FileDigest struct {
	Name   string `json:"name"`
	Kind   string `json:"kind"`
	SHA256 string `json:"sha256"`
}

// DigestInputs are everything the config digest covers.
type DigestInputs struct {
	Files []FileDigest // sorted by kind, then name
	// Variables holds each variable's value as canonical JSON ({"value":…,"type":…}, cty's encoding).
	Variables map[string]json.RawMessage
}

// Digest is "sha256:<hex>" over a manifest of the inputs: one line per file (kind, name, content digest), then
// one line per variable (name, canonical JSON value), each sorted. Any edited byte changes it.
func (d *DigestInputs) Digest() string {
	files := append([]FileDigest(nil), d.Files...)
	SortFileDigests(files)
	h := sha256.New()
	for _, f := range files {
		fmt.Fprintf(h, "%s %q %s\n", f.Kind, f.Name, f.SHA256)
	}
	names := make([]string, 0, len(d.Variables))
	for name := range d.Variables {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		// Compact, so the digest does not depend on how a saved plan's JSON was indented.
		var buf bytes.Buffer
		if err := json.Compact(&buf, d.Variables[name]); err != nil {
			buf.Reset()
			buf.Write(d.Variables[name])
		}
		fmt.Fprintf(h, "var %q %s\n", name, buf.Bytes())
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// SortFileDigests sorts files by kind, then name: the order of DigestInputs.Files.
func SortFileDigests(files []FileDigest) {
	sort.Slice(files, func(i, j int) bool {
		if files[i].Kind != files[j].Kind {
			return files[i].Kind < files[j].Kind
		}
		return files[i].Name < files[j].Name
	})
}

// sha256Hex is the hex digest of b.
func SHA256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// configFileName makes a configuration file's diagnostic name relative to the configuration's directory.
func configFileName(dir, name string) string {
	if rel, err := filepath.Rel(filepath.Clean(dir), filepath.Clean(name)); err == nil && !strings.HasPrefix(rel, "..") {
		return filepath.ToSlash(rel)
	}
	return filepath.Base(name)
}

// configFileDigests digests every configuration file.
func ConfigFileDigests(dir string, files map[string][]byte) []FileDigest {
	out := make([]FileDigest, 0, len(files))
	for name, src := range files {
		out = append(out, FileDigest{Name: configFileName(dir, name), Kind: FileConfig, SHA256: SHA256Hex(src)})
	}
	SortFileDigests(out)
	return out
}

// EncodeVariables encodes variable values canonically (cty's JSON with the type alongside the value, so that
// DecodeVariables restores them exactly). Sensitive marks are dropped: the values are what the plan used.
func EncodeVariables(vars map[string]cty.Value) (map[string]json.RawMessage, error) {
	out := make(map[string]json.RawMessage, len(vars))
	for name, v := range vars {
		v, _ = v.UnmarkDeep()
		if v == cty.NilVal {
			v = cty.NullVal(cty.DynamicPseudoType)
		}
		b, err := ctyjson.Marshal(v, cty.DynamicPseudoType)
		if err != nil {
			return nil, fmt.Errorf("variable %q: %w", name, err)
		}
		out[name] = b
	}
	return out, nil
}

// DecodeVariables restores values written by EncodeVariables (a saved plan's variables, for apply).
func DecodeVariables(enc map[string]json.RawMessage) (map[string]cty.Value, error) {
	out := make(map[string]cty.Value, len(enc))
	for name, b := range enc {
		v, err := ctyjson.Unmarshal(b, cty.DynamicPseudoType)
		if err != nil {
			return nil, fmt.Errorf("variable %q: %w", name, err)
		}
		out[name] = v
	}
	return out, nil
}
