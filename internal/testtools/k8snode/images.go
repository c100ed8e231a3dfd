package k8snode

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/kewplan/kewplan/egress"
	"github.com/kewplan/kewplan/executor/engine"
	"github.com/kewplan/kewplan/internal/testtools/testkit"
)

// Images are the images the node's pods run, built with Docker (nothing is pulled) and imported into the node.
type Images struct {
	Agent string // executor/testdata/fakeagent FROM scratch, as 1001:1001 in /work
	Git   string // the debootstrap test base (sh, git, coreutils) with caPEM added to its trust store: the git steps
	Proxy string // kewplan's egress proxy image, as make proxy-image builds it
}

// BuildImages builds the node's images from the module at root (tagged by their content, so an unchanged one is
// reused) and returns their tags.
func BuildImages(ctx context.Context, eng *engine.Engine, root string, caPEM []byte, logf func(string, ...any)) (Images, error) {
	var im Images
	var err error
	if im.Agent, err = scratchImage(ctx, eng, root, "fakeagent", "./executor/testdata/fakeagent"); err != nil {
		return im, err
	}
	if im.Proxy, err = proxyImage(ctx, eng, root); err != nil {
		return im, err
	}
	base, err := testkit.EnsureTestBase(logf, eng)
	if err != nil {
		return im, err
	}
	im.Git, err = gitImage(ctx, eng, base, caPEM)
	return im, err
}

// List is the images' tags.
func (im Images) List() []string { return []string{im.Agent, im.Git, im.Proxy} }

func scratchImage(ctx context.Context, eng *engine.Engine, root, name, pkg string) (string, error) {
	bin, err := goBuild(root, pkg)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(bin)
	tag := "kewplan-test/" + name + ":" + hex.EncodeToString(sum[:6])
	if _, err := eng.InspectImage(ctx, tag); err == nil {
		return tag, nil
	}
	dockerfile := fmt.Sprintf("FROM scratch\nCOPY %[1]s /%[1]s\nUSER 1001:1001\nWORKDIR /work\nENTRYPOINT [\"/%[1]s\"]\n", name)
	return tag, eng.BuildImage(ctx, tag, map[string][]byte{"Dockerfile": []byte(dockerfile), name: bin}, map[string]bool{name: true})
}

// goBuild builds the package pkg of the module at root, static.
func goBuild(root, pkg string) ([]byte, error) {
	dir, err := os.MkdirTemp("", "kewplan-node-build-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "bin")
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build %s: %v\n%s", pkg, err, msg)
	}
	return os.ReadFile(out)
}

func proxyImage(ctx context.Context, eng *engine.Engine, root string) (string, error) {
	bin, err := goBuild(root, "./cmd/kewplan")
	if err != nil {
		return "", err
	}
	ic, err := egress.NewImageContext(bin, nil)
	if err != nil {
		return "", err
	}
	if _, err := eng.InspectImage(ctx, ic.Tag); err == nil {
		return ic.Tag, nil
	}
	return ic.Tag, eng.BuildImage(ctx, ic.Tag, ic.Files, ic.Executables)
}

func gitImage(ctx context.Context, eng *engine.Engine, base string, caPEM []byte) (string, error) {
	sum := sha256.Sum256(append([]byte(base), caPEM...))
	tag := "kewplan-test/node-git:" + hex.EncodeToString(sum[:6])
	if _, err := eng.InspectImage(ctx, tag); err == nil {
		return tag, nil
	}
	dockerfile := "FROM " + base + "\nCOPY test-ca.pem /tmp/test-ca.pem\nRUN cat /tmp/test-ca.pem >> /etc/ssl/certs/ca-certificates.crt && rm /tmp/test-ca.pem\n"
	return tag, eng.BuildImage(ctx, tag, map[string][]byte{"Dockerfile": []byte(dockerfile), "test-ca.pem": caPEM}, nil)
}
