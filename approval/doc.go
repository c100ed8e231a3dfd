// Package approval binds an apply to the people who approved its plan, and records what the apply ran. An
// approval is an SSH signature (the SSHSIG format of `ssh-keygen -Y sign` and git) over a saved plan's digest, in
// the namespace "kewplan-plan", by a key listed in an allowed signers file (git's format); the approvals of a
// plan live beside it in PLANFILE.approvals. A receipt is the JSON record of one apply (the plan digest, its
// approvals, and per node what ran and what came of it), signed in the namespace "kewplan-receipt" beside it as
// RECEIPT.sig.
//
// The package signs, reads and checks; it decides nothing about when approvals are required (the policy and
// apply do) and it never prints. An agent's key and a person's key are told apart only by the allowed signers
// file, so that file must live where no agent can write.
package approval
