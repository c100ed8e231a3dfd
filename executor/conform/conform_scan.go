package conform

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/kewplan/kewplan/executor/engine"
)

// credentialLike reports whether an environment variable name looks like it holds a secret. It works on the
// name's "_"-separated words so that GIT_AUTHOR_NAME or DISABLE_AUTOUPDATER are not mistaken for one.
func credentialLike(name string) bool {
	words := strings.Split(strings.ToUpper(name), "_")
	for i, w := range words {
		switch w {
		case "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "CREDENTIALS", "AUTH", "APIKEY", "PAT":
			return true
		case "KEY":
			if i > 0 {
				switch words[i-1] {
				case "API", "ACCESS", "PRIVATE", "SECRET", "SIGNING":
					return true
				}
			}
		}
	}
	return false
}

// historyAssignment finds NAME=value words in a layer's creating instruction: ENV lines, and the build arguments
// the classic builder records in front of a RUN ("|2 NAME=value /bin/sh -c …").
var historyAssignment = regexp.MustCompile(`(?:^|[\s|;&(])([A-Za-z_][A-Za-z0-9_]*)=("(?:[^"\\]|\\.)*"|'[^']*'|[^\s;&|)]*)`)

// bakedHistoryCredentials returns the credential-like names assigned a non-empty literal value in the history
// (newest step first), each once, as "NAME (build step N of M)" counting from the base.
func bakedHistoryCredentials(history []string) []string {
	var out []string
	seen := map[string]bool{}
	for i, createdBy := range history {
		for _, m := range historyAssignment.FindAllStringSubmatch(createdBy, -1) {
			name, value := m[1], strings.Trim(m[2], `"'`)
			if !credentialLike(name) || value == "" || strings.HasPrefix(value, "$") || seen[name] {
				continue
			}
			seen[name] = true
			out = append(out, fmt.Sprintf("%s (build step %d of %d)", name, len(history)-i, len(history)))
		}
	}
	return out
}

// credentialFile says why a file in an image layer is a credential store, or "" when it is not one. content is
// called only for names that need their content checked, and returns at most the first 64 KiB.
func credentialFile(p string, content func() []byte) string {
	base, dir := path.Base(p), path.Base(path.Dir(p))
	switch {
	case base == ".credentials.json" && dir == ".claude":
		return "Claude Code login credentials"
	case base == ".claude.json" && bytes.Contains(content(), []byte(`"primaryApiKey"`)):
		return "Claude Code configuration holding an API key"
	case strings.HasSuffix(p, ".local/share/opencode/auth.json"):
		return "opencode login credentials"
	case strings.HasSuffix(p, ".pi/agent/auth.json"):
		return "pi login credentials"
	case base == ".env" && dir == ".hermes":
		return "Hermes credential file"
	case base == ".git-credentials":
		return "git credential store"
	case base == ".netrc":
		return "netrc credentials"
	case strings.HasSuffix(p, ".config/gh/hosts.yml"):
		return "GitHub CLI token store"
	case strings.HasSuffix(p, ".aws/credentials"):
		return "AWS credentials"
	case strings.HasSuffix(p, ".docker/config.json") && (bytes.Contains(content(), []byte(`"auth"`)) || bytes.Contains(content(), []byte(`"identitytoken"`))):
		return "Docker registry credentials"
	case base == ".npmrc" && (bytes.Contains(content(), []byte("_authToken")) || bytes.Contains(content(), []byte("_auth=")) || bytes.Contains(content(), []byte("_password"))):
		return "npm registry token"
	case dir == ".ssh" && strings.HasPrefix(base, "id_") && !strings.HasSuffix(base, ".pub"):
		return "SSH private key"
	}
	return ""
}

// imageScan is what conform learns from an image's layers.
type imageScan struct {
	Layers int
	// CredentialFiles are "/path: why (layer N of M)", in layer order.
	CredentialFiles []string
	// Passwd is the image's /etc/passwd as its top-most layer leaves it; PasswdFound is false when no layer has one.
	Passwd      []byte
	PasswdFound bool
}

// scanLimit bounds what is kept of one file read from a layer.
const scanLimit = 64 << 10

type layerFindings struct {
	creds         []string
	passwd        []byte
	passwdSet     bool // this layer writes /etc/passwd
	passwdRemoved bool // this layer deletes it
}

// scanImage streams the image as `docker save` does and looks at every file of every layer, including files a
// later layer deletes: a credential baked into any layer ships with the image.
func scanImage(ctx context.Context, e *engine.Engine, ref string) (*imageScan, error) {
	rc, err := e.SaveImage(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return scanSaved(rc)
}

// scanSaved reads a `docker save` stream: legacy layout (<id>/layer.tar) or OCI layout (blobs/sha256/<hex>);
// either way manifest.json lists the layers from the base up.
func scanSaved(r io.Reader) (*imageScan, error) {
	findings := map[string]*layerFindings{}
	var manifest []struct {
		Layers []string `json:"Layers"`
	}
	outer := tar.NewReader(r)
	for {
		hdr, err := outer.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read the saved image: %w", err)
		}
		name := path.Clean(hdr.Name)
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		if name == "manifest.json" {
			if err := json.NewDecoder(io.LimitReader(outer, 16<<20)).Decode(&manifest); err != nil {
				return nil, fmt.Errorf("read the saved image's manifest.json: %w", err)
			}
			continue
		}
		f, isLayer, err := scanLayer(outer)
		if err != nil {
			return nil, fmt.Errorf("read layer %s of the saved image: %w", name, err)
		}
		if isLayer {
			findings[name] = f
		}
	}
	if len(manifest) == 0 {
		return nil, errors.New("the saved image has no manifest.json entry")
	}
	layers := manifest[0].Layers
	scan := &imageScan{Layers: len(layers)}
	for i, l := range layers {
		f := findings[path.Clean(l)]
		if f == nil {
			continue
		}
		for _, c := range f.creds {
			scan.CredentialFiles = append(scan.CredentialFiles, fmt.Sprintf("%s (layer %d of %d)", c, i+1, len(layers)))
		}
		switch {
		case f.passwdSet:
			scan.Passwd, scan.PasswdFound = f.passwd, true
		case f.passwdRemoved:
			scan.Passwd, scan.PasswdFound = nil, false
		}
	}
	return scan, nil
}

// scanLayer reads one blob of the saved image; it is a layer when it is a tar (possibly gzip-compressed).
func scanLayer(r io.Reader) (*layerFindings, bool, error) {
	br := bufio.NewReaderSize(r, 1024)
	head, _ := br.Peek(2)
	var lr io.Reader = br
	if len(head) == 2 && head[0] == 0x1f && head[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, false, err
		}
		defer zr.Close()
		zbr := bufio.NewReaderSize(zr, 1024)
		lr, br = zbr, zbr
	}
	if h, _ := br.Peek(262); len(h) < 262 || !bytes.Equal(h[257:262], []byte("ustar")) {
		return nil, false, nil // a configuration or index blob
	}
	f := &layerFindings{}
	tr := tar.NewReader(lr)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return f, true, nil
		}
		if err != nil {
			return nil, true, err
		}
		p := strings.TrimPrefix(path.Clean("/"+hdr.Name), "/")
		if p == "etc/.wh.passwd" {
			f.passwdRemoved = true
			continue
		}
		if hdr.Typeflag != tar.TypeReg || strings.HasPrefix(path.Base(p), ".wh.") {
			continue
		}
		var content []byte
		read := false
		get := func() []byte {
			if !read {
				read = true
				content, _ = io.ReadAll(io.LimitReader(tr, scanLimit))
			}
			return content
		}
		if p == "etc/passwd" {
			f.passwd, f.passwdSet = slices.Clone(get()), true
			continue
		}
		if why := credentialFile(p, get); why != "" {
			f.creds = append(f.creds, "/"+p+": "+why)
		}
	}
}

// passwdUID resolves a user name to its uid through an /etc/passwd file.
func passwdUID(passwd []byte, name string) (string, bool) {
	for _, line := range strings.Split(string(passwd), "\n") {
		fields := strings.Split(line, ":")
		if len(fields) >= 3 && fields[0] == name {
			return fields[2], true
		}
	}
	return "", false
}
