// Package conform checks that an agent image honours the container entrypoint contract: Smoke runs the image's
// agent once with a probe prompt and reads its stream, Run inspects the image and probes it from inside a hardened
// container, row by row. Each row's Status (PASS, FAIL, NOT VERIFIABLE) is its own type, apart from the node
// outcomes the ledger records. It runs containers only through executor/engine and never touches a plan's nodes.
package conform
