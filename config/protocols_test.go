package config_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/runners"
)

// config cannot import runners, so it keeps its own list of protocols; this keeps the two equal.
func TestProtocolsMatchRunners(t *testing.T) {
	if diff := cmp.Diff(runners.Protocols(), config.Protocols); diff != "" {
		t.Errorf("config.Protocols mismatch (-want +got):\n%s", diff)
	}
}
