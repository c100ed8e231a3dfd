package egress

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
)

// The broker's state across a restart of the proxy. When the configuration names a StateFile, the proxy keeps in
// it what its configuration cannot give a new process: each brokered node's current attempt, both of its meters
// (the attempt's and the node's across attempts: calls, usage, the reservations of its open calls) and whether it
// ended. Placeholders, secrets and caps are not in it: they come again with the same configuration. The file is
// written before a model call goes out (so that a call the provider may bill is never forgotten) and after each
// call ends, attempt starts and node ends; a new proxy given the same configuration reads it and goes on from
// there. A call that was open when the old proxy died counts as unsettled at its reservation, its worst case: a
// budget holds across the restart, since nothing spent before it is forgotten.

// maxStateBytes bounds the state file read back: a few hundred bytes per node.
const maxStateBytes = 4 << 20

// stateFile is the broker's state file: its path and the writer's lock (snapshots are taken under it, so the
// last file written is the latest snapshot).
type stateFile struct {
	path string
	mu   sync.Mutex
}

// brokerState is the state file's document.
type brokerState struct {
	Nodes map[string]nodeState `json:"nodes"`
}

// nodeState is one brokered node's state.
type nodeState struct {
	Ended   bool       `json:"ended,omitempty"`
	Attempt meterState `json:"attempt"`
	Total   meterState `json:"total"`
}

// meterState is one nodeMeter.
type meterState struct {
	Number     int         `json:"number,omitempty"` // the attempt (0 for the node's total)
	Calls      int64       `json:"calls"`
	Usage      BrokerUsage `json:"usage"`
	AnyCost    bool        `json:"any_cost,omitempty"`
	CostGaps   bool        `json:"cost_gaps,omitempty"`
	OpenCalls  int64       `json:"open_calls,omitempty"`
	OpenTokens int64       `json:"open_tokens,omitempty"`
	OpenUSD    float64     `json:"open_usd,omitempty"`
	Unsettled  int64       `json:"unsettled,omitempty"`
}

func (m *nodeMeter) snapshot() meterState {
	m.mu.Lock()
	defer m.mu.Unlock()
	return meterState{Number: m.attempt, Calls: m.calls, Usage: m.usage, AnyCost: m.anyCost, CostGaps: m.costGaps,
		OpenCalls: m.openCalls, OpenTokens: m.openTokens, OpenUSD: m.openUSD, Unsettled: m.unsettled}
}

// restore sets the meter from a saved one. The calls that were open are over (their proxy died with them): they
// stay summed at their reservations, as unsettled calls do.
func (m *nodeMeter) restore(s meterState) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.attempt = s.Number
	m.calls, m.usage, m.anyCost, m.costGaps, m.unsettled = s.Calls, s.Usage, s.AnyCost, s.CostGaps, s.Unsettled
	m.usage.InputTokens += s.OpenTokens // a reservation's tokens, input and output, as Tokens() counts them
	if s.OpenUSD > 0 {
		m.usage.CostUSD += s.OpenUSD
		m.anyCost = true
	}
	m.unsettled += s.OpenCalls
	m.openCalls, m.openTokens, m.openUSD = 0, 0, 0
}

// saveState writes the broker's state file (nothing when the configuration names none).
func (s *Server) saveState() error {
	if s.broker == nil || s.broker.state == nil {
		return nil
	}
	st := s.broker.state
	st.mu.Lock()
	defer st.mu.Unlock()
	doc := brokerState{Nodes: map[string]nodeState{}}
	for name, bn := range s.broker.nodes {
		doc.Nodes[name] = nodeState{Ended: bn.ended.Err() != nil, Attempt: bn.meter.Load().snapshot(), Total: bn.total.snapshot()}
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	tmp := st.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("egress proxy: save the broker's state: %w", err)
	}
	if err := os.Rename(tmp, st.path); err != nil {
		return fmt.Errorf("egress proxy: save the broker's state: %w", err)
	}
	return nil
}

// stateSaved saves the state after a change that a later save also covers: a failure is reported on the
// proxy's stderr, and the file keeps the state before it (an open reservation then still counts as spent).
func (s *Server) stateSaved() {
	if err := s.saveState(); err != nil {
		fmt.Fprintln(s.opts.stderr(), err)
	}
}

// loadState reads the state file into the broker's nodes; a missing file is a first start. A file that names a
// node the configuration does not broker, or that is not the broker's document, is refused: the proxy does not
// start rather than forget what was spent.
func (s *Server) loadState() (restored bool, err error) {
	st := s.broker.state
	f, err := os.Open(st.path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("egress proxy: read the broker's state: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxStateBytes+1))
	if err != nil {
		return false, fmt.Errorf("egress proxy: read the broker's state: %w", err)
	}
	if len(data) > maxStateBytes {
		return false, fmt.Errorf("egress proxy: the broker's state file %s is larger than %d MiB", st.path, maxStateBytes>>20)
	}
	var doc brokerState
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil || dec.More() {
		return false, fmt.Errorf("egress proxy: the broker's state file %s is not the broker's state (%v); remove it only if no node of the run has spent anything", st.path, err)
	}
	for name := range doc.Nodes {
		if s.broker.nodes[name] == nil {
			return false, fmt.Errorf("egress proxy: the broker's state file %s names node %q, which the configuration does not broker", st.path, clip(name))
		}
	}
	for name, ns := range doc.Nodes {
		bn := s.broker.nodes[name]
		bn.total.restore(ns.Total)
		m := &nodeMeter{}
		m.restore(ns.Attempt)
		if m.attempt < 1 {
			m.attempt = 1
		}
		bn.meter.Store(m)
		if ns.Ended {
			bn.endOnce.Do(bn.end)
		}
	}
	return true, nil
}

// Restored reports whether the proxy went on from a state file a proxy before it wrote.
func (s *Server) Restored() bool { return s.broker != nil && s.broker.restored }

func (o Options) stderr() io.Writer {
	if o.Stderr != nil {
		return o.Stderr
	}
	return os.Stderr
}
