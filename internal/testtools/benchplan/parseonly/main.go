// Command parseonly is the floor `make bench` compares kewplan with: it reads the .hcl files of a directory,
// parses each with hclsyntax.ParseConfig and nothing else, and prints the parse's wall and CPU time in
// nanoseconds. It runs as its own process so that the benchmark process stays small: a child's peak memory
// (getrusage) counts its parent's at fork, so the parent must not hold parsed configurations.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

func main() {
	names, _ := filepath.Glob(filepath.Join(os.Args[1], "*.hcl"))
	srcs := make([][]byte, len(names))
	for i, name := range names {
		src, err := os.ReadFile(name)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		srcs[i] = src
	}
	cpu0, start := processCPU(), time.Now()
	for i, src := range srcs {
		if _, diags := hclsyntax.ParseConfig(src, names[i], hcl.InitialPos); diags.HasErrors() {
			fmt.Fprintln(os.Stderr, diags.Error())
			os.Exit(1)
		}
	}
	wall, cpu := time.Since(start), processCPU()-cpu0
	fmt.Println(wall.Nanoseconds(), cpu.Nanoseconds())
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
