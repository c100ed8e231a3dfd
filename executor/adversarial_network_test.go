//go:build linux

package executor

// Section D of the checklist: egress from the allowlist network. kewplan ships no egress proxy, so what it owns
// is the network's closure: every direct way out fails from an --internal network, with live controls on an
// ordinary bridge network that prove the same probe does get out where nothing stops it.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/executor/engine"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/planner"
)

// hostListeners are a TCP listener and a UDP echo on every host address, counting what reaches them.
type hostListeners struct {
	tcpPort, udpPort int
	tcpHits, udpHits atomic.Int64
}

func newHostListeners(t *testing.T) *hostListeners {
	t.Helper()
	h := &hostListeners{}
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	h.tcpPort = ln.Addr().(*net.TCPAddr).Port
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			h.tcpHits.Add(1)
			c.Close()
		}
	}()
	pc, err := net.ListenPacket("udp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	h.udpPort = pc.LocalAddr().(*net.UDPAddr).Port
	go func() {
		b := make([]byte, 1500)
		for {
			n, addr, err := pc.ReadFrom(b)
			if err != nil {
				return
			}
			h.udpHits.Add(1)
			pc.WriteTo(b[:n], addr)
		}
	}()
	return h
}

// createNetwork makes a bridge network through the Engine API with driver options (the executor's wrapper takes
// none), removed when the test ends, and returns its gateway address.
func createNetwork(t *testing.T, f *fixture, api *engineAPI, internal bool, options map[string]string) (name, gateway string) {
	t.Helper()
	name = "kewplan-test-" + randomSuffix()
	body, _ := json.Marshal(map[string]any{"Name": name, "Driver": "bridge", "Internal": internal, "Options": options,
		"Labels": map[string]string{"kewplan.test": "1"}, "CheckDuplicate": true})
	resp, err := api.c.Post(api.base+"/v1.41/networks/create", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create network %s: HTTP %d", name, resp.StatusCode)
	}
	t.Cleanup(func() { _ = f.eng.RemoveNetwork(context.Background(), name) })
	return name, networkGateway(t, api, name)
}

func networkGateway(t *testing.T, api *engineAPI, name string) string {
	t.Helper()
	var n struct {
		IPAM struct{ Config []struct{ Gateway string } }
	}
	api.get(t, "/networks/"+name, &n)
	if len(n.IPAM.Config) == 0 || n.IPAM.Config[0].Gateway == "" {
		t.Fatalf("network %s has no gateway address", name)
	}
	return n.IPAM.Config[0].Gateway
}

// publicAddress is an address the host resolves and reaches (the Go module proxy is the one place this machine may
// reach), or "" when there is none: then the live control for the internet is not available, only the host's.
func publicAddress() (name, addr string) {
	for _, n := range []string{"proxy.golang.org", "deb.debian.org"} {
		ips, err := net.LookupHost(n)
		if err != nil || len(ips) == 0 {
			continue
		}
		a := net.JoinHostPort(ips[0], "443")
		if c, err := net.DialTimeout("tcp", a, 5*time.Second); err == nil {
			c.Close()
			return n, a
		}
	}
	return "", ""
}

func egressPrompt(gateway string, h *hostListeners, name, public string) string {
	p := fmt.Sprintf("mode=egress\nhost=%s\nudp=%s\nverdict=approve", net.JoinHostPort(gateway, fmt.Sprint(h.tcpPort)), net.JoinHostPort(gateway, fmt.Sprint(h.udpPort)))
	if name != "" {
		p += "\nname=" + name + "\npublic=" + public
	}
	return p
}

func blocked(s string) bool {
	return s != "connected" && !strings.HasPrefix(s, "answered")
}

// TestAdvEgress (D3-D5): from the allowlist network every direct way out fails.
func TestAdvEgress(t *testing.T) {
	f := advFixture(t)
	api := newEngineAPI(t)
	h := newHostListeners(t)
	name, public := publicAddress()

	// The network as kewplan recommends it: --internal, and no host address on its bridge.
	closed, closedGW := createNetwork(t, f, api, true, map[string]string{"com.docker.network.bridge.inhibit_ipv4": "true"})
	f.network = closed
	cfg := f.config(advNode("egress", "reviewer", egressPrompt(closedGW, h, name, public), "  timeout = \"2m\"\n"))
	sr := &startRecorder{}
	sum, _, err := f.apply(context.Background(), cfg, withStartRecorder(sr))
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum.RunID)
	res := resultOf(t, sum, f.node("egress"))
	r := agentReport(t, res)

	// Live control: the same probe on an ordinary bridge network gets out.
	open, openGW := createNetwork(t, f, api, false, nil)
	f.network = open
	ctl := probeRun(t, f, egressPrompt(openGW, h, name, public), func(*engine.ContainerSpec) {})
	f.network = closed

	t.Run("D3", func(t *testing.T) {
		c := adv(t, "D3", "direct egress: TCP to public addresses and the host, UDP 53 and 443 (QUIC), ICMP, IPv6",
			"all fail from the allowlist network; the live control on a plain bridge reaches the host")
		for _, k := range []string{"host_tcp", "host_udp", "tcp_resolved_public", "tcp_public_443", "tcp_public_80", "tcp_ipv6_443", "udp_dns_public", "udp_quic_443", "icmp"} {
			if _, ok := r[k]; !ok {
				continue
			}
			c.check(blocked(reportString(r, k)), "%s: %s", k, reportString(r, k))
		}
		c.check(reportString(ctl, "host_tcp") == "connected", "control on a plain bridge: host_tcp %s", reportString(ctl, "host_tcp"))
		if public != "" {
			c.observe("control: tcp to %s (%s) %s", name, public, reportString(ctl, "tcp_resolved_public"))
		}
		c.check(!strings.Contains(sr.text(), "host an address"), "no host-address warning for a network without one")
	})
	t.Run("D4", func(t *testing.T) {
		c := adv(t, "D4", "resolve an external name through Docker's embedded DNS on the allowlist network",
			"no answer (REFUSED, SERVFAIL or timeout): the CVE-2024-29018 regression check")
		ans := reportString(r, "embedded_dns_answer")
		c.check(!strings.Contains(ans, "answers=") || strings.HasSuffix(ans, "answers=0"), "allowlist network: %s (%s)", ans, strings.TrimSpace(reportString(r, "lookup")))
		if name != "" {
			c.observe("control on a plain bridge: %s -> %s", name, reportString(ctl, "embedded_dns_answer"))
		} else {
			c.observe("this host resolves no external name, so the control cannot show a forwarded answer")
		}
	})
	t.Run("D5", func(t *testing.T) {
		c := adv(t, "D5", "unset HTTP(S)_PROXY and connect directly", "fails: the network, not a variable, is the boundary")
		c.check(blocked(reportString(r, "tcp_public_443")) && blocked(reportString(r, "tcp_resolved_public")),
			"without proxy variables: 1.1.1.1:443 %s; %s %s", reportString(r, "tcp_public_443"), public, reportString(r, "tcp_resolved_public"))
	})
	if res.Status != ledger.StatusApproved {
		t.Errorf("egress node %s: %s", res.Status, res.Reason)
	}
}

// TestAdvHostAddressOnAllowlist (D3, the host): a plain --internal network still gives the host an address on its
// bridge, and every service the host listens on is reachable there; apply must say so and how to close it.
func TestAdvHostAddressOnAllowlist(t *testing.T) {
	c := adv(t, "D3", "reach a service the host listens on, through the --internal network's gateway address",
		"blocked, or apply warns that the network gives the host an address and how to remove it")
	f := advFixture(t)
	api := newEngineAPI(t)
	h := newHostListeners(t)
	gw := networkGateway(t, api, f.network)
	cfg := f.config(advNode("hostnet", "reviewer", egressPrompt(gw, h, "", ""), "  timeout = \"2m\"\n"))
	sr := &startRecorder{}
	sum, _, err := f.apply(context.Background(), cfg, withStartRecorder(sr))
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum.RunID)
	r := agentReport(t, resultOf(t, sum, f.node("hostnet")))
	reached := !blocked(reportString(r, "host_tcp"))
	warned := ""
	for _, w := range strings.Split(sr.text(), "\n") {
		if strings.Contains(w, "inhibit_ipv4") {
			warned = w
		}
	}
	c.check(!reached || warned != "", "host listener on %s: %s (%d connections); apply warned with the run's start: %s", gw, reportString(r, "host_tcp"), h.tcpHits.Load(), warned)
}

// TestAdvOpenNetwork (D7): network = "open" is a documented opt-out; the plan says what it exposes.
func TestAdvOpenNetwork(t *testing.T) {
	c := adv(t, "D7", "network = \"open\" with a credential",
		"documented and warned in the plan (kewplan manages no host firewall); the container joins the network the argv shows")
	f := advFixture(t)
	src := fmt.Sprintf("sandbox {\n  network = \"open\"\n  memory = \"256m\"\n  images = { \"claude-code\" = %q }\n}\n", f.image) +
		fmt.Sprintf(advNode("open", "reviewer", "mode=succeed", ""), f.prefix, f.repo)
	path := filepath.Join(f.dir, "open.hcl")
	must(t, os.WriteFile(path, []byte(src), 0o644))
	cfg, diags := config.Load(path)
	if diags.HasErrors() {
		t.Fatal(config.DiagnosticsText(diags))
	}
	p := f.plan(cfg)
	warned := ""
	for _, d := range p.Diagnostics {
		if d.Severity == hcl.DiagWarning && strings.Contains(d.Summary, "open network") {
			warned = d.Summary + ": " + d.Detail
		}
	}
	c.check(warned != "", "the plan warns: %s", warned)
	np := p.Node(f.node("open"))
	c.check(np != nil && np.Container != nil && np.Container.Network == planner.OpenNetwork, "the argv says --network %s", planner.OpenNetwork)
	c.observe("open mode joins kewplan's own user-defined bridge %s (inter-container traffic off, created by apply when missing), "+
		"not Docker's default docker0; kewplan manages no DOCKER-USER rules, so the host's address on that bridge is reachable", planner.OpenNetwork)
}
