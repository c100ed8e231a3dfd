package kubernetes

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/kewplan/kewplan/egress"
	"github.com/kewplan/kewplan/executor/adapter"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/k8sengine"
	"github.com/kewplan/kewplan/k8srender"
	"github.com/kewplan/kewplan/planner"
)

// kewplan's egress proxy on Kubernetes, as on Docker: apply mints the proxy's control secret per run (it is in the
// proxy's configuration, in the proxy's Secret, and nowhere else), ends each brokered node on the proxy's control
// endpoint once its last attempt is over and starts each retry there, and reads the proxy's decision log (its
// pod's log) into the ledger: denials, brokered requests and the proxy's meter of them. Apply reaches the control
// endpoint from outside the cluster through the API server's service proxy (services/proxy on the proxy's
// Service): no port of the proxy is exposed, and the request is authorised by the cluster like every other call
// apply makes. The API server keeps no Authorization header, so the secret travels in
// egress.ControlSecretHeader.

// controlTimeout bounds one call on the proxy's control endpoint; syncTimeout the wait for the proxy's log to
// carry the mark of an attempt's end.
const (
	controlTimeout = 10 * time.Second
	syncTimeout    = 10 * time.Second
)

// proxyState is what apply keeps of kewplan's proxy once the run's shared objects are applied.
type proxyState struct {
	service string            // the proxy's Service
	control string            // the control endpoint's secret ("" when no node is brokered)
	brokers map[string]string // brokered node -> its proxy user
	log     *adapter.ProxyLog // the proxy's decision log, read into the ledger
	stop    context.CancelFunc
	done    sync.WaitGroup
}

// startProxyLog follows the decision log of every container of the proxy's pods into the ledger, each once,
// until the run ends (stopProxyLog).
func (e *Engine) startProxyLog(ps *proxyState, users map[string]string) {
	ps.log = adapter.NewProxyLog(e.run, users)
	ctx, stop := context.WithCancel(context.Background())
	ps.stop = stop
	ps.done.Add(1)
	go func() {
		defer ps.done.Done()
		followed := map[k8sengine.Running]bool{}
		for {
			changed := e.watch.Changed()
			for _, r := range e.watch.RunningContainers(k8srender.StepEgressProxy, k8srender.StepEgressProxy) {
				if followed[r] {
					continue
				}
				followed[r] = true
				rc, err := e.opts.Cluster.OpenLog(ctx, r.Pod, k8srender.StepEgressProxy)
				if err != nil {
					if ctx.Err() == nil {
						e.run.Warn("", fmt.Sprintf("could not read the egress proxy's decision log, so its denials and its meter of brokered requests are not recorded: %v", err))
					}
					continue
				}
				_, _ = io.Copy(ps.log, rc) // ends with the container, or at the run's end
				rc.Close()
				ps.log.Flush()
			}
			select {
			case <-ctx.Done():
				return
			case <-changed:
			}
		}
	}()
}

// stopProxyLog ends the following of the proxy's log, once the proxy is gone.
func (e *Engine) stopProxyLog() {
	if ps := e.proxy.Load(); ps != nil && ps.stop != nil {
		ps.stop()
		ps.done.Wait()
	}
}

// brokered is the proxy user of a brokered node whose proxy apply controls, "" for any other node.
func (e *Engine) brokered(np *planner.NodePlan) string {
	ps := e.proxy.Load()
	if ps == nil || ps.control == "" {
		return ""
	}
	return ps.brokers[np.Name]
}

// control makes one call on the proxy's control endpoint: path is after egress.ControlEndNodePath.
func (e *Engine) control(ctx context.Context, path string) error {
	ctx, cancel := context.WithTimeout(ctx, controlTimeout)
	defer cancel()
	ps := e.proxy.Load()
	return e.opts.Cluster.ProxyControl(ctx, ps.service, int(e.opts.Engine.ProxyPort), egress.ControlEndNodePath+path,
		http.Header{egress.ControlSecretHeader: {ps.control}})
}

// NodeEnded tells the proxy that a brokered node has ended: its placeholders are refused from then on, from any
// pod.
func (e *Engine) NodeEnded(ctx context.Context, np *planner.NodePlan) {
	user := e.brokered(np)
	if user == "" {
		return
	}
	if err := e.control(ctx, user+"/end"); err != nil {
		e.run.Warn(np.Name, fmt.Sprintf("could not tell the egress proxy that the node ended, so its placeholders stay usable until the run ends or its backstop passes: %v", err))
	}
}

// attemptStarts tells the proxy that a brokered node's retry starts, so that its sums and caps start again from
// zero as the attempt's budget does. A retry whose proxy cannot be told does not start: its caps at the proxy
// would still hold the earlier attempts' spend.
func (e *Engine) attemptStarts(ctx context.Context, at *adapter.Attempt) *adapter.Failure {
	user := e.brokered(at.Node)
	if at.Number <= 1 || user == "" {
		return nil
	}
	if err := e.control(ctx, user+"/attempts/"+strconv.Itoa(at.Number)); err != nil {
		return adapter.Failed(ledger.StatusFailed, fmt.Sprintf("attempt %d did not start: %v", at.Number, err))
	}
	return nil
}

// syncProxyLog waits, once a brokered node's agent has ended, until the proxy's log has been read up to now, so
// that the attempt's record holds the proxy's meter of every request the proxy had answered: it makes a control
// call no node answers to and waits for its line.
func (e *Engine) syncProxyLog(at *adapter.Attempt) {
	if e.brokered(at.Node) == "" {
		return
	}
	ps := e.proxy.Load()
	nonce, err := egress.NewSecret()
	if err != nil {
		return
	}
	path := "kewplan-sync-" + nonce[:16] + "/end"
	mark := ps.log.Await(egress.ControlEndNodePath + path)
	_ = e.control(context.Background(), path) // the proxy answers 404: no node has the name
	t := time.NewTimer(syncTimeout)
	defer t.Stop()
	select {
	case <-mark:
	case <-t.C:
		at.Warn(fmt.Sprintf("the egress proxy's decision log did not catch up within %s, so the proxy's meter of this attempt may miss its last requests", syncTimeout))
	}
}
