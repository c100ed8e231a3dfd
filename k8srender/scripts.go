package k8srender

// The git steps run these POSIX shell scripts. Every plan value reaches them through the environment (KEW_REPO,
// KEW_REF, KEW_BRANCH), never by interpolation into the script text, so no repository address or branch name can
// inject shell.

// cloneScript is the init container that alone (with the push step) mounts the git credential. It clones repo at
// ref into /work and copies the prompt into /work/.kew-prompt.txt, where the entrypoint reads it (contract
// element 2); the prompt and the verdict are excluded from git so `git add -A` cannot commit them.
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
git fetch -q origin "${KEW_REF:-HEAD}"
git checkout -q --detach FETCH_HEAD
git config --unset credential.helper 2>/dev/null || true
printf '%s\n' .kew-prompt.txt .kew-review-verdict.json >> .git/info/exclude
umask 022
cp ` + promptMount + `/prompt ` + workMount + `/.kew-prompt.txt
test -s ` + workMount + `/.kew-prompt.txt
`

// pushScript is the last step of a worker: the host-brokered push moved next to the data. It never runs git inside
// the agent's repository with the agent's configuration: it fetches the branch tip from /work/.git into a fresh
// repository of its own (upload-pack honours no hook from the repository it serves), refuses a tip that carries
// the prompt file, and pushes from there with its own credential helper. The commit goes to the termination
// message, which the engine reads from the pod status.
const pushScript = `set -eu
umask 077
rm -f ` + workMount + `/.kew-prompt.txt
export GIT_CONFIG_NOSYSTEM=1
git config --global credential.helper "!f() { test \"\$1\" = get || exit 0; echo username=\${KEW_GIT_USERNAME:-x-access-token}; printf 'password=%s\n' \"\$(cat ` + gitSecretMount + `/token)\"; }; f"
git config --global core.hooksPath /dev/null
git config --global protocol.allow never
git config --global protocol.https.allow always
git config --global protocol.file.allow always
git init -q --bare "$HOME/push.git"
cd "$HOME/push.git"
git fetch -q --no-tags "file://` + workMount + `/.git" "+HEAD:refs/kewplan/tip"
commit=$(git rev-parse --verify refs/kewplan/tip^{commit})
if git cat-file -e "$commit:.kew-prompt.txt" 2>/dev/null; then
  echo "kewplan: the agent committed .kew-prompt.txt; refusing to push it" >&2
  exit 65
fi
git push -q "$KEW_REPO" "$commit:refs/heads/$KEW_BRANCH"
printf '{"commit":"%s","branch":"%s"}' "$commit" "$KEW_BRANCH" > /dev/termination-log
`

// verdictScript is the last step of a reviewer: it prints the verdict sidecar between markers on stdout, where the
// engine reads it from the log and parses it with the same parser as on Docker. Hostile-file rules: only a regular
// file that is not a symbolic link is read, and at most VerdictMaxBytes of it; anything else reads as missing,
// which holds the node for a human.
const verdictScript = `set -eu
rm -f ` + workMount + `/.kew-prompt.txt
v=` + workMount + `/.kew-review-verdict.json
if [ -f "$v" ] && [ ! -L "$v" ]; then
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
