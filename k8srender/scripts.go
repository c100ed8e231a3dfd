package k8srender

// The git steps run these POSIX shell scripts (sh, git, grep, tr, tail, head, base64). Every plan value reaches
// them through the environment (KEW_REPO, KEW_REF, KEW_BRANCH), never by interpolation into the script text, so
// no repository address or branch name can inject shell.
//
// The git steps share one memory volume the agent never mounts, gitHomeMount (their HOME): the clone step leaves
// there what the last step must trust, the commit it checked out (baseFile) and the fingerprint of a verdict
// sidecar the repository itself carried (plantedVerdictFile).

// Files of the git steps' HOME.
const (
	baseFile           = gitHomeMount + "/kewplan-base"
	plantedVerdictFile = gitHomeMount + "/kewplan-planted-verdict"
	plantedPathsFile   = gitHomeMount + "/kewplan-planted-paths"
)

// Exit statuses of the last step that hold the node for a human.
const (
	ExitPromptCommitted  = 65 // push: a commit between base and tip adds or changes a file named .kew-prompt.txt
	ExitVerdictCommitted = 66 // push: ... a file named .kew-review-verdict.json; verdict: the sidecar is the committed one
	ExitHistoryUnchecked = 67 // push: the agent's history could not be read whole (shallow, unreadable)
	ExitProtectedBranch  = 68 // push: the branch is protected, or it is the remote's default branch (push-protected-branch)
)

// hashOutsideRepo fingerprints a file the way both git steps do, from the git steps' HOME so that git never reads
// the agent's repository or its configuration: the blob id of its bytes, no filters.
const hashOutsideRepo = `(cd "$HOME" && GIT_CEILING_DIRECTORIES=/ git hash-object --no-filters -- "$1")`

// cloneScript is the init container that alone (with the push step) mounts the git credential. It clones repo at
// ref into /work and copies the prompt into /work/.kew-prompt.txt, where the entrypoint reads it (contract
// element 2); the prompt and the verdict are excluded from git so `git add -A` cannot commit them. A prompt file or
// verdict sidecar the repository carries is removed before the agent starts: a sidecar that came with the
// repository is not the reviewer's verdict (its fingerprint is kept, so the verdict step refuses it if the
// reviewer restores it), and the prompt is copied over no committed link.
const cloneScript = `set -eu
umask 077
git config --global credential.helper "!f() { test \"\$1\" = get || exit 0; echo username=\${KEW_GIT_USERNAME:-x-access-token}; printf 'password=%s\n' \"\$(cat ` + gitSecretMount + `/token)\"; }; f"
git config --global core.hooksPath /dev/null
git config --global protocol.allow never
git config --global protocol.https.allow always
git config --global advice.detachedHead false
git init -q ` + workMount + `
cd ` + workMount + `
git remote add origin "$KEW_REPO"
# A few tries: the egress proxy may have become ready a moment before the cluster routes its Service to it.
tries=0
until git fetch -q origin "${KEW_REF:-HEAD}"; do
  tries=$((tries + 1))
  [ "$tries" -lt 4 ] || exit 1
  sleep 2
done
git checkout -q --detach FETCH_HEAD
git config --unset credential.helper 2>/dev/null || true
git rev-parse --verify 'HEAD^{commit}' > ` + baseFile + `
fingerprint() { ` + hashOutsideRepo + `; }
: > ` + plantedVerdictFile + `
if [ -f .kew-review-verdict.json ] && [ ! -L .kew-review-verdict.json ]; then
  fingerprint ` + workMount + `/.kew-review-verdict.json > ` + plantedVerdictFile + `
fi
rm -rf ` + workMount + `/.kew-review-verdict.json ` + workMount + `/.kew-prompt.txt
printf '%s\n' .kew-prompt.txt .kew-review-verdict.json >> .git/info/exclude
umask 022
cp ` + promptMount + `/prompt ` + workMount + `/.kew-prompt.txt
test -s ` + workMount + `/.kew-prompt.txt
`

// plantedNames matches, without regard to case, a path whose last component is the prompt file or the verdict
// sidecar (the broker's rule on Docker), and the sentinel line the check appends once git has listed every path.
const (
	plantedPrompt  = `(^|/)\.kew-prompt\.txt$`
	plantedVerdict = `(^|/)\.kew-review-verdict\.json$`
	listedSentinel = `/kewplan-listed-every-path`
)

// pushScript is the last step of a worker: the host-brokered push moved next to the data. It never runs git inside
// the agent's repository with the agent's configuration: it fetches the branch tip from /work/.git into a fresh
// repository of its own (upload-pack honours no hook from the repository it serves) and pushes from there with its
// own credential helper. Before it pushes, it refuses (as the Docker broker does) any commit between the clone's
// commit and the tip, every one and merges against each parent, that adds or changes a file named like the prompt
// file or the verdict sidecar at any path: the net diff is not enough, a commit that adds the prompt and a later
// one that removes it still put it in the branch. When the tip does not descend from the clone's commit, every
// commit it reaches is checked. The commit goes to the termination message, which the engine reads from the pod
// status; a refusal's reason goes there too.
//
// Then it refuses a branch that is protected (KEW_PROTECTED_BRANCHES, one shell pattern a line, where "*" also
// matches "/": a broader match than the plan's, so it fails closed) or that the remote names as its default branch
// (git ls-remote --symref), unless KEW_ALLOW_PROTECTED_PUSH is "true".
//
// The paths are listed NUL-separated and split at newlines too, so a path holding a newline can add a line but
// never hide its last component. The sentinel is the last line only when git listed every path.
const pushScript = `set -eu
umask 077
rm -f ` + workMount + `/.kew-prompt.txt
export GIT_CONFIG_NOSYSTEM=1
refuse() { printf 'kewplan: %s\n' "$2" >&2; printf '%s' "$2" > /dev/termination-log; exit "$1"; }
git config --global credential.helper "!f() { test \"\$1\" = get || exit 0; echo username=\${KEW_GIT_USERNAME:-x-access-token}; printf 'password=%s\n' \"\$(cat ` + gitSecretMount + `/token)\"; }; f"
git config --global core.hooksPath /dev/null
git config --global protocol.allow never
git config --global protocol.https.allow always
git config --global protocol.file.allow always
git init -q --bare "$HOME/push.git"
cd "$HOME/push.git"
git fetch -q --no-tags "file://` + workMount + `/.git" "+HEAD:refs/kewplan/tip"
commit=$(git rev-parse --verify 'refs/kewplan/tip^{commit}')
if [ "$(git rev-parse --is-shallow-repository)" != false ]; then
  refuse 67 "the agent's repository is shallow, so its commits cannot all be checked; refusing to push"
fi
base=$(cat ` + baseFile + `)
if git cat-file -e "$base^{commit}" 2>/dev/null; then set -- "$commit" "^$base"; else set -- "$commit"; fi
git rev-list --count "$@" > /dev/null || refuse 67 "the agent's commits cannot be listed; refusing to push"
git rev-list "$@" |
  { git diff-tree --stdin -m -r -z --root --no-renames --name-only --diff-filter=d && printf '\n` + listedSentinel + `\n'; } |
  tr '\000' '\n' | grep -i -E '` + plantedPrompt + `|` + plantedVerdict + `|^` + listedSentinel + `$' > ` + plantedPathsFile + ` || true
if [ "$(tail -n 1 ` + plantedPathsFile + `)" != ` + listedSentinel + ` ]; then
  refuse 67 "the agent's commits cannot all be checked; refusing to push"
fi
if grep -i -q -E '` + plantedPrompt + `' ` + plantedPathsFile + `; then
  refuse 65 "the agent committed the prompt file .kew-prompt.txt; nothing was pushed"
fi
if grep -i -q -E '` + plantedVerdict + `' ` + plantedPathsFile + `; then
  refuse 66 "the agent committed a reviewer sidecar .kew-review-verdict.json, which a downstream reviewer would read as its verdict; nothing was pushed"
fi
if [ "${KEW_ALLOW_PROTECTED_PUSH:-}" != true ]; then
  printf '%s\n' "${KEW_PROTECTED_BRANCHES:-}" | while IFS= read -r p; do
    if [ -n "$p" ]; then case "$KEW_BRANCH" in $p) exit 1 ;; esac; fi
  done || refuse 68 "push-protected-branch: the branch is protected (KEW_PROTECTED_BRANCHES); nothing was pushed"
  heads=$(git ls-remote --symref "$KEW_REPO" HEAD) || refuse 68 "push-protected-branch: the remote's default branch could not be read; nothing was pushed"
  tab=$(printf '\t')
  printf '%s\n' "$heads" | while IFS= read -r line; do
    case "$line" in "ref: refs/heads/$KEW_BRANCH${tab}HEAD") exit 1 ;; esac
  done || refuse 68 "push-protected-branch: the branch is the remote's default branch (git ls-remote --symref); nothing was pushed"
fi
git push -q "$KEW_REPO" "$commit:refs/heads/$KEW_BRANCH"
printf '{"commit":"%s","branch":"%s"}' "$commit" "$KEW_BRANCH" > /dev/termination-log
`

// verdictScript is the last step of a reviewer: it prints the verdict sidecar between markers on stdout, where the
// engine reads it from the log and parses it with the same parser as on Docker. Hostile-file rules: only a regular
// file that is not a symbolic link is read, and at most VerdictMaxBytes of it; anything else reads as missing,
// which holds the node for a human. A sidecar byte for byte the one the repository carried (the clone step
// removed it; the reviewer restored it) is not the reviewer's verdict: the step exits ExitVerdictCommitted.
const verdictScript = `set -eu
rm -f ` + workMount + `/.kew-prompt.txt
fingerprint() { ` + hashOutsideRepo + `; }
v=` + workMount + `/.kew-review-verdict.json
if [ -f "$v" ] && [ ! -L "$v" ]; then
  planted=$(cat ` + plantedVerdictFile + `)
  if [ -n "$planted" ] && [ "$(fingerprint "$v")" = "$planted" ]; then
    echo "kewplan: the verdict sidecar is the one the repository carried, not the reviewer's own" >&2
    exit 66
  fi
  echo "` + VerdictBegin + `"
  head -c ` + verdictMaxBytesString + ` "$v" | base64
  echo
  echo "` + VerdictEnd + `"
else
  echo "` + VerdictMissing + `"
fi
`

// Markers of the verdict in the last step's log.
const (
	VerdictBegin          = "--- kewplan verdict (base64) ---"
	VerdictEnd            = "--- end of kewplan verdict ---"
	VerdictMissing        = "--- kewplan verdict missing ---"
	VerdictMaxBytes       = 1 << 20
	verdictMaxBytesString = "1048576"
)
