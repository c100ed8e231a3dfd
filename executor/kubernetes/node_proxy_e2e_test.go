package kubernetes_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/executor/statedir"
	"github.com/kewplan/kewplan/k8srender"
)

// modelCallStatuses are the statuses of the fake agent's mode=modelcalls events in an attempt's log.
func modelCallStatuses(t *testing.T, path string) []string {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	var out []string
	sc := bufio.NewScanner(fh)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev map[string]any
		if json.Unmarshal(sc.Bytes(), &ev) == nil && ev["subtype"] == "model_call" {
			out = append(out, fmt.Sprint(ev["status"]))
		}
	}
	return out
}

// TestNodeProxyControlAndMeters: on a real cluster, kewplan's proxy is controlled and read as on Docker. A
// brokered node whose agent spends 400,050 tokens of its max_tokens 500,000 and then meets an overloaded API is
// retried: apply starts attempt 2 at the proxy, so the retry's two calls are answered instead of refused on the
// first attempt's spend. The proxy's decision log reaches the ledger: each attempt's brokered requests and the
// proxy's meter of each attempt beside the agent's. Once the node has ended, while its dependent still runs, its
// placeholder is refused by the proxy.
func TestNodeProxyControlAndMeters(t *testing.T) {
	const realKey = "sk-ant-node-real-key-0123456789"
	e, ctx, ns, repo, _ := begin(t, 10*time.Minute, map[string]string{"ANTHROPIC_API_KEY": realKey})
	e.setModel(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"msg_node","type":"message","model":"claude-sonnet-4-5","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":200000,"output_tokens":25}}`)
	}))
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, e.caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	src := strings.Replace(e.config(ns, repo, `
node "spend" {
  runner  = "claude-code"
  model   = "claude-sonnet-4-5"
  role    = "reviewer"
  repo    = "REPO"
  ref     = "main"
  prompt  = "mode=modelcalls\ncalls=2\nthen=apierror\nfinal_usage=none\ntokens=none\ncost=none"
  timeout = "3m"
  budget {
    max_tokens = 500000
  }
  retry {
    attempts = 2
    backoff  = "1s"
  }
}
node "after" {
  runner     = "claude-code"
  model      = "claude-sonnet-4-5"
  role       = "reviewer"
  repo       = "REPO"
  ref        = "main"
  prompt     = "mode=hang"
  timeout    = "4m"
  depends_on = [node.spend]
}
`), `private_hosts = ["`+gitHost+`"]`, `private_hosts = ["`+gitHost+`", "`+modelHost+`"]
    upstream_ca_file = "`+caFile+`"`, 1)
	src = strings.Replace(src, `allow         = ["`+gitHost+`:443"]`, `allow         = ["`+gitHost+`:443", "`+modelHost+`"]`, 1)

	applyCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	probe := make(chan string, 1)
	go func() {
		defer cancel()
		// Once the dependent's agent runs, spend has ended: present its placeholder to the proxy, from outside
		// its pod, through the API server's service proxy.
		err := wait.PollUntilContextCancel(applyCtx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			pods, err := e.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: k8srender.LabelStep + "=" + k8srender.StepAgent})
			if err != nil {
				return false, nil
			}
			for _, p := range pods.Items {
				if !strings.HasPrefix(p.Name, "kew-after-") {
					continue
				}
				for _, st := range p.Status.InitContainerStatuses {
					if st.Name == k8srender.StepAgent && st.State.Running != nil {
						return true, nil
					}
				}
			}
			return false, nil
		})
		if err != nil {
			probe <- "the dependent never ran: " + err.Error()
			return
		}
		probe <- e.presentPlaceholder(applyCtx, t, ns, "spend")
	}()
	a := e.apply(t, applyCtx, ns, src)
	if a.err != nil {
		t.Fatal(a.err)
	}
	if got := <-probe; !strings.HasPrefix(got, "403 ") || !strings.Contains(got, `node \"spend\" ended`) {
		t.Errorf("spend's placeholder after spend ended: %s; want 403 saying the node ended", got)
	}
	spend := a.node(t, "spend")
	if spend.Status != ledger.StatusFailed || spend.Attempts != 2 {
		t.Errorf("spend: %s after %d attempts (%s); want failed on api_error after 2", spend.Status, spend.Attempts, spend.Reason)
	}

	l, err := ledger.Open(statedir.Dir{Root: a.stateDir}.Ledger())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	attempts, err := l.Attempts(a.sum.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if len(attempts["spend"]) != 2 {
		t.Fatalf("%d attempts of spend recorded, want 2", len(attempts["spend"]))
	}
	for i, at := range attempts["spend"] {
		if got := modelCallStatuses(t, at.StdoutLog); strings.Join(got, ",") != "200,200" {
			t.Errorf("attempt %d: model calls answered %v, want 200 twice (the proxy's sums start again each attempt)", i+1, got)
		}
	}
	reqs, err := l.BrokerRequests(a.sum.RunID)
	if err != nil {
		t.Fatal(err)
	}
	var byAttempt []int
	for _, r := range reqs {
		if r.Node == "spend" {
			byAttempt = append(byAttempt, r.Attempt)
		}
	}
	if fmt.Sprint(byAttempt) != "[1 1 2 2]" {
		t.Errorf("spend's brokered requests by attempt %v, want [1 1 2 2]", byAttempt)
	}
	meters, err := l.Meters(a.sum.RunID)
	if err != nil {
		t.Fatal(err)
	}
	var per []string
	for _, m := range meters {
		if m.Node == "spend" {
			per = append(per, fmt.Sprintf("%d:%d", m.Attempt, m.Proxy.Tokens))
		}
	}
	if fmt.Sprint(per) != "[1:400050 2:400050]" {
		t.Errorf("spend's proxy meter by attempt %v, want 400,050 tokens in each of attempts 1 and 2", per)
	}
	a.leftovers(t)
}

// presentPlaceholder sends a brokered request with node's placeholder (read from the run's proxy Secret) to the
// run's proxy through the API server's service proxy, and returns the answer's status and body.
func (e *nodeEnv) presentPlaceholder(ctx context.Context, t *testing.T, ns, node string) string {
	secrets, err := e.cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: k8srender.LabelStep + "!=" + k8srender.StepAgent})
	if err != nil {
		return err.Error()
	}
	for _, s := range secrets.Items {
		base, ok := s.Data[k8srender.BaseURLKey(node)]
		if !ok {
			continue
		}
		u, err := url.Parse(string(base))
		if err != nil {
			return err.Error()
		}
		ph := string(s.Data[k8srender.PlaceholderKey(node, "ANTHROPIC_API_KEY")])
		cfg := e.restConfig()
		hc, err := rest.HTTPClientFor(cfg)
		if err != nil {
			return err.Error()
		}
		target := strings.TrimRight(cfg.Host, "/") + "/api/v1/namespaces/" + ns + "/services/" + s.Name + ":3128/proxy" + u.Path + "/v1/models"
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
		if err != nil {
			return err.Error()
		}
		req.Header.Set("x-api-key", ph)
		res, err := hc.Do(req)
		if err != nil {
			return fmt.Sprintf("no answer: %v", err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
		return fmt.Sprintf("%d %s", res.StatusCode, body)
	}
	return "no proxy Secret with " + node + "'s base URL"
}
