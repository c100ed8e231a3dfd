# kew-agent: the reference image of the container entrypoint contract, wrapping the Claude Code CLI.
#
# Per-runner variation lives inside the image: this file and agent-entrypoint.sh are everything that is
# claude-specific; opencode.Dockerfile is the same shape for opencode. The host side never changes.
#
# Release image (needs Docker Hub, the Debian and NodeSource mirrors, GitHub and npm):
#
#   docker build -f docker/agent.Dockerfile --target agent -t kew-agent docker/      (or: make image)
#
# Test variant (offline; what kewplan's own tests build): the same stage on a local base made by debootstrap and
# `docker import` that already carries git, jq, procps, curl and ca-certificates, with a stand-in binary in place of
# the real CLI:
#
#   --build-arg BASE=kewplan-test/bookworm-base:<recipe hash> --build-arg INSTALL_PACKAGES=0 \
#   --build-arg AGENT_INSTALL=none --target test        (the context must then hold ./agent-stand-in)
#
# Always name a target. The legacy builder builds every stage up to the target, and BuildKit only the ones it needs;
# `agent` is first so that neither ever touches the test stage when building the release image.

# debian:bookworm-slim, pinned by its multi-platform index digest so rebuilds are reproducible. Override BASE to
# build on another base; bump the digest deliberately (the tag moves with every Debian point release).
ARG BASE=debian:bookworm-slim@sha256:e899040a73d36e2b36fa33216943539d9957cba8172b858097c2cabcdb20a3e2

FROM ${BASE} AS agent

# INSTALL_PACKAGES=0 skips every download: the base must already carry the Debian tooling (the test base does).
ARG INSTALL_PACKAGES=1
# AGENT_INSTALL=npm installs the pinned Claude Code CLI from npm; none leaves /usr/local/bin/claude to a later stage.
ARG AGENT_INSTALL=npm
ARG NODE_MAJOR=22
ARG CLAUDE_CODE_VERSION=2.1.332
ARG UV_VERSION=0.11.28
ARG UV_SHA256_X86_64=e490a6464492183c5d4534a5527fb4440f7f2bb2f228162ad7e4afe076dc0224
ARG UV_SHA256_AARCH64=03e9fe0a81b0718d0bc84625de3885df6cc3f89a8b6af6121d6b9f6113fb6533

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# Tooling agents would otherwise re-download into the bind-mounted checkout on every dispatch (#762): git, curl,
# ca-certificates, procps (ps), jq (the security-guard hook fails closed without it), Node.js 22 + npm, and uv.
# NodeSource's signing key is kept armored (.asc) because apt reads that form directly, so gnupg is not needed.
RUN set -eux; \
    if [ "$INSTALL_PACKAGES" = 1 ]; then \
        export DEBIAN_FRONTEND=noninteractive; \
        apt-get update; \
        apt-get install -y --no-install-recommends ca-certificates curl git jq procps; \
        install -d -m 0755 /etc/apt/keyrings; \
        curl -fsSL https://deb.nodesource.com/gpgkey/nodesource-repo.gpg.key -o /etc/apt/keyrings/nodesource.asc; \
        echo "deb [signed-by=/etc/apt/keyrings/nodesource.asc] https://deb.nodesource.com/node_${NODE_MAJOR}.x nodistro main" \
            >/etc/apt/sources.list.d/nodesource.list; \
        apt-get update; \
        apt-get install -y --no-install-recommends nodejs; \
        case "$(uname -m)" in \
            x86_64) uv_triple=x86_64-unknown-linux-gnu; uv_sha256="$UV_SHA256_X86_64" ;; \
            aarch64) uv_triple=aarch64-unknown-linux-gnu; uv_sha256="$UV_SHA256_AARCH64" ;; \
            *) echo "no pinned uv build for $(uname -m)" >&2; exit 1 ;; \
        esac; \
        curl -fsSL "https://github.com/astral-sh/uv/releases/download/${UV_VERSION}/uv-${uv_triple}.tar.gz" -o /tmp/uv.tar.gz; \
        echo "${uv_sha256}  /tmp/uv.tar.gz" | sha256sum -c -; \
        tar -xzf /tmp/uv.tar.gz -C /usr/local/bin --strip-components=1 "uv-${uv_triple}/uv" "uv-${uv_triple}/uvx"; \
        apt-get clean; \
        rm -rf /var/lib/apt/lists/* /tmp/uv.tar.gz; \
    fi

# The agent CLI, pinned: the stream-json vocabulary changes between releases and the host's meter reads it.
RUN set -eux; \
    case "$AGENT_INSTALL" in \
        npm) npm install -g --no-fund --no-audit "@anthropic-ai/claude-code@${CLAUDE_CODE_VERSION}"; \
             npm cache clean --force; rm -rf /root/.npm ;; \
        none) ;; \
        *) echo "AGENT_INSTALL must be npm or none, not $AGENT_INSTALL" >&2; exit 1 ;; \
    esac

# uid 1001 is what the host pins the HOME tmpfs to (--tmpfs /home/agent:...,uid=1001,gid=1001): keep them in sync,
# or /home/agent is unwritable and the entrypoint dies at the git bootstrap. /work is created and owned here so the
# image also works without the bind mount.
RUN set -eux; \
    groupadd --gid 1001 agent; \
    useradd --uid 1001 --gid 1001 --home-dir /home/agent --no-create-home --shell /bin/bash agent; \
    install -d -o agent -g agent -m 0700 /home/agent; \
    install -d -o agent -g agent -m 0755 /work

COPY agent-entrypoint.sh /usr/local/bin/kew-agent-entrypoint

# No credential is ever baked in: the host forwards the runner's declared names (-e NAME) at run time.
ENV DISABLE_AUTOUPDATER=1 \
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1

USER agent
WORKDIR /work
ENTRYPOINT ["/usr/local/bin/kew-agent-entrypoint"]

# The test variant: a static stand-in answers as `claude` so the image can be exercised without a provider.
FROM agent AS test
COPY agent-stand-in /usr/local/bin/claude
