// Package plandiff compares two plans (saved plans or `kewplan plan --json` documents) for a pull request: which
// nodes were added, removed or changed, a word-level diff of every changed argv, and the credential exposure
// delta, in which every change that lets a prompt-injected agent reach more (a credential reaching a node it did
// not reach, open egress, a lost hardening flag, an image off its pinned digest) is marked as widening.
//
// It is pure: it decodes the bytes it is given and compares; it reads no file and prints nothing. The views
// render a Diff; the organisation policy lives in planner.CheckPolicy.
package plandiff
