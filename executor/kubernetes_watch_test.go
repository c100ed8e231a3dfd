package executor

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	k8stesting "k8s.io/client-go/testing"

	"github.com/kewplan/kewplan/executor/ledger"
)

// reads counts the get and list requests kewplan sent (watches apart).
func reads(k *kubelet) int {
	n := 0
	for _, a := range k.cs.Actions() {
		if a.GetVerb() == "get" || a.GetVerb() == "list" {
			n++
		}
	}
	return n
}

// TestKubernetesWaitDoesNotPoll: a wide fan-out of nodes whose pods never start costs the API server no reads
// while they wait: the nodes' waits read the run's watch, not the API, so reads do not grow with nodes × seconds.
func TestKubernetesWaitDoesNotPoll(t *testing.T) {
	const nodes = 20
	k := newKubelet(t, func(string, int) simRun { return simRun{pending: true} })
	var hcl strings.Builder
	for i := 0; i < nodes; i++ {
		hcl.WriteString(strings.ReplaceAll(fmt.Sprintf(k8sFixNode, ""), `node "fix"`, fmt.Sprintf(`node "fix%d"`, i)))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan *k8sApply, 1)
	go func() {
		done <- applyK8s(ctx, t, k, hcl.String(), func(o *ApplyOptions) { o.Parallelism = nodes })
	}()
	// Every node's Job is created; then the nodes wait.
	deadline := time.Now().Add(time.Minute)
	for len(k.jobNames()) < nodes {
		if time.Now().After(deadline) {
			t.Fatalf("%d Jobs created, want %d", len(k.jobNames()), nodes)
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	before := reads(k)
	time.Sleep(2 * time.Second)
	during := reads(k) - before
	cancel()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.sum.Status != ledger.RunCancelled {
		t.Errorf("run %s, want cancelled", r.sum.Status)
	}
	// Polling would be 3 reads per node per interval; the watch needs none.
	if during != 0 {
		var verbs []string
		for _, a := range k.cs.Actions()[before:] {
			if a.GetVerb() == "get" || a.GetVerb() == "list" {
				verbs = append(verbs, a.GetVerb()+" "+a.GetResource().Resource)
			}
		}
		t.Errorf("%d reads in 2 s while %d nodes waited (%v), want none", during, nodes, verbs)
	}
	watches := 0
	for _, a := range k.cs.Actions() {
		if _, ok := a.(k8stesting.WatchAction); ok {
			watches++
		}
	}
	if watches != 3 {
		t.Errorf("%d watches opened, want one each for the run's Jobs, pods and events", watches)
	}
}
