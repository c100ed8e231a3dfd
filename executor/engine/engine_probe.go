package engine

// engine_probe.go holds the engine operations that only `kewplan smoke`, `kewplan conform` and the tests that build
// their images need: a build with a target and build arguments, an import from a root filesystem tarball, an
// image's history and an image's layers. Like engine.go, it is in package engine, the only package allowed to import the Docker SDK.

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// BuildSpec is one image build with the engine's classic builder (no BuildKit session is needed, so it works on
// every engine kewplan supports).
type BuildSpec struct {
	Tag        string
	Dockerfile string // name of the Dockerfile among Files
	Target     string // stage to stop at; "" builds the last stage
	Args       map[string]string
	Labels     map[string]string
	// Files is the build context: path -> content. Paths named in Executables get mode 0755, the rest 0644.
	Files       map[string][]byte
	Executables map[string]bool
}

// Build builds spec. A failed step is reported with the tail of the build output, so the reason is in the error.
func (e *Engine) Build(ctx context.Context, spec BuildSpec) error {
	if spec.Dockerfile == "" {
		return fmt.Errorf("build image %s: no Dockerfile named", spec.Tag)
	}
	if _, ok := spec.Files[spec.Dockerfile]; !ok {
		return fmt.Errorf("build image %s: the build context holds no %s", spec.Tag, spec.Dockerfile)
	}
	var ctxTar bytes.Buffer
	tw := tar.NewWriter(&ctxTar)
	names := make([]string, 0, len(spec.Files))
	for name := range spec.Files {
		names = append(names, name)
	}
	sort.Strings(names) // a deterministic context keeps the builder's cache hits stable
	for _, name := range names {
		data := spec.Files[name]
		mode := int64(0o644)
		if spec.Executables[name] {
			mode = 0o755
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			return fmt.Errorf("build image %s: context: %w", spec.Tag, err)
		}
		if _, err := tw.Write(data); err != nil {
			return fmt.Errorf("build image %s: context: %w", spec.Tag, err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("build image %s: context: %w", spec.Tag, err)
	}
	args := make(map[string]*string, len(spec.Args))
	for k, v := range spec.Args {
		args[k] = &v
	}
	res, err := e.cli.ImageBuild(ctx, &ctxTar, client.ImageBuildOptions{
		Tags: []string{spec.Tag}, Dockerfile: spec.Dockerfile, Target: spec.Target, BuildArgs: args,
		Labels: spec.Labels, Remove: true, ForceRemove: true,
	})
	if err != nil {
		return fmt.Errorf("build image %s: %w", spec.Tag, err)
	}
	defer res.Body.Close()
	return readProgress(res.Body, "build image "+spec.Tag)
}

// ImportImage creates the image ref from a root filesystem tarball, like `docker import - ref`. changes are
// Dockerfile instructions applied to the image configuration ("CMD [\"/bin/bash\"]").
func (e *Engine) ImportImage(ctx context.Context, ref string, rootfs io.Reader, changes []string) error {
	res, err := e.cli.ImageImport(ctx, client.ImageImportSource{Source: rootfs, SourceName: "-"}, ref,
		client.ImageImportOptions{Changes: changes, Message: "kewplan import"})
	if err != nil {
		return fmt.Errorf("import image %s: %w", ref, err)
	}
	defer res.Close()
	return readProgress(res, "import image "+ref)
}

// ImageExists reports whether ref is present in the engine.
func (e *Engine) ImageExists(ctx context.Context, ref string) (bool, error) {
	_, err := e.cli.ImageInspect(ctx, ref)
	if cerrdefs.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("inspect image %s: %w", ref, err)
	}
	return true, nil
}

// ImageHistory returns the instruction that created each layer of ref, newest first (what `docker history
// --no-trunc` shows). Build arguments used by RUN steps appear in it, which is why conform reads it.
func (e *Engine) ImageHistory(ctx context.Context, ref string) ([]string, error) {
	res, err := e.cli.ImageHistory(ctx, ref)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return nil, fmt.Errorf("image %q: %w", ref, ErrNotFound)
		}
		return nil, fmt.Errorf("history of image %s: %w", ref, err)
	}
	out := make([]string, 0, len(res.Items))
	for _, it := range res.Items {
		out = append(out, it.CreatedBy)
	}
	return out, nil
}

// SaveImage streams ref as `docker save` does: a tar holding manifest.json and every layer. The caller closes it.
func (e *Engine) SaveImage(ctx context.Context, ref string) (io.ReadCloser, error) {
	rc, err := e.cli.ImageSave(ctx, []string{ref})
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return nil, fmt.Errorf("image %q: %w", ref, ErrNotFound)
		}
		return nil, fmt.Errorf("save image %s: %w", ref, err)
	}
	return rc, nil
}

// readProgress drains a JSON progress stream (build, import) and turns an in-stream error into an error that
// carries the last lines of output.
func readProgress(r io.Reader, what string) error {
	dec := json.NewDecoder(r)
	var tail []string
	for {
		var msg struct {
			Stream string `json:"stream"`
			Status string `json:"status"`
			Error  string `json:"error"`
		}
		if err := dec.Decode(&msg); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("%s: reading the engine's progress: %w", what, err)
		}
		if s := strings.TrimRight(msg.Stream, "\n"); s != "" {
			tail = append(tail, s)
			if len(tail) > 20 {
				tail = tail[1:]
			}
		}
		if msg.Error != "" {
			if len(tail) == 0 {
				return fmt.Errorf("%s: %s", what, msg.Error)
			}
			return fmt.Errorf("%s: %s\n%s", what, msg.Error, strings.Join(tail, "\n"))
		}
	}
}
