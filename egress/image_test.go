package egress

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestStaticBinary(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte("package main\n\nfunc main() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "static")
	cmd := exec.Command("go", "build", "-o", bin, src)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=", "GO111MODULE=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	static, err := StaticBinary(bin)
	if err != nil || !static {
		t.Errorf("StaticBinary(CGO_ENABLED=0 build) = %v, %v; want true", static, err)
	}
	// A dynamically linked binary asks for an interpreter: the same program built with cgo.
	if _, err := exec.LookPath("gcc"); err == nil {
		dyn := filepath.Join(dir, "dynamic")
		cmd := exec.Command("go", "build", "-o", dyn, "-ldflags", "-linkmode=external", src)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1", "GOFLAGS=", "GO111MODULE=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build with cgo: %v\n%s", err, out)
		}
		if static, err := StaticBinary(dyn); err != nil || static {
			t.Errorf("StaticBinary(cgo build) = %v, %v; want false", static, err)
		}
	} else {
		t.Log("no C compiler: the dynamic case is not built")
	}
	if _, err := StaticBinary(src); err == nil || !strings.Contains(err.Error(), "not an ELF") {
		t.Errorf("StaticBinary(a Go source file) error = %v, want one saying it is not an ELF executable", err)
	}
}

func TestImageTagAndDockerfile(t *testing.T) {
	tag, err := ImageTag(strings.NewReader("kewplan binary bytes"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tag, ImageRepository+":") || len(tag) != len(ImageRepository)+1+16 {
		t.Errorf("ImageTag() = %q", tag)
	}
	for _, want := range []string{"FROM scratch", "USER 65534:65534", `"egress-proxy", "--config", "-"`} {
		if !strings.Contains(Dockerfile, want) {
			t.Errorf("Dockerfile lacks %q:\n%s", want, Dockerfile)
		}
	}
}
