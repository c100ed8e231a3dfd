#!/bin/sh
# Prepares kewplan's demo: a local git repository for the agent to work on, and the internal allowlist network.
# Run it from anywhere; run `make demo-image` first. Each run starts the demo over with a fresh repository, so the
# host broker's push to kew/hello never meets the previous run's branch.
set -eu
demo=$(cd "$(dirname "$0")" && pwd)
repo="$demo/work/origin"

rm -rf "$repo"
mkdir -p "$repo"
cd "$repo"
git init --quiet --initial-branch=main
printf '# demo repository\n\nA repository for kewplan'"'"'s demo agent to commit to.\n' > README.md
git add README.md
# A fresh repository keeps its objects loose, which the demo agent (no git in its image) needs.
git -c user.name="kewplan demo" -c user.email=demo@kewplan.invalid commit --quiet -m "initial commit"
echo "created the demo repository $repo"

# Internal (no route out) and without a host-side address (inhibit_ipv4), so an agent cannot reach the host's own
# services through the network's gateway either. An older demo network without that option is replaced.
if [ "$(docker network inspect kew-allowlist --format '{{.Internal}} {{index .Options "com.docker.network.bridge.inhibit_ipv4"}}' 2>/dev/null)" != "true true" ]; then
	docker network rm kew-allowlist >/dev/null 2>&1 || true
	docker network create --internal -o com.docker.network.bridge.inhibit_ipv4=true kew-allowlist >/dev/null
	echo "created the internal network kew-allowlist"
fi
if ! docker image inspect kewplan-demo/agent:latest >/dev/null 2>&1; then
	echo "the image kewplan-demo/agent:latest is missing: run make demo-image" >&2
	exit 1
fi
echo "ready: ANTHROPIC_API_KEY=dummy kewplan apply $demo --auto-approve"
