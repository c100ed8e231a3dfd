package executor

import (
	"context"
	"sync"
	"time"

	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/planner"
)

// --parallelism bounds the nodes that run at once: from the moment a node's container is about to start until the
// node is done. The host-side work before that (re-plan, clone, prompt) need not wait: runGraph starts lookahead
// nodes more than Parallelism, so the next ready node clones its checkout while the running ones' containers run,
// and starts its container as soon as a slot is free. A serial apply thus costs what its containers cost, not
// containers plus clones. Slots are granted in the order runGraph started the nodes (plan order), so a node that
// cloned faster never overtakes one before it.
const lookahead = 1

// slotQueue grants Parallelism slots in ticket order.
type slotQueue struct {
	mu      sync.Mutex
	cond    *sync.Cond
	free    int
	issued  int          // tickets issued so far
	serving int          // the lowest ticket not yet served or withdrawn
	settled map[int]bool // tickets above serving already served or withdrawn
	nodes   map[string]*nodeSlot
}

// nodeSlot is one started node's place in the queue.
type nodeSlot struct {
	ticket          int
	held, announced bool
	settled         bool // served or withdrawn
}

func newSlotQueue(parallelism int) *slotQueue {
	q := &slotQueue{free: parallelism, settled: map[int]bool{}, nodes: map[string]*nodeSlot{}}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// enqueue gives the node the next ticket; runGraph calls it in the order it starts nodes.
func (q *slotQueue) enqueue(node string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.nodes[node] = &nodeSlot{ticket: q.issued}
	q.issued++
}

// settle marks the node's ticket served or withdrawn and lets the next tickets through. q.mu is held.
func (q *slotQueue) settle(s *nodeSlot) {
	if s.settled {
		return
	}
	s.settled = true
	q.settled[s.ticket] = true
	for q.settled[q.serving] {
		delete(q.settled, q.serving)
		q.serving++
	}
	q.cond.Broadcast()
}

// acquire waits until every node started before this one has its slot (or ended without one) and a slot is free.
// It reports whether the slot was taken for the first time; false with ctx's error when ctx ended first.
func (q *slotQueue) acquire(ctx context.Context, node string) (first bool, err error) {
	stop := context.AfterFunc(ctx, func() {
		q.mu.Lock()
		q.cond.Broadcast()
		q.mu.Unlock()
	})
	defer stop()
	q.mu.Lock()
	defer q.mu.Unlock()
	s := q.nodes[node]
	if s == nil || s.held {
		return false, nil
	}
	for s.ticket != q.serving || q.free == 0 {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		q.cond.Wait()
	}
	q.free--
	s.held = true
	q.settle(s)
	return true, nil
}

// announce reports whether the node's start is still to be announced, and marks it announced.
func (q *slotQueue) announce(node string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := q.nodes[node]
	if s == nil || s.announced {
		return false
	}
	s.announced = true
	return true
}

// release frees the node's slot, if it holds one, and withdraws its ticket if it never took one.
func (q *slotQueue) release(node string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := q.nodes[node]
	if s == nil {
		return
	}
	delete(q.nodes, node)
	if s.held {
		q.free++
	}
	q.settle(s)
	q.cond.Broadcast()
}

// takeSlot waits for the node's slot and announces its start. A node holds its slot across retries, so a later
// attempt takes none. It returns the failure to record when the apply is cancelled while the node waits.
func (a *applier) takeSlot(ctx context.Context, np *planner.NodePlan, res *ledger.NodeResult) *nodeFailure {
	first, err := a.slots.acquire(ctx, np.Name)
	if err != nil {
		return failed(ledger.StatusCancelled, "the apply was cancelled while the node waited for a free slot (--parallelism)")
	}
	if !first {
		return nil
	}
	// The apply-wide budget may have been crossed while the node waited: it is not started, as runGraph would not
	// have started it.
	if d, over := a.budget.exceeded(); over {
		return failed(ledger.StatusSkipped, applyStopReason(d))
	}
	// So may the engine have been lost (enginelost.go).
	if a.engineLost() != nil {
		return failed(ledger.StatusSkipped, notStartedEngineLost)
	}
	a.announceStart(np, res)
	return nil
}

// announceStart sends the node's NodeStart event once: when it takes its slot, or just before its NodeDone when it
// failed before its container could start (a failed clone). A node skipped or cancelled before it took a slot
// gets no NodeStart, as a node runGraph never started.
func (a *applier) announceStart(np *planner.NodePlan, res *ledger.NodeResult) {
	if a.slots.announce(np.Name) {
		a.hook.NodeStart(NodeStartEvent{RunID: a.runID, Node: np.Name, Runner: res.Runner, Image: res.Image, Model: res.Model, Time: time.Now()})
	}
}
