package views

import (
	"fmt"
	"io"
)

// EgressProxy is the view of the hidden `kewplan egress-proxy` command, which apply runs inside the proxy's
// container: its decision log (one JSON line per decision, for apply to read) goes to stdout, its notices to
// stderr.
type EgressProxy interface {
	// Decisions is where the proxy writes its decision log.
	Decisions() io.Writer
	// Listening says the proxy is up.
	Listening(addr string, nodes int)
	// Dockerfile prints the proxy image's recipe; ImageTag its name:tag (`make proxy-image`).
	Dockerfile(recipe string) error
	ImageTag(tag string) error
}

// NewEgressProxy returns the proxy command's view.
func NewEgressProxy(s Streams) EgressProxy { return &egressProxyView{NewView(s)} }

type egressProxyView struct{ *View }

func (v *egressProxyView) Decisions() io.Writer { return v.streams.Stdout }

func (v *egressProxyView) Listening(addr string, nodes int) {
	fmt.Fprintf(v.streams.Stderr, "kewplan egress proxy: listening on %s for %d nodes\n", addr, nodes)
}

func (v *egressProxyView) Dockerfile(recipe string) error {
	_, err := io.WriteString(v.streams.Stdout, recipe)
	return err
}

func (v *egressProxyView) ImageTag(tag string) error {
	_, err := fmt.Fprintln(v.streams.Stdout, tag)
	return err
}
