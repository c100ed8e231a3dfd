#!/bin/sh
# runsc-setup.sh: make gVisor's runsc available to the local Docker Engine as the runtime "runsc", idempotently.
#
#   1. install Debian's runsc package when no runsc binary is found;
#   2. add one entry to the engine's daemon.json (default /etc/docker/daemon.json):
#        "runtimes": { "runsc": { "path": "<runsc>", "runtimeArgs": ["--network=host"] } }
#      merged into the file as JSON: every other key is kept as it was, and default-runtime is never touched,
#      so runc stays the engine's default and only a container started with --runtime runsc runs under gVisor;
#   3. reload the engine (SIGHUP: dockerd rereads its runtimes without restarting containers) and wait until
#      `docker info` lists runsc.
#
# --network=host is gVisor's own network stack switched off in favour of the network namespace Docker made for
# the container (its veth on the allowlist network), so Docker's networks, DNS and MTU keep working; it does not
# put the container on the host's network.
#
# Run as root (CI does) or through sudo. Environment: KEWPLAN_RUNTIME (default runsc), DOCKER_DAEMON_JSON,
# KEWPLAN_RUNSC_WAIT (seconds to wait for the reload, default 30). Exit 0 when the engine lists the runtime.
set -eu

name=${KEWPLAN_RUNTIME:-runsc}
daemon_json=${DOCKER_DAEMON_JSON:-/etc/docker/daemon.json}
wait_s=${KEWPLAN_RUNSC_WAIT:-30}

say() { echo "runsc-setup: $*"; }
die() { echo "runsc-setup: $*" >&2; exit 1; }

engine_lists() {
	docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q "\"$name\""
}

command -v docker >/dev/null 2>&1 || die "no docker client on PATH; install Docker Engine first."
docker info >/dev/null 2>&1 || die "no Docker engine answers (docker info failed)."

if engine_lists; then
	say "the engine already lists the runtime \"$name\"; nothing to do."
	exit 0
fi

if [ "$(id -u)" != 0 ]; then
	if command -v sudo >/dev/null 2>&1; then
		exec sudo -E "$0" "$@"
	fi
	die "the engine does not list the runtime \"$name\", and registering it needs root (to install runsc and edit $daemon_json). Run this script as root."
fi

# 1. The binary.
runsc=$(PATH="$PATH:/usr/sbin:/sbin:/usr/local/bin" command -v runsc 2>/dev/null || true)
if [ -z "$runsc" ]; then
	say "installing runsc from Debian's packages"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq runsc >/dev/null
	runsc=$(PATH="$PATH:/usr/sbin:/sbin:/usr/local/bin" command -v runsc 2>/dev/null || true)
	[ -n "$runsc" ] || die "apt-get installed runsc but no runsc binary is on PATH."
fi
say "using $runsc ($("$runsc" --version 2>/dev/null | head -n 1))"

# 2. The daemon.json entry, merged.
py=$(command -v python3 2>/dev/null || true)
[ -n "$py" ] || die "python3 is needed to merge $daemon_json; install it (apt-get install python3)."
mkdir -p "$(dirname "$daemon_json")"
"$py" - "$daemon_json" "$name" "$runsc" <<'PY'
import json, os, sys, tempfile

path, name, binary = sys.argv[1], sys.argv[2], sys.argv[3]
try:
    with open(path) as f:
        text = f.read()
except FileNotFoundError:
    text = ""
try:
    cfg = json.loads(text) if text.strip() else {}
except ValueError as e:
    sys.exit("runsc-setup: %s is not valid JSON (%s); fix it by hand, the engine cannot read it either." % (path, e))
if not isinstance(cfg, dict):
    sys.exit("runsc-setup: %s does not hold a JSON object; fix it by hand." % path)
runtimes = cfg.setdefault("runtimes", {})
if not isinstance(runtimes, dict):
    sys.exit("runsc-setup: the \"runtimes\" of %s is not an object; fix it by hand." % path)
if name in runtimes:
    print("runsc-setup: %s already registers the runtime %r; left as it is." % (path, name))
    sys.exit(0)
runtimes[name] = {"path": binary, "runtimeArgs": ["--network=host"]}
mode = os.stat(path).st_mode & 0o7777 if os.path.exists(path) else 0o644
fd, tmp = tempfile.mkstemp(prefix=".daemon.json.", dir=os.path.dirname(path) or ".")
with os.fdopen(fd, "w") as f:
    json.dump(cfg, f, indent=2)
    f.write("\n")
os.chmod(tmp, mode)
if os.path.exists(path) and not os.path.exists(path + ".before-runsc"):
    with open(path + ".before-runsc", "w") as f:
        f.write(text)
os.replace(tmp, path)
print("runsc-setup: added the runtime %r to %s (the default runtime is unchanged)." % (name, path))
PY

# 3. Reload: a systemd-managed engine through systemd, otherwise SIGHUP to dockerd itself.
if [ -d /run/systemd/system ] && systemctl is-active --quiet docker 2>/dev/null; then
	say "reloading the engine (systemctl reload docker)"
	systemctl reload docker
else
	pid=$(pidof dockerd 2>/dev/null || true)
	[ -n "$pid" ] || die "no dockerd process found to reload; restart the engine so it reads $daemon_json."
	say "reloading the engine (SIGHUP to dockerd, pid $pid)"
	kill -HUP $pid
fi

i=0
while ! engine_lists; do
	i=$((i + 1))
	[ "$i" -le "$wait_s" ] || die "the engine does not list the runtime \"$name\" $wait_s s after the reload; its log says why (journalctl -u docker, or dockerd's stderr)."
	sleep 1
done
say "the engine lists the runtimes $(docker info --format '{{json .Runtimes}}')"
