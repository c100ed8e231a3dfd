package egress

import (
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"io"
	"os"
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

// Dockerfile is the proxy image's recipe, built with kewplan's static binary as its only file of context.
const Dockerfile = `FROM scratch
COPY kewplan ` + BinaryPath + `
USER ` + ImageUser + `
EXPOSE 3128
ENTRYPOINT ["` + BinaryPath + `", "` + Subcommand + `", "--config", "-"]
`

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

// StaticSelf reports whether the running kewplan is statically linked, with its path; apply refuses to start
// its own proxy otherwise, with the fix (`make build` builds with CGO_ENABLED=0).
func StaticSelf() (path string, static bool, err error) {
	path, err = os.Executable()
	if err != nil {
		return "", false, fmt.Errorf("find the kewplan executable: %w", err)
	}
	static, err = StaticBinary(path)
	return path, static, err
}
