#!/usr/bin/env bash
# Builds the Kubernetes binaries the tests run: the control plane that `make k8s-test` runs on loopback
# (kube-apiserver and kube-controller-manager from k8s.io/kubernetes, etcd from go.etcd.io/etcd/server/v3) and the
# node that `make k8s-node-test` adds to it (kubelet, kube-scheduler, kube-proxy, CoreDNS v1.15.0 with the hosts plugin only, kube-router
# v2.1.0 for its NetworkPolicy firewall, and the static pause binary built from the kubernetes module's
# build/pause/linux/pause.c). Nothing is downloaded but Go modules from the module
# proxy. The binaries go to a cache directory keyed by version, outside the repository:
#   ${KEWPLAN_K8S_CACHE:-$HOME/.cache/kewplan-k8s}/<kubernetes version>/{kube-apiserver,...,pause}
# A binary already there is not built again. The build modules live in the cache too (<cache>/src/...), so the
# repository's go.mod never requires k8s.io/kubernetes.
#
# Cost on a 2-core machine: kube-apiserver ~13 min (2.7 GB peak memory), kube-controller-manager ~4.5 min,
# etcd ~2 min, ~0.7 GB of modules; on a machine shared at load 20-36 it took 113, 7 and 63 min.
# Builds run under `nice -n 10` with `go build -p 1` (KEWPLAN_K8S_BUILD_P raises it) so they do not starve others.
#
# Usage: build-binaries.sh [etcd|apiserver|controller-manager|node|kubelet|scheduler|proxy|pause|coredns|kube-router|all ...]
#        (default: the control plane; `node` is kubelet, scheduler, proxy, pause, coredns and kube-router)
set -euo pipefail

K8S_VERSION=${KEWPLAN_K8S_VERSION:-v1.37.2}
ETCD_VERSION=${KEWPLAN_ETCD_VERSION:-v3.7.3}
CACHE=${KEWPLAN_K8S_CACHE:-$HOME/.cache/kewplan-k8s}
GO=${GO:-go}
BIN=$CACHE/$K8S_VERSION
STAGING_VERSION=v0.${K8S_VERSION#v1.}   # the staging modules (k8s.io/api, ...) follow kubernetes as v0.<minor>.<patch>
mkdir -p "$BIN" "$CACHE/src"

log() { printf 'k8s binaries: %s\n' "$*" >&2; }

kube_module() {
  local dir=$CACHE/src/kubernetes-$K8S_VERSION
  if [ -f "$dir/go.sum" ] && [ -f "$dir/.ready" ]; then echo "$dir"; return; fi
  mkdir -p "$dir"
  log "preparing a build module for k8s.io/kubernetes $K8S_VERSION in $dir"
  # k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces them with ./staging in its own go.mod;
  # a module that requires it must replace each of them with the published v0.x.y.
  local kmod
  kmod=$(cd "$dir" && GOFLAGS=-mod=mod "$GO" mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
  {
    echo "module kewplan.local/k8stools"
    echo
    echo "go $("$GO" env GOVERSION | sed 's/^go//')"
    echo
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo
    grep -E '^[[:space:]]*k8s\.io/[a-z0-9-]+ v0\.0\.0$' "$kmod" | awk '{print $1}' | sort -u |
      grep -vE '^k8s\.io/(sample-cli-plugin|sample-controller)$' |
      while read -r m; do echo "replace $m => $m $STAGING_VERSION"; done
  } > "$dir/go.mod"
  cat > "$dir/tools.go" <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
GO
  (cd "$dir" && nice -n 10 "$GO" mod tidy) >&2
  touch "$dir/.ready"
  echo "$dir"
}

# tool_module NAME MODULE VERSION: a build module in $CACHE/src/NAME-VERSION that requires MODULE at VERSION, its
# Go file read from stdin (a tools.go importing the command, or a main package of its own); tidied once.
tool_module() {
  local name=$1 module=$2 version=$3 dir=$CACHE/src/$1-$3
  if [ -f "$dir/.ready" ]; then cat >/dev/null; echo "$dir"; return; fi
  mkdir -p "$dir"
  log "preparing a build module for $name $version in $dir"
  printf 'module kewplan.local/%stools\n\ngo %s\n\nrequire %s %s\n' "$name" "$("$GO" env GOVERSION | sed 's/^go//')" "$module" "$version" > "$dir/go.mod"
  cat > "$dir/tools.go"
  (cd "$dir" && nice -n 10 "$GO" mod tidy) >&2
  touch "$dir/.ready"
  echo "$dir"
}

etcd_module() {
  tool_module etcd go.etcd.io/etcd/server/v3 "$ETCD_VERSION" <<'GO'
//go:build tools

package tools

import _ "go.etcd.io/etcd/server/v3"
GO
}

# One build of a binary at a time: a second `make k8s-test` waits for the first instead of building it twice.
locked() { # lock-name command...
  local lock=$CACHE/.$1.lock; shift
  ( flock 9; "$@" ) 9>"$lock"
}

build() { # name module-dir package
  local name=$1 dir=$2 pkg=$3
  if [ -x "$BIN/$name" ]; then log "$name: cached at $BIN/$name"; return; fi
  log "$name: building $pkg (nice -n 10, go build -p 1); this takes minutes"
  local start=$SECONDS
  (cd "$dir" && CGO_ENABLED=0 nice -n 10 "$GO" build -p "${KEWPLAN_K8S_BUILD_P:-1}" -trimpath -ldflags "-s -w" -o "$BIN/.$name.tmp.$$" "$pkg")
  mv "$BIN/.$name.tmp.$$" "$BIN/$name"
  log "$name: built in $((SECONDS - start)) s -> $BIN/$name"
}

# CoreDNS for the test node, built with only the plugins it needs (errors, log, hosts) and no forward plugin, so a
# name it does not hold is answered NXDOMAIN and no query ever leaves the node.
COREDNS_VERSION=${KEWPLAN_COREDNS_VERSION:-v1.15.0}
coredns_module() {
  tool_module coredns github.com/coredns/coredns "$COREDNS_VERSION" <<'GO'
// Command coredns is CoreDNS with the errors, log and hosts plugins only.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/hosts"
	_ "github.com/coredns/coredns/plugin/log"
)

func init() { dnsserver.Directives = []string{"errors", "log", "hosts"} }

func main() { coremain.Run() }
GO
}

# kube-router in firewall-only mode is the test node's NetworkPolicy enforcer (iptables and ipset in the node's
# namespace); it runs only there, in the tests.
KUBE_ROUTER_VERSION=${KEWPLAN_KUBE_ROUTER_VERSION:-v2.1.0}
kube_router_module() {
  tool_module kube-router github.com/cloudnativelabs/kube-router/v2 "$KUBE_ROUTER_VERSION" <<'GO'
//go:build tools

package tools

import _ "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router"
GO
}

# The pod sandbox's pause process: the kubernetes module's own pause.c, linked static so a FROM-scratch image can run it.
build_pause() { # module-dir
  local dir=$1
  if [ -x "$BIN/pause" ]; then log "pause: cached at $BIN/pause"; return; fi
  local src
  src=$(cd "$dir" && "$GO" list -m -f '{{.Dir}}' k8s.io/kubernetes)/build/pause/linux/pause.c
  gcc -Os -static -Wall -Werror -DVERSION=kewplan -o "$BIN/.pause.tmp.$$" "$src"
  mv "$BIN/.pause.tmp.$$" "$BIN/pause"
  log "pause: built -> $BIN/pause"
}

targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(etcd apiserver controller-manager)
expanded=()
for t in "${targets[@]}"; do
  case $t in
    node) expanded+=(kubelet scheduler proxy pause coredns kube-router) ;;
    all) expanded+=(etcd apiserver controller-manager kubelet scheduler proxy pause coredns kube-router) ;;
    *) expanded+=("$t") ;;
  esac
done
for t in "${expanded[@]}"; do
  case $t in
    etcd) locked etcd build etcd "$(locked etcd-module etcd_module)" go.etcd.io/etcd/server/v3 ;;
    apiserver) locked kube-apiserver build kube-apiserver "$(locked kube-module kube_module)" k8s.io/kubernetes/cmd/kube-apiserver ;;
    controller-manager) locked kube-controller-manager build kube-controller-manager "$(locked kube-module kube_module)" k8s.io/kubernetes/cmd/kube-controller-manager ;;
    kubelet) locked kubelet build kubelet "$(locked kube-module kube_module)" k8s.io/kubernetes/cmd/kubelet ;;
    scheduler) locked kube-scheduler build kube-scheduler "$(locked kube-module kube_module)" k8s.io/kubernetes/cmd/kube-scheduler ;;
    proxy) locked kube-proxy build kube-proxy "$(locked kube-module kube_module)" k8s.io/kubernetes/cmd/kube-proxy ;;
    kube-router) locked kube-router build kube-router "$(locked kube-router-module kube_router_module)" github.com/cloudnativelabs/kube-router/v2/cmd/kube-router ;;
    coredns) locked coredns build coredns "$(locked coredns-module coredns_module)" . ;;
    pause) locked pause build_pause "$(locked kube-module kube_module)" ;;
    *) echo "build-binaries.sh: unknown target $t (want etcd, apiserver, controller-manager, node, kubelet, scheduler, proxy, pause, coredns, kube-router or all)" >&2; exit 2 ;;
  esac
done
echo "$BIN"
