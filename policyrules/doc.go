// Package policyrules evaluates an organisation's policy rules (the `rule` blocks of a policy, which config
// parses) against a plan document and its change against a base plan: it builds the `plan` and `change` objects
// a condition sees, evaluates each condition with a fixed set of pure functions and a bounded cost, and returns
// each match as a finding (deny, warn or review) with the rule's name as its id.
//
// It reads no file, no environment and nothing but the values it is given, and prints nothing: commands decide
// what a finding does (plan exits 1 on deny, apply asks for approvals on review) and views render the findings
// as the diagnostics they become.
package policyrules
