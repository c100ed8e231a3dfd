// Command advreport prints the adversarial suite's table: one row per item of the security notes'
// checklist (§6), with what the tests observed and whether kewplan held. `make adversarial` runs it.
//
// Two sources feed the table. The suite's own tests (executor/adversarial*_test.go) append JSON rows to the file
// $KEWPLAN_ADV_REPORT names. Items that existing tests already cover name those tests here, and their outcome is
// read from `go test -json` output. An item passes when every row and every named test passes; it is NOT TRIED
// when its only evidence is a recorded reason it cannot be tried here; it FAILS when anything failed or when no
// evidence at all arrived (a renamed test, a crashed binary).
//
//	advreport -pattern                       the -run pattern selecting every test the table needs
//	advreport -rows FILE -events FILE [-wide] the table and its totals; exit status 1 when an item failed
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
)

// item is one checklist entry. Tests are "package.TestName" (package is the last path element) of existing tests
// that cover it, run and judged by name; own tests report rows under ID. NotTried is the reason an item cannot
// be tried on any machine kewplan supports today.
type item struct {
	ID, Attack, Expected string
	Tests                []string
	NotTried             string
}

var catalogue = []item{
	{ID: "A1", Attack: "verdict sidecar is a symlink to an absolute host path", Expected: "refused; the target is never read; fail closed",
		Tests: []string{"verdict.TestCollectVerdictSymlinks"}},
	{ID: "A2", Attack: "verdict sidecar is a relative link out of the checkout", Expected: "refused; fail closed",
		Tests: []string{"verdict.TestCollectVerdictSymlinks"}},
	{ID: "A3", Attack: "verdict sidecar is an in-checkout link to an approving file", Expected: "refused (a role file is never a link); fail closed",
		Tests: []string{"verdict.TestCollectVerdictSymlinks", "verdict.TestCollectVerdictLinkedDirectoryIsNotSearched"}},
	{ID: "A4", Attack: "verdict sidecar is a FIFO with no writer", Expected: "returns at once; not regular; fail closed",
		Tests: []string{"verdict.TestCollectVerdictFIFO"}},
	{ID: "A5", Attack: "verdict sidecar is a directory or a socket", Expected: "fail closed",
		Tests: []string{"verdict.TestCollectVerdictDirectoryAndSocket"}},
	{ID: "A6", Attack: "verdict sidecar is 1 GiB, or a 1 TiB sparse file", Expected: "reads at most cap+1 bytes; bounded memory; fail closed",
		Tests: []string{"verdict.TestCollectVerdictSize"}},
	{ID: "A7", Attack: "malformed verdict: empty, whitespace, truncated, BOM, NUL, invalid UTF-8, deep nesting", Expected: "fail closed, no panic",
		Tests: []string{"verdict.TestCollectVerdictUnparseable", "verdict.TestDecodeVerdictRefuses", "verdict.FuzzDecodeVerdict"}},
	{ID: "A8", Attack: "ambiguous verdict: duplicate or case-variant keys, unknown field, second value, trailing garbage", Expected: "fail closed, never last-key-wins (control: encoding/json is ambiguous)",
		Tests: []string{"verdict.TestDecodeVerdictRefuses", "verdict.TestDecodeVerdictStdlibIsAmbiguous"}},
	{ID: "A9", Attack: "verdict sidecar is a hard link", Expected: "refused (nlink>1) or the digest equals sha256 of the bytes parsed",
		Tests: []string{"verdict.TestCollectVerdictHardLink"}},
	{ID: "A10", Attack: "verdict rewritten late, while the container still runs", Expected: "read once, after the container is removed; digest of the parsed bytes"},
	{ID: "A11", Attack: "agent exits 0 and writes no verdict", Expected: "fail closed (held)",
		Tests: []string{"verdict.TestCollectVerdictMissing"}},
	{ID: "A12", Attack: "prompt name pre-planted as a link out of the checkout", Expected: "refused before the container starts; target unchanged",
		Tests: []string{"checkout.TestWritePromptRefusesPlantedNames"}},
	{ID: "A13", Attack: "prompt name pre-planted as a link to .git/config", Expected: "refused; .git/config not truncated",
		Tests: []string{"checkout.TestWritePromptRefusesPlantedNames"}},
	{ID: "A14", Attack: "prompt name pre-planted as a directory or FIFO", Expected: "refused; never blocks",
		Tests: []string{"checkout.TestWritePromptRefusesPlantedNames"}},
	{ID: "A15", Attack: "agent swaps the prompt for a link during the run", Expected: "deletion unlinks the link only; target intact",
		Tests: []string{"checkout.TestRemovePromptAfterAgentTampering"}},
	{ID: "A16", Attack: "agent turns the prompt into a non-empty directory", Expected: "removed inside the checkout only; reported loudly",
		Tests: []string{"checkout.TestRemovePromptAfterAgentTampering"}},
	{ID: "A17", Attack: "agent makes the checkout unreadable and unwritable", Expected: "cleanup failure reported, never ignored"},
	{ID: "A18", Attack: "prompt deleted on every exit path", Expected: "no prompt and no container after success, failure, engine error, timeout, signals, panic, bad verdict",
		Tests: []string{"executor.TestApplyAgentFailureSkipsDependents", "executor.TestApplyTimeout", "executor.TestApplyCancellation", "executor.TestApplyEngineErrorMidRun"}},
	{ID: "A19", Attack: "stale prompt and orphan container after SIGKILL of kewplan", Expected: "the next apply removes both before it starts",
		Tests: []string{"executor.TestApplySweepsADeadApply", "checkout.TestRemoveStalePrompt"}},
	{ID: "A20", Attack: "repository ships links to host paths", Expected: "no host-side walk, search or removal follows them"},
	{ID: "A21", Attack: "huge tree: deep, long names, many entries", Expected: "host walkers bounded; no overflow"},

	{ID: "B1", Attack: "core.fsmonitor in the agent's .git/config", Expected: "no sentinel after kewplan's git steps (live control fires)",
		Tests: []string{"broker.TestBrokerAttackFsmonitor"}},
	{ID: "B2", Attack: "hooks: .git/hooks/* and core.hooksPath", Expected: "no sentinel (live control fires)",
		Tests: []string{"broker.TestBrokerAttackHooks"}},
	{ID: "B3", Attack: "filter/diff drivers, diff.external, core.pager, core.sshCommand, include.path", Expected: "no sentinel (live control fires)",
		Tests: []string{"broker.TestBrokerAttackDrivers"}},
	{ID: "B4", Attack: ".git rewritten as a gitdir: pointer to another repository (and alternates)", Expected: "refused; the other repository untouched",
		Tests: []string{"broker.TestBrokerAttackGitPointer", "broker.TestBrokerAttackAlternates"}},
	{ID: "B5", Attack: "agent-owned files in .git (ownership)", Expected: "no safe.directory='*'; fails clearly or reads through a shadow",
		Tests: []string{"broker.TestBrokerAttackOwnership", "broker.TestBrokerAttackHostileRefs", "broker.TestBrokerAttackHostileObjects"}},

	{ID: "C1", Attack: "inspect a kewplan container", Expected: "docker-bench section 5 fields hold",
		Tests: []string{"executor.TestArgvIsTheTruth"}},
	{ID: "C2", Attack: "write to the root filesystem", Expected: "EROFS"},
	{ID: "C3", Attack: "tmpfs flags and the writable set", Expected: "noexec/nosuid/nodev, uid 1001 home, bounded, only the expected writable mounts"},
	{ID: "C4", Attack: "execute a binary copied to /tmp", Expected: "EACCES",
		Tests: []string{"executor.TestHardeningFromInside"}},
	{ID: "C5", Attack: "capabilities, no_new_privs, seccomp", Expected: "CapEff=0, CapBnd=0, NoNewPrivs=1, Seccomp=2"},
	{ID: "C6", Attack: "run a setuid-root binary", Expected: "euid stays 1001"},
	{ID: "C7", Attack: "namespace and mount syscalls", Expected: "EPERM"},
	{ID: "C8", Attack: "fork bomb", Expected: "capped by the pids limit; killed at the deadline; fail closed"},
	{ID: "C9", Attack: "fill tmpfs; allocate past the memory limit", Expected: "stopped inside the container; reported"},
	{ID: "C10", Attack: "fill the disk through the bind-mounted checkout", Expected: "stopped by kewplan's disk watchdog; the node fails closed; the host filesystem keeps headroom",
		Tests: []string{"docker.TestDiskWatch"}},
	{ID: "C11", Attack: "a stronger runtime: gVisor requested (missing, then present)", Expected: "missing: refused in preflight with the fix, no fallback to runc; present: the agent sees gVisor's kernel, the same hardening, its work pushed",
		Tests: []string{"executor.TestRunscApplyProbe", "executor.TestRuntimeMissingRefusedInPreflight", "conform.TestRunscSmokeAndConform"}},
	{ID: "C12", Attack: "engine and runc versions", Expected: "at or above the CVE fix floors"},

	{ID: "D1", Attack: "allowlist network missing", Expected: "refused; never falls back",
		Tests: []string{"executor.TestApplyPreflightProblems"}},
	{ID: "D2", Attack: "impostor network (same name, not --internal)", Expected: "refused"},
	{ID: "D3", Attack: "direct egress: TCP, UDP 53, QUIC, ICMP, IPv6, the host", Expected: "all fail"},
	{ID: "D4", Attack: "external name through the embedded DNS on the internal network", Expected: "no answer (CVE-2024-29018)"},
	{ID: "D5", Attack: "unset the proxy variables and connect directly", Expected: "fails"},
	{ID: "D6", Attack: "egress exfiltration through kewplan's proxy: a denied host, an IP literal, another port, another node's host, DNS",
		Expected: "each refused and recorded (node, host, port, reason, time); the allowed model endpoint works; no external name resolves",
		Tests:    []string{"executor.TestEgressProxyDoneWhen", "executor.TestAdvEgressDNS", "egress.TestConnectRefusals", "egress.TestResolvedAddressRule"}},
	{ID: "D7", Attack: "network = open", Expected: "documented and warned (kewplan manages no host firewall)"},
	{ID: "D8", Attack: "exfiltration through an allowed domain", Expected: "residual risk; only the runner's needed credentials are present",
		Tests: []string{"executor.TestHardeningFromInside"}},

	{ID: "E1", Attack: "a forwarded credential unset on the host", Expected: "never an empty override",
		Tests: []string{"executor.TestArgvIsTheTruth", "executor.TestHardeningFromInside"}},
	{ID: "E2", Attack: "malicious credential names", Expected: "rejected before docker is invoked"},
	{ID: "E3", Attack: "canary secret in the credential", Expected: "never in the process table, logs, ledger, NDJSON, errors, plan output",
		Tests: []string{"executor.TestApplyRedactsCredentialEchoes"}},
	{ID: "E4", Attack: "post-run exposure of the environment", Expected: "the container is removed, docker inspect fails"},
	{ID: "E5", Attack: "injected instructions to print or upload the token", Expected: "only the configured names were forwarded"},

	{ID: "F1", Attack: "a 10 MiB line, then valid NDJSON", Expected: "bounded memory; counted; later lines processed",
		Tests: []string{"executor.TestApplyHugeAndGarbageOutput", "runners.TestFeedOversized", "runners.TestFeedMemoryFlat"}},
	{ID: "F2", Attack: "garbage lines: invalid JSON, NUL, invalid UTF-8, truncated", Expected: "counted and skipped; no panic",
		Tests: []string{"executor.TestApplyHugeAndGarbageOutput", "runners.FuzzFeed"}},
	{ID: "F3", Attack: "terminal escapes in agent text", Expected: "sanitised before display",
		Tests: []string{"views.TestHostileStringsEscapedInViews"}},
	{ID: "F4", Attack: "flood on stdout and stderr at once", Expected: "drained concurrently; byte cap enforced; fail closed"},
	{ID: "F5", Attack: "a forged verdict or host command on stdout", Expected: "ignored; the verdict comes only from the sidecar",
		Tests: []string{"executor.TestReviewWorkerCannotPlantVerdict"}},
	{ID: "F6", Attack: "a child holds stdout open after the agent exits", Expected: "Wait returns; container removed"},
	{ID: "F7", Attack: "the agent hangs", Expected: "killed at the deadline; removed; fail closed",
		Tests: []string{"executor.TestApplyTimeout"}},
	{ID: "F8", Attack: "SIGINT / SIGTERM to kewplan", Expected: "containers killed and removed; prompts deleted; non-zero exit",
		Tests: []string{"executor.TestApplyCancellation", "executor.TestJanitorLastCleanup", "kewplan.TestApplyCommandSignals"}},
	{ID: "F9", Attack: "SIGKILL to kewplan, then a fresh start", Expected: "the orphan and the stale prompt are swept",
		Tests: []string{"executor.TestApplySweepsADeadApply"}},
	{ID: "F10", Attack: "engine unavailable; a missing image", Expected: "fail closed with a clear message",
		Tests: []string{"executor.TestApplyPreflightMissingImage", "executor.TestApplyEngineErrorMidRun"}},
	{ID: "F11", Attack: "agent exits 0 without a verdict", Expected: "fail closed"},
	{ID: "F12", Attack: "SIGKILL to kewplan apply while a worker that has committed still runs, then any command",
		Expected: "run and nodes marked interrupted as of the last record; the orphan stopped, its work kept, then removed; salvage publishes it",
		Tests:    []string{"executor.TestAdvKilledApplyKeepsWork", "executor.TestApplySweepsADeadApply", "ledger.TestMarkInterrupted", "ledger.TestProcessAlive"}},
	{ID: "F13", Attack: "apply --resume latest after a SIGKILLed apply", Expected: "succeeded nodes reused; interrupted ones run again from their kept work",
		Tests: []string{"executor.TestAdvKilledApplyKeepsWork"}},
	{ID: "F14", Attack: "SIGKILL to kewplan apply at 20 seeded random moments of a four-node apply (clone, container start, streaming, push, verdict collection, ledger write)",
		Expected: "after each: the ledger opens; no run running and no container of the apply after the next command; every commit made before the kill pushed or salvageable; apply --resume latest completes the graph; runs, runs show and the receipt say interrupted and since when",
		Tests:    []string{"executor.TestAdvKillAtRandomMoments", "executor.TestApplyWritesBeforeActing", "executor.TestApplyEngineStartFailsLeavesNoRun", "views.TestInterruptedSaysSinceWhen"}},
	{ID: "F15", Attack: "the Docker engine's socket closes mid-node (a relay the test cuts) and stays closed past the reconnect bound",
		Expected: "apply ends by itself, non-zero; the run and the running node interrupted, not failed; the node's commits kept; the message names DOCKER_HOST and apply --resume latest; salvage publishes the work",
		Tests:    []string{"engine.TestEngineLostSharedAndBounded"}},
	{ID: "F16", Attack: "apply --resume latest once the engine's socket is back", Expected: "the old run's container stopped and swept, the node that succeeded reused, the interrupted one completes"},
	{ID: "F17", Attack: "the engine's socket closes mid-node and is back within the reconnect bound",
		Expected: "the apply carries on: the container followed again, the node succeeds, its log holds the whole stream once",
		Tests:    []string{"engine.TestOutputResumesWhereItEnded"}},
	{ID: "F18", Attack: "the agent ends and its container is removed while the engine's socket is closed; back within the bound", Expected: "the exit read from the engine's events, not guessed; the node succeeds; the output written meanwhile said lost"},
	{ID: "F19", Attack: "the engine's socket closes while a proxied worker runs and is back within the bound; the worker's next CONNECT is refused", Expected: "the egress proxy's wait and decision log followed on: the proxy is not taken for dead, the refusal is recorded"},
	{ID: "F20", Attack: "the engine's socket closes as the engine answers the start of a worker's container; back within the bound",
		Expected: "the container the engine started is followed, never removed as unstarted: the node succeeds"},
	{ID: "F21", Attack: "SIGKILL to kewplan apply after a worker's push landed on the origin and before its outcome was recorded (no resume_from_salvage)",
		Expected: "the next command asks the origin about the push intent written ahead and records the node as pushed with the origin's commit; apply --resume latest reuses it and completes the graph",
		Tests:    []string{"ledger.TestPushIntent", "broker.TestBrokerBeforePushAndRemoteBranch"}},
	{ID: "F22", Attack: "SIGKILL to kewplan apply during a worker's push that the origin then refuses (no resume_from_salvage)",
		Expected: "the node stays interrupted; apply --resume latest runs it again and completes the graph"},

	{ID: "G1", Attack: "fuzz the verdict parser", Expected: "never panics; strict keys; digest of the input",
		Tests: []string{"verdict.FuzzDecodeVerdict"}},
	{ID: "G2", Attack: "fuzz the NDJSON line handling of every runner", Expected: "never panics; bounded; byte counts add up",
		Tests: []string{"runners.FuzzFeed", "runners.FuzzScan", "runners.FuzzClaudeMeter", "runners.FuzzOpencodeMeter", "runners.FuzzPiMeter", "runners.FuzzHermesMeter", "runners.FuzzLemonadeMeter"}},
	{ID: "G3", Attack: "fuzz the name validators (credentials, networks, node and container names)", Expected: "accepted set matches the rule; nothing starting with '-'",
		Tests: []string{"executor.FuzzAdvNames"}},

	// H: budgets, beyond the security checklist: a cap that fails open spends real money.
	{ID: "H1", Attack: "a stream that never reports usage", Expected: "cost recorded unknown (null), never 0; the total says so",
		Tests: []string{"executor.TestBudgetStreams"}},
	{ID: "H2", Attack: "usage only in the final event", Expected: "the cap is enforced on it: budget_exceeded, estimated cost",
		Tests: []string{"executor.TestBudgetStreams"}},
	{ID: "H3", Attack: "a message id repeated on every content block", Expected: "counted once; no false budget stop",
		Tests: []string{"executor.TestBudgetStreams", "budget.TestTracker"}},
	{ID: "H4", Attack: "an agent over its max_usd keeps running (killed mid-turn)", Expected: "killed from the live stream; budget_exceeded with the figures; logs and partial telemetry kept; exit 1",
		Tests: []string{"executor.TestBudgetNodeMaxUSDKillsTheContainer", "kewplan.TestApplyCommandBudgetExceeded"}},
	{ID: "H5", Attack: "the apply-wide max_usd crossed while three nodes run", Expected: "all three killed; nothing new starts; the rest skipped with the reason",
		Tests: []string{"executor.TestBudgetApplyWideStopsTheGraph"}},

	// I: brokered credentials: the agent holds a placeholder, the proxy adds the key.
	{ID: "I1", Attack: "read the real key from inside a brokered container (environment, /proc/1/environ, its stdout)", Expected: "only a placeholder inside; the upstream receives the real key on every request and never the placeholder",
		Tests: []string{"executor.TestBrokeredCredentialsEndToEnd", "egress.TestBrokerForwardsTheRealCredential"}},
	{ID: "I2", Attack: "reuse node A's placeholder for node B, at B's endpoint, without one, or after A ended", Expected: "refused in the API's error shape with the reason; recorded",
		Tests: []string{"egress.TestBrokerRefusals", "egress.TestBrokerRefusesAfterTheNodeEnded", "egress.TestBrokerRefusesAfterEndsAt"}},
	{ID: "I3", Attack: "print the key or the placeholder in any encoding (base64 wrapped, hex, base32, reversed, URL-encoded twice, JSON escapes, split over lines)", Expected: "masked in the stored logs and in every transcript kewplan decodes",
		Tests: []string{"redact.TestEveryEncodingIsMasked", "transcript.TestTranscriptNeverShowsTheKey", "executor.TestMaskedLogsHideEveryEncoding", "executor.TestMaskedLogsHideTheProxySecret"}},

	// J: hostile input, second pass.
	{ID: "J1", Attack: "a saved plan edited in fields show did not compare (budget, retry, role, pull request), or without its digest", Expected: "show and apply refuse it: the whole document is compared with the re-plan",
		Tests: []string{"planfile.TestReloadComparesEverything", "planfile.TestMissingNodesDigest"}},
	{ID: "J2", Attack: "a saved plan that inflates to gigabytes; a git object that inflates past the broker's budget", Expected: "refused at the bound, by output size",
		Tests: []string{"planfile.TestDecompressBounded", "broker.TestBrokerInflateBudget", "broker.TestChargePackDelta"}},
	{ID: "J3", Attack: "CONNECT //evil:443 with an allowed Host header; a full-width name; NAT64, 6to4 and IPv4-compatible forms of refused addresses", Expected: "the proxy dials exactly the name and port it judged; the embedded forms are refused",
		Tests: []string{"egress.TestProxyDialsWhatItJudged", "egress.TestAddressAllowedEmbeddedIPv4"}},
	{ID: "J4", Attack: "a global git filter, hook or .lfsconfig meeting the agent's commits on the host", Expected: "never run: the host's git configuration is sealed off for agent objects",
		Tests: []string{"broker.TestBrokerHostConfigNeverMeetsAgentCommits"}},
	{ID: "J5", Attack: "a flood of idle and half-sent unauthenticated connections to the proxy; one node holding every tunnel it may", Expected: "another node's CONNECT still succeeds; the node past its bound is refused for load, recorded with reason load",
		Tests: []string{"egress.TestFloodDoesNotStarveOtherNode", "egress.TestAcceptRefusedForLoad", "executor.TestEgressProxyFloodDoesNotStarve"}},
	{ID: "J6", Attack: "silent keep-alive connections and tunnels parked on the proxy; request headers past the bound, too slow, or not HTTP/1.1", Expected: "closed after the idle timeout; such requests answered 431, 408 or 400 with their sentence and recorded",
		Tests: []string{"egress.TestIdleAndOversize", "egress.TestSlowHeadersRefusal", "egress.TestMalformedRequestRefusal"}},
	{ID: "J7", Attack: "an allowed name resolving to a private, loopback, link-local or metadata address, named in private_hosts or not", Expected: "only a host named in private_hosts reaches a private range; loopback, link-local and metadata never",
		Tests: []string{"egress.TestPrivateHostsNamedOnly", "executor.TestEgressPrivateHostsNamedOnly", "config.TestErrorFiles"}},
	{ID: "J8", Attack: "a refused request's answer and decision line read for the proxy's secrets", Expected: "one sentence of what and why (body, X-Kewplan-Refusal, decision line), never a node's secret",
		Tests: []string{"egress.TestRefusalSentences"}},
	{ID: "J9", Attack: "one node moving data through 64 tunnels at once, or stalling its tunnels' writes by never reading", Expected: "its tunnels share its two slots, so another node's tunnel keeps its share of the proxy; its stalls slow only itself",
		Tests: []string{"egress.TestTunnelShareBoundsANode", "egress.TestTunnelShareValve", "egress.TestStalledTunnelsStopOnlyTheirNode"}},
	{ID: "J10", Attack: "a retry of a node that spent most of its budget in the attempt before", Expected: "the proxy's sums and caps start again for the retry, as apply's do; each request is counted in the attempt it was made in",
		Tests: []string{"egress.TestBrokerBudgetPerAttempt", "executor.TestBrokerMeterPerAttempt"}},
	{ID: "J11", Attack: "a brokered request that makes the provider fetch for the agent: server tools (web search and fetch, code execution), the MCP connector, url image and document sources, OpenRouter's web plugin and :online models, their betas; an unknown tool type, plugin or beta; a body that is not JSON, names a key twice or is too large", Expected: "refused in the API's error shape, naming the feature, its JSON path and the provider_fetch line that allows it, unless the node opted in; what the broker cannot classify refused even then; nothing reaches the provider",
		Tests: []string{"egress.TestBrokerProviderFetch", "egress.TestBrokerBodyBounded", "executor.TestBrokerProviderFetchEndToEnd"}},

	// K: the approval gate.
	{ID: "K1", Attack: "a saved plan that erases its own policy for kewplan but not for jq (\"Policy\": null after \"policy\", a second \"SAVED\" object), a duplicate or unknown key, or one made without the organisation's policy", Expected: "refused with the key's JSON path before anything starts; apply --policy refuses a plan of another policy (policy-mismatch); the approvals digest is over the bytes decoded",
		Tests: []string{"kewplan.TestAdvSavedPlanCannotChooseItsPolicy", "planfile.TestReadStrict", "planfile.TestEnforcePolicy", "planfile.TestDigestIsOverTheDecodedBytes"}},
	{ID: "K2", Attack: "a receipt of a run that asked for fewer approvals than the policy, or counted a key the policy's signers do not list", Expected: "the receipt records the policy, each approvals block and each approver's signers entry; verify --policy and --require fail it",
		Tests: []string{"kewplan.TestApprovedPlanAppliesWithReceipt"}},
	{ID: "K3", Attack: "a saved plan of a megabyte that inflates to a gigabyte, or lies about its size in its gzip trailer", Expected: "refused at 64 MiB of JSON having allocated under 256 MiB in all",
		Tests: []string{"planfile.TestReadInflatedWithinMemory", "planfile.TestDecompressSizeHintUntrusted"}},

	// L: the Kubernetes engine's proxy, held as on Docker.
	{ID: "L1", Attack: "on Kubernetes, spend node A's placeholder from any pod of the run after A ended; retry a node whose earlier attempt spent most of its budget at the proxy", Expected: "apply ends A on the proxy's control endpoint (through the API server's service proxy, with the run's control secret) and A's placeholder is refused from then on, a backstop end time besides; a retry starts at the proxy before its Job, so its sums start at zero",
		Tests: []string{"executor.TestKubernetesProxyControlAndMeter", "egress.TestControlSecretHeader", "adapter.TestBrokerEndsAt"}},
	{ID: "L2", Attack: "on Kubernetes, an agent that prints no usage or lies about it while its brokered calls spend", Expected: "apply reads the proxy pod's decision log into the ledger: each attempt's brokered requests with the proxy's meter, both meters per attempt, the denials",
		Tests: []string{"executor.TestKubernetesProxyControlAndMeter", "adapter.TestProxyLog"}},

	// M: the broker's meter, pessimistic.
	{ID: "M1", Attack: "hang up just before the usage event; let a stream end without it; ask for the most output with a max_tokens the cap cannot hold", Expected: "each call reserves its worst case before it goes out and is refused when the reservation would cross a cap; the answer is read on after the agent hung up and settles to the provider's figure; one that ends without it keeps its reservation, unsettled in its decision line, the ledger and runs show",
		Tests: []string{"egress.TestBrokerReservesTheWorstCase", "egress.TestBrokerMetersAnAnswerTheAgentHungUpOn", "executor.TestBrokerMeterReservesAndRefusesUnmeteredPaths"}},
	{ID: "M2", Attack: "an OpenAI-style stream with usage reporting off, absent, or a key given twice; a body past the bound", Expected: "stream_options.include_usage forced on (the rest byte for byte); an explicit off, a duplicate key or a non-object refused with a sentence; a body over 32 MiB refused 413 unsent",
		Tests: []string{"egress.TestBrokerForcesUsageReporting", "egress.TestBrokerBoundsTheRequestBody"}},
	{ID: "M3", Attack: "message batches, the Files API or any other path of a brokered endpoint; a GET once a cap is reached", Expected: "refused in the API's error shape naming what is brokered, why and the configuration that allows it (credentials = \"forward\"); never forwarded; the GET refused 402",
		Tests: []string{"egress.TestBrokerForwardsOnlyItsPaths", "executor.TestBrokerMeterReservesAndRefusesUnmeteredPaths"}},
	{ID: "M4", Attack: "a retried node spending a full budget in every attempt, or an attempt restarted to reset the sums", Expected: "each attempt's sums start anew, the node's across attempts are bounded by each cap × its planned attempts; an earlier attempt, or one past the plan's, is refused, and the current one told again resets nothing",
		Tests: []string{"egress.TestBrokerBoundsTheNodeAcrossAttempts", "egress.TestBrokerBudgetPerAttempt"}},
	{ID: "M5", Attack: "a brokered request with headers past the bound; a forwarded exchange the host drops unanswered", Expected: "answered 431 in the API's JSON error shape with the proxy's sentence; the dropped exchange 502 with a sentence; never Go's or goproxy's text",
		Tests: []string{"egress.TestBrokerOversizedHeadersInTheAPIShape", "egress.TestNoGoDefaultBodyOnAFailedExchange"}},
	{ID: "M6", Attack: "node B's container using node A's placeholder, under A's node name, with its own or no proxy identity", Expected: "refused 403: the base URL's identity (HMAC of the node's proxy secret) must be the placeholder's node's",
		Tests: []string{"egress.TestBrokerBindsThePlaceholderToTheNodesIdentity"}},

	// N: publishing kept work, the host's git, and figures.
	{ID: "N1", Attack: "kept work published with `kewplan salvage --branch` onto a protected branch (the sandbox's protected_branches, the branch the node was cloned from, main)", Expected: "refused with push-protected-branch under the protections recorded with the kept work; the branch does not move; allow_protected_push as recorded",
		Tests: []string{"executor.TestSalvageHonoursPushProtections", "executor.TestSalvageBudgetKilledWorker"}},
	{ID: "N2", Attack: "the host's global git configuration defines a filter driver (and attributes that select it) that would run on the agent's commits when kewplan checks them out", Expected: "every host git command on agent-made objects runs without system or global configuration or host attributes; the filter never runs",
		Tests: []string{"executor.TestHostGitConfigNeverRunsOnAgentCommits", "checkout.TestCloneIgnoresHostGitConfig"}},
	{ID: "N3", Attack: "a cap or a cost too small for two decimals (max_usd = 0.00005), or a float sum with binary noise", Expected: "one formatter for every dollar figure: never read as zero, never a raw float, a cap and a reading over it never read equal",
		Tests: []string{"money.TestAmount", "money.TestDistinct", "egress.TestBudgetSentenceSmallCap", "views.TestLogsCostFormatted"}},
}

// ownTests selects the suite's own tests in every package.
const ownTests = "TestAdv.*|FuzzAdv.*"

type row struct {
	ID       string `json:"id"`
	Attack   string `json:"attack"`
	Expected string `json:"expected"`
	Observed string `json:"observed"`
	Pass     bool   `json:"pass"`
	NotTried string `json:"not_tried"`
	Test     string `json:"test"`
}

type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
}

func main() {
	pattern := flag.Bool("pattern", false, "print the go test -run pattern selecting every test the table needs")
	rowsPath := flag.String("rows", "", "the JSON rows the suite's tests wrote ($KEWPLAN_ADV_REPORT)")
	eventsPath := flag.String("events", "", "`go test -json` output of the run")
	wide := flag.Bool("wide", false, "do not shorten the observed column")
	flag.Parse()
	if *pattern {
		fmt.Println(runPattern())
		return
	}
	if *rowsPath == "" || *eventsPath == "" {
		fmt.Fprintln(os.Stderr, "advreport: -rows and -events are required (or -pattern); `make adversarial` passes them")
		os.Exit(2)
	}
	rows, err := readRows(*rowsPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "advreport:", err)
		os.Exit(2)
	}
	outcomes, err := readEvents(*eventsPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "advreport:", err)
		os.Exit(2)
	}
	failed := render(os.Stdout, rows, outcomes, *wide)
	if failed > 0 {
		os.Exit(1)
	}
}

func runPattern() string {
	names := map[string]bool{}
	for _, it := range catalogue {
		for _, t := range it.Tests {
			_, name, _ := strings.Cut(t, ".")
			name, _, _ = strings.Cut(name, "/")
			names[regexp.QuoteMeta(name)] = true
		}
	}
	list := make([]string, 0, len(names))
	for n := range names {
		list = append(list, n)
	}
	sort.Strings(list)
	return "^(" + ownTests + "|" + strings.Join(list, "|") + ")$"
}

func readRows(path string) (map[string][]row, error) {
	out := map[string][]row{}
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return out, nil // no own test ran: every item without named tests will read MISSING
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for n := 1; sc.Scan(); n++ {
		var r row
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, n, err)
		}
		out[r.ID] = append(out[r.ID], r)
	}
	return out, sc.Err()
}

// readEvents returns the final action (pass, fail, skip) of each top-level test, keyed "package.TestName" with
// the package's last path element.
func readEvents(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Test == "" || strings.Contains(e.Test, "/") {
			continue
		}
		switch e.Action {
		case "pass", "fail", "skip":
			pkg := e.Package[strings.LastIndex(e.Package, "/")+1:]
			key := pkg + "." + e.Test
			if out[key] != "fail" {
				out[key] = e.Action
			}
		}
	}
	return out, sc.Err()
}

const (
	resultPass     = "PASS"
	resultFail     = "FAIL"
	resultNotTried = "NOT TRIED"
	resultMissing  = "MISSING"
)

// render prints the table and the totals and returns how many items failed (MISSING counts as failed).
func render(w io.Writer, rows map[string][]row, outcomes map[string]string, wide bool) int {
	type line struct{ id, result, attack, expected, observed string }
	var lines []line
	tried, passed, failed, notTried := 0, 0, 0, 0
	known := map[string]bool{}
	for _, it := range catalogue {
		known[it.ID] = true
		var observed []string
		anyFail, anyPass, anyNotTried := false, false, false
		for _, r := range rows[it.ID] {
			switch {
			case r.NotTried != "":
				anyNotTried = true
				observed = append(observed, "not tried: "+r.NotTried)
			case r.Pass:
				anyPass = true
				observed = append(observed, r.Observed)
			default:
				anyFail = true
				observed = append(observed, "FAILED in "+r.Test+": "+r.Observed)
			}
		}
		for _, t := range it.Tests {
			switch outcomes[t] {
			case "pass":
				anyPass = true
				observed = append(observed, t+" passed")
			case "skip":
				anyNotTried = true
				observed = append(observed, t+" skipped")
			case "fail":
				anyFail = true
				observed = append(observed, t+" FAILED")
			default:
				anyFail = true
				observed = append(observed, t+" did not run")
			}
		}
		if it.NotTried != "" {
			anyNotTried = true
			observed = append(observed, "not tried: "+it.NotTried)
		}
		result := resultPass
		switch {
		case anyFail:
			result = resultFail
		case anyPass:
			result = resultPass
		case anyNotTried:
			result = resultNotTried
		default:
			result = resultMissing
		}
		switch result {
		case resultPass:
			tried++
			passed++
		case resultFail, resultMissing:
			tried++
			failed++
		case resultNotTried:
			notTried++
		}
		lines = append(lines, line{it.ID, result, it.Attack, it.Expected, strings.Join(observed, " | ")})
	}
	for id := range rows {
		if !known[id] {
			lines = append(lines, line{id, resultFail, "(a row for an item not in the catalogue)", "", "fix the row's id"})
			failed++
			tried++
		}
	}
	for _, l := range lines {
		obs := l.observed
		if !wide && len(obs) > 300 {
			cut := 300
			for cut > 0 && obs[cut]&0xC0 == 0x80 {
				cut--
			}
			obs = obs[:cut] + "…"
		}
		fmt.Fprintf(w, "%-4s %-9s %s\n     expected: %s\n     observed: %s\n", l.id, l.result, l.attack, l.expected, obs)
	}
	fmt.Fprintln(w)
	sections := map[string]map[string]int{}
	var order []string
	for _, l := range lines {
		sec := l.id[:1]
		if sections[sec] == nil {
			sections[sec] = map[string]int{}
			order = append(order, sec)
		}
		sections[sec][l.result]++
	}
	for _, sec := range order {
		n := sections[sec]
		fmt.Fprintf(w, "%s: %d passed, %d failed, %d not tried\n", sec, n[resultPass], n[resultFail]+n[resultMissing], n[resultNotTried])
	}
	fmt.Fprintf(w, "%d items: %d tried, %d passed, %d failed, %d not tried\n", len(lines), tried, passed, failed, notTried)
	return failed
}
