package views

import (
	"fmt"

	"github.com/kewplan/kewplan/executor"
	"github.com/kewplan/kewplan/internal/termsafe"
)

// Recovery shows, on stderr, what a command found of dead applies before it read the state directory
// (executor.Recover): runs marked interrupted, containers stopped, work kept. The command's own output, JSON
// included, is left alone on stdout.
func Recovery(s Streams, rec *executor.Recovery) {
	if rec == nil {
		return
	}
	for _, w := range rec.Warnings {
		fmt.Fprintf(s.Stderr, "Warning: %s\n", termsafe.String(w))
	}
}
