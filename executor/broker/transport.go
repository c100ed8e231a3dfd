package broker

import (
	"regexp"
	"strings"
)

// transportKeys are the host configuration keys (as `git config --list` prints them: section and name lower
// case) a remote command carries over: credentials, URL rewriting, HTTP and SSH transport. Nothing that runs on
// objects.
var transportKeys = regexp.MustCompile(`^(credential\..+|http\..+|url\..+\.(insteadof|pushinsteadof)|core\.(sshcommand|askpass|gitproxy)|ssh\.variant|protocol\.(allow|[^.]+\.allow))$`)

// TransportConfig keeps, in order, the transport keys of the system, global and command-line scopes from the
// output of `git config --list --null --show-scope` (a later credential.helper= still resets the list). The
// host's git commands that touch agent-made objects run with every other configuration off, and with these
// passed as GIT_CONFIG_COUNT entries.
func TransportConfig(list []byte) [][2]string {
	var kept [][2]string
	fields := strings.Split(string(list), "\x00")
	for i := 0; i+1 < len(fields); i += 2 {
		scope, entry := fields[i], fields[i+1]
		if scope != "system" && scope != "global" && scope != "command" {
			continue
		}
		key, value, hasValue := strings.Cut(entry, "\n")
		if !hasValue {
			value = "true" // a bare boolean key
		}
		if transportKeys.MatchString(key) {
			kept = append(kept, [2]string{key, value})
		}
	}
	return kept
}
