#!/usr/bin/env bash
# kew-agent-entrypoint: the image half of the container entrypoint contract, for the Claude Code CLI.
#
# The order is the contract's and each step exists because of an incident:
#   1. refuse to start without a prompt (#695: a promptless agent exits on "Input must be provided" and the
#      dispatch burns for nothing);
#   2. bootstrap git in the fresh tmpfs HOME (#742: without safe.directory git rejects the bind mount as dubious
#      ownership, without an identity `git commit` dies; either way the work never lands);
#   3. exec the agent with the host's args unmodified and the prompt on stdin (#761: routing that never reaches the
#      container; the prompt never rides in argv, where it is length-limited and visible in ps).
# Nothing here may print to stdout: stdout is the agent's NDJSON telemetry channel.
set -euo pipefail

PROMPT_FILE="${KEW_PROMPT_FILE:-/work/.kew-prompt.txt}"
if [ ! -f "$PROMPT_FILE" ]; then
    echo "kew-agent-entrypoint: prompt file $PROMPT_FILE does not exist or is not a regular file; the host writes it before launch (KEW_PROMPT_FILE overrides the path)" >&2
    exit 64
fi
if [ ! -s "$PROMPT_FILE" ]; then
    echo "kew-agent-entrypoint: prompt file $PROMPT_FILE is empty; refusing to start the agent without a prompt" >&2
    exit 64
fi
if [ ! -r "$PROMPT_FILE" ]; then
    echo "kew-agent-entrypoint: prompt file $PROMPT_FILE is not readable by uid $(id -u)" >&2
    exit 64
fi

git config --global --add safe.directory /work
git config --global user.name "kew-agent"
git config --global user.email "agent@kew.local"

exec claude --print "$@" <"$PROMPT_FILE"
