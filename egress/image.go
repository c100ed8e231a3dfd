package egress

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Image facts for apply, which builds the proxy's image from kewplan's own binary (no registry is involved).
const (
	// ImageRepository is the name of the proxy image; the tag is ImageTag of the binary.
	ImageRepository = "kewplan-egress-proxy"
	// BinaryPath is where the image holds kewplan's binary.
	BinaryPath = "/kewplan"
	// ImageUser is the proxy's uid:gid: nobody, no home, nothing to own.
	ImageUser = "65534:65534"
	// Subcommand runs the proxy: `kewplan egress-proxy --config -` reads the configuration from stdin.
	Subcommand = "egress-proxy"
)

// Dockerfile is the proxy image's recipe for a static kewplan, built with the binary as its only file of context
// (a dynamic one adds its runtime files: see NewImageContext).
const Dockerfile = `FROM scratch
COPY kewplan ` + BinaryPath + `
USER ` + ImageUser + `
EXPOSE 3128
ENTRYPOINT ["` + BinaryPath + `", "` + Subcommand + `", "--config", "-"]
`

// ImageContext is one proxy image's build context and tag.
type ImageContext struct {
	Tag         string
	Files       map[string][]byte // name in the context: content
	Executables map[string]bool   // names whose mode is 0755
}

// runtimeDir is the context directory copied onto the image's root: the runtime files at their image paths.
const runtimeDir = "rootfs"

// NewImageContext makes the build context of kewplan's binary and the runtime files it needs (RuntimeFiles,
// read from their sources). A static binary (no runtime files) gets exactly the Dockerfile and the tag it always
// had, so its image is the same one. A dynamic binary's tag hashes the recipe and every file at its path, so any
// copied file that changes gives a new image.
func NewImageContext(binary []byte, runtime []RuntimeFile) (*ImageContext, error) {
	if len(runtime) == 0 {
		tag, err := ImageTag(bytes.NewReader(binary))
		if err != nil {
			return nil, err
		}
		return &ImageContext{Tag: tag, Files: map[string][]byte{"Dockerfile": []byte(Dockerfile), "kewplan": binary},
			Executables: map[string]bool{"kewplan": true}}, nil
	}
	ic := &ImageContext{Files: map[string][]byte{"kewplan": binary}, Executables: map[string]bool{"kewplan": true}}
	sorted := append([]RuntimeFile(nil), runtime...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Path < sorted[j].Path })
	var dirs []string
	seenDir := map[string]bool{}
	h := sha256.New()
	total := int64(len(binary))
	for _, f := range sorted {
		if !filepath.IsAbs(f.Path) || filepath.Clean(f.Path) != f.Path || f.Path == BinaryPath {
			return nil, fmt.Errorf("runtime file %q is not a clean absolute path of its own", f.Path)
		}
		name := runtimeDir + f.Path
		if _, dup := ic.Files[name]; dup {
			return nil, fmt.Errorf("runtime file %s is listed twice", f.Path)
		}
		data, err := os.ReadFile(f.Source)
		if err != nil {
			return nil, fmt.Errorf("read %s for the egress proxy image: %w", f.Source, err)
		}
		if total += int64(len(data)); total > maxImageBytes {
			return nil, fmt.Errorf("the egress proxy image would hold more than %d MiB", maxImageBytes>>20)
		}
		ic.Files[name], ic.Executables[name] = data, true // the interpreter must be executable; libraries may be
		fmt.Fprintf(h, "%s\x00%d\x00", f.Path, len(data))
		h.Write(data)
		if d := filepath.Dir(f.Path); !seenDir[d] {
			seenDir[d] = true
			dirs = append(dirs, d)
		}
	}
	dockerfile := dynamicDockerfile(dirs)
	ic.Files["Dockerfile"] = []byte(dockerfile)
	fmt.Fprintf(h, "Dockerfile\x00%d\x00%s", len(dockerfile), dockerfile)
	fmt.Fprintf(h, "kewplan\x00%d\x00", len(binary))
	h.Write(binary)
	ic.Tag = ImageRepository + ":" + hex.EncodeToString(h.Sum(nil))[:16]
	return ic, nil
}

// maxImageBytes bounds a dynamic proxy image's binary and runtime files together.
const maxImageBytes = 1 << 30

// dynamicDockerfile is the recipe of a dynamically linked kewplan: the runtime files at their paths, and
// LD_LIBRARY_PATH naming their directories, because the image has no ld.so.cache for the directories that only
// the host's cache listed.
func dynamicDockerfile(libDirs []string) string {
	return `FROM scratch
COPY ` + runtimeDir + `/ /
COPY kewplan ` + BinaryPath + `
ENV LD_LIBRARY_PATH=` + strings.Join(libDirs, ":") + `
USER ` + ImageUser + `
EXPOSE 3128
ENTRYPOINT ["` + BinaryPath + `", "` + Subcommand + `", "--config", "-"]
`
}

// ImageTag names the image of one kewplan binary: the first 16 hex digits of its SHA-256, so that a rebuilt
// kewplan gets a new image and an unchanged one reuses the engine's.
func ImageTag(binary io.Reader) (string, error) {
	h := sha256.New()
	if _, err := io.Copy(h, binary); err != nil {
		return "", fmt.Errorf("hash kewplan binary: %w", err)
	}
	return ImageRepository + ":" + hex.EncodeToString(h.Sum(nil))[:16], nil
}

// StaticBinary reports whether the ELF executable at path is statically linked: it asks for no program
// interpreter (no PT_INTERP), so it runs in an image FROM scratch. A binary built with cgo, or a non-ELF file, is
// not, and the error of the latter says why.
func StaticBinary(path string) (bool, error) {
	f, err := elf.Open(path)
	if err != nil {
		return false, fmt.Errorf("%s is not an ELF executable kewplan can put in an image: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return false, nil
		}
	}
	return true, nil
}

// modulePath is kewplan's Go module, as a kewplan binary's build information names it.
const modulePath = "github.com/kewplan/kewplan"

// CheckKewplanBinary refuses a file that is not a build of kewplan (by its Go build information): the image runs
// the binary's egress-proxy subcommand, which no other program has.
func CheckKewplanBinary(path string) error {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%s is not a Go program kewplan can put in an image: %w", path, err)
	}
	if bi.Main.Path != modulePath {
		return fmt.Errorf("%s is a build of %q, not of kewplan (%s)", path, bi.Main.Path, modulePath)
	}
	return nil
}
