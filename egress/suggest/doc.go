// Package suggest turns a run's recorded egress denials into the egress allow entries that would have let them
// through: one list for the sandbox (the hosts every node of a run of several node blocks asked for) and one per
// node block (the rest), ports kept. It is pure and widens nothing: a human reviews what it proposes and writes it
// into the configuration.
package suggest
