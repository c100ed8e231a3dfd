package egress

import (
	"net/http"
	"testing"
)

// TestControlSecretHeader: the control endpoint takes its secret in ControlSecretHeader as well as in a Bearer
// Authorization (a Kubernetes API server's service proxy keeps no Authorization header), and refuses a wrong one
// in either.
func TestControlSecretHeader(t *testing.T) {
	g := newBrokerRig(t, nil)
	end := g.proxy.URL + ControlEndNodePath + "fix/end"
	for _, tc := range []struct {
		name string
		hdr  map[string]string
		want int
	}{
		{"wrong secret in the header", map[string]string{ControlSecretHeader: "wrong-secret-0123456789abcdef0123456789"}, http.StatusUnauthorized},
		{"a wrong Bearer wins over a right header", map[string]string{"Authorization": "Bearer wrong-secret-0123456789abcdef0123456789", ControlSecretHeader: ctlSecret}, http.StatusUnauthorized},
		{"empty header", map[string]string{ControlSecretHeader: ""}, http.StatusUnauthorized},
		{"right secret in the header", map[string]string{ControlSecretHeader: ctlSecret}, http.StatusNoContent},
	} {
		if res, body := g.do(t, http.MethodPost, end, tc.hdr, ""); res.StatusCode != tc.want {
			t.Errorf("%s: %s %s, want %d", tc.name, res.Status, body, tc.want)
		}
	}
	res, body := g.do(t, http.MethodGet, g.url("fix", g.fixEP, "/v1/models"), map[string]string{"x-api-key": phFixKey}, "")
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("fix's placeholder after the end through the header: %s %s, want 403", res.Status, body)
	}
}
