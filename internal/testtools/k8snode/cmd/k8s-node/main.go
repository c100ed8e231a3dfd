// Command k8s-node starts and stops the single-node cluster of internal/testtools/k8snode for people trying kewplan
// by hand: `k8s-node up` (make k8s-node-up) leaves it running and prints the path of its kubeconfig, `k8s-node
// down` (make k8s-node-down) tears it down completely. A second `up` while one runs says so and reuses it.
//
// KEWPLAN_K8S_IMAGES names Docker images (space-separated) to import into the node's containerd as well.
package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/kewplan/kewplan/internal/testtools/k8snode"
)

func main() {
	if len(os.Args) != 2 || (os.Args[1] != "up" && os.Args[1] != "down") {
		fmt.Fprintln(os.Stderr, "usage: k8s-node up|down")
		os.Exit(2)
	}
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "k8s-node: "+format+"\n", args...) }
	opts := k8snode.Options{Slot: 0, Detach: true, Logf: logf}
	if err := run(os.Args[1], opts); err != nil {
		fmt.Fprintln(os.Stderr, "k8s-node:", err)
		os.Exit(1)
	}
}

func run(verb string, opts k8snode.Options) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	n, err := k8snode.Running(opts)
	if err != nil {
		return err
	}
	if verb == "down" {
		if n == nil {
			if n, err = k8snode.Stale(opts); err != nil || n == nil {
				opts.Logf("no node runs in slot %d", opts.Slot)
				return err
			}
		}
		if err := n.Stop(); err != nil {
			return err
		}
		opts.Logf("node %s stopped; nothing of it is left", n.Name)
		return nil
	}
	if n != nil {
		opts.Logf("node %s already runs (started %s); reusing it", n.Name, n.StartedAt())
	} else {
		opts.Logf("starting the node (make k8s-node-down stops it)")
		if n, err = k8snode.Start(ctx, opts); err != nil {
			return err
		}
	}
	if images := strings.Fields(os.Getenv("KEWPLAN_K8S_IMAGES")); len(images) > 0 {
		opts.Logf("importing %s", strings.Join(images, " "))
		if err := n.ImportImages(ctx, images...); err != nil {
			return err
		}
	}
	fmt.Println(n.Kubeconfig)
	return nil
}
