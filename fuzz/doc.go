// Package fuzz is the fuzz engine: it decodes byte strings into lag schedules,
// runs a scenario's controllers behind the informer proxy under each
// schedule against a real apiserver, and judges the outcome with oracles.
//
// # Contract
//
// Decoding is total and bounded: every byte string decodes to a valid
// Schedule (see Scenario.Decode for the layout); exhausted input means no
// more lag; every field is clamped to the bounds declared in schedule.go.
// Adding fields to a scenario never changes what existing corpus bytes mean
// for the fields that were there.
//
// A scenario is checked before anything starts (Scenario.Validate: names,
// the limits of the input layout, seeds the layout can hold, bounds that fit
// the budget, each error naming the field and the fix), and by NewEnv's
// warm-up, which refuses a declared client that never sends a request and a
// declared resource no client requests, in runs without lag at the first
// knob settings: a typo would otherwise only mean that nothing is found.
// Exec.Knob of an undeclared knob is a harness error.
//
// One execution (Env.Run) creates a fresh namespace, starts the scenario's
// controllers with caches scoped to it, sets the mark and the lag windows,
// drives the workload, lets the lag run out, waits for the run to settle
// (from the proxy trace: no writes and no held events for Scenario.Quiet,
// after the last window ended; sooner when the windows act on events only
// and nothing is left for them to act on, Result.SettledIdle, or when every
// client's idle probe says it has no work left, Exec.Idle and ProbedQuiet),
// checks the oracles, stops everything it started, and sweeps its namespace
// away: every object in it (its finalizers stripped: once the execution's
// controllers are stopped nothing else removes them) and the namespace
// itself, finalized (envtest runs no namespace controller), within
// SweepBudget after the execution's Budget, so that a long campaign does
// not grow etcd and the watch caches; what a sweep does not finish, the
// next one does. Objects outside the namespace (cluster-scoped ones such as
// Nodes, or Leases in kube-node-lease) are declared in Scenario.Scopes: lag
// steps on their resources act where they live, and the sweep removes every
// object of theirs that was not there when NewEnv began; so does it for the
// cluster-scoped kinds of Scenario.Sweep, which no fault acts on. Its phases have budgets (StartBudget, DriveBudget, SettleBudget,
// StopBudget) that, with the schedule bounds, keep it under Budget (8 s) by
// construction, below go test -fuzz's 10 s limit; the controllers' start may
// also take what of the lag budget its schedule leaves unused, so that a slow
// start on a loaded machine is judged when it can be. Outside a go test
// -fuzz worker (a replay, a regression run, a false-alarm or truth-table
// measurement), where no 10 s limit applies, the start and each restart may
// take StartSlack (10) times their budgets, settling may take SettleSlack
// (5) times SettleBudget while the controllers still make progress (a
// run whose writes have stalled, 409 after 409, is judged at SettleBudget
// as in a worker), and the execution's budget grows by as much: a slow
// interpreter or a loaded machine is then no harness error, and the
// schedule, timed from the mark after the start, means the same. An
// overrun is a HarnessError, never a finding.
//
// A long scenario (Scenario.Long, up to MaxLong) has that budget instead
// of Budget, for a workflow that must reach a timer its controller cannot
// shorten; its Bounds may reach as far as the longer budget allows. go
// test -fuzz kills an input after 10 s, so Fuzz refuses such a scenario
// while fuzzing: package longrun's driver runs its campaigns, and go test
// replays its corpus as any other's.
//
// A campaign's worker, whichever drives it, judges each input with Worker
// (Env.Worker, Worker.Judge): the one place where an execution becomes a
// campaign's record (a harness error logged and skipped, a known finding
// or a repeat counted, a finding written) and where the worker's stats
// are kept. Env.Prepare gives a driver of its own what go test -fuzz's
// coordinator and workers do before the first input: the reference runs
// and the seeds.
//
// Spaces: LagOnly (delay, hold), LagAndLoss (also drop, which no real
// cluster does), Realistic (delay, hold, a broken watch, a relist after
// 410 Gone, a controller restart right after or before the answer to its Nth
// write, optionally reconnecting to a lagging apiserver), RealisticLatency
// (Realistic's, and ordinary latency: every watch of a client, or of every
// client, late in a window, Step.IsLatency; its rules come after every
// other step's, so a fault still decides the events it matches),
// OrdinaryLatency (ordinary latency only) and Composed (RealisticLatency's,
// and faults on a write's answer: lost after the apiserver applied it,
// reset, slow up to MaxSlowAnswer, or rejected with 429, 500 or 503,
// anchored to a client's Nth write; one of them besides one break, relist
// or restart: two faults at once). A Realistic
// schedule has at most one fault (Composed: one of each kind), and its bounds must leave room for it
// (Bounds.fits: client-go's relist backoff, RestartBudget, the lag), so an
// execution still fits Budget by construction. AnchoredLoss has LagAndLoss's
// actions in Realistic's records, so its steps too can be anchored to the
// Nth matching event. New spaces never change what existing corpus bytes mean
// in theirs.
//
// Seeds: a scenario's own (Scenario.Seeds), and in the spaces with anchored
// records those the fuzz coordinator derives from reference runs without lag
// before fuzzing (referenceSeeds: each action of the space right after each
// of the first positions of the clean run's MODIFIED, ADDED and DELETED
// events and writes, and in Composed the answers to its writes; a restart
// before the answer onto a lagging apiserver, and in Composed a lost
// answer, at its Nth create of each watched resource too; bounded by
// MaxReferenceSettings, MaxReferencePositions and about ReferenceSeedsReplay
// of replay, between MinReferenceSeeds and MaxReferenceSeeds; in the latency
// spaces, after the first of each action, MaxLatencySeeds of ordinary
// latency at the knob settings in turn, drawn log-uniformly from the
// reference runs' median watch latency to Bounds.MaxDelay). While
// fuzzing, in every space, the scenario without lag in each of its first
// MaxReferenceSettings knob settings is a seed too (noLagSeeds), after the
// others: a race that needs no fault shows there. A finding says whether its
// input was a seed or the mutator's. Each execution's time
// by phase is in Result.Phases, and each worker's mean in its stats file.
//
// Under ordinary latency only (Env.MeasureFalseAlarms), a violation is
// triaged: a race (a finding) unless up to TriageRuns more no-fault runs of
// its knob setting show the same difference, or one in a field they vary,
// with no write behind its writer's own to explain it: then the
// controller's nondeterminism, a false alarm. The measurement also groups
// the writes behind their writer's own that replaced its values for good by
// kind (FalseAlarms.SelfViewKinds: writer, write and own write, with the
// fields replaced), so that each kind is read once.
//
// Main shares one control plane among a test binary's Envs.
//
// Before an Env starts its control plane, a controller-runtime global logger
// (pkg/log.SetLogger) that no one set is set to discard, so that envtest's
// use of it 30 s into a run does not print controller-runtime's
// "log.SetLogger(...) was never called" stack; controller-runtime honours
// only the first SetLogger, so a test that wants that log sets it before
// NewEnv. What the controllers log is in Result.Logs either way.
//
// Controllers started with Exec.StartManager or Exec.Command are restartable
// under the proxy client they run as (Exec.Restart): a manager is stopped and
// started again with fresh caches, a process is SIGKILLed and executed again
// with the same arguments and kubeconfig. A restart step freezes the client
// at the proxy right after (or instead of answering) its Nth write, so that
// no later write escapes, then restarts it within RestartBudget.
//
// The lag is over when the schedule's windows have ended, no restart is
// under way, and every watch a fault ended has been opened again: a
// reflector waiting for its relist backoff is quiet, not settled.
//
// A quiet run with objects of Scenario.AwaitCurrent's kinds (the target
// files' builtins: kube-controller-manager's StatefulSets, ReplicaSets,
// Deployments, DaemonSets, Jobs) settles only once kstatus says each is
// Current or Failed (one still not Current when the settle budget runs
// out leaves the run unsettled, Result.NotCurrent naming it): those
// controllers retry a failed sync after a rate-limited wait with no
// request, which the trace cannot show.
//
// An object of Scenario.Converge's kind has converged when
// status.observedGeneration == metadata.generation and its condition Ready
// is True; with Convergence.KStatus, when kstatus
// (sigs.k8s.io/cli-utils/pkg/kstatus/status, what Flux and kpt wait on)
// computes Current for it, for controllers without a Ready condition: no
// observedGeneration behind, no condition Reconciling=True or Stalled=True.
// An object whose status kstatus cannot read cannot be judged: a harness
// error.
//
// A finding is never a slow machine. An object not converged once the run
// settled is "stuck". One not converged while its controllers were still
// writing when the settle budget ran out is "convergence" only if they were
// retrying without progress (no write changed an object since the lag was
// over and three were sent since the last that did, or writes that met 409,
// failed or changed nothing outnumber those that changed an object: a cache
// that never catches up); otherwise the run is a harness error
// (HarnessError.Unsettled), run again in a regression run and skipped while
// fuzzing. So is a Differential run that never settled, and a run in
// which the proxy could not relay a request while its client waited for the
// answer (trace.Request.RelayError: a 502 of the harness's, which no rule
// asked for). A request its client gave up on is recorded as abandoned
// (trace.Request.Abandoned): a controller's own cancellation, which a real
// apiserver may still apply, is judged as usual.
//
// Oracles: convergence and stuck (Scenario.Converge), lost update
// (Scenario.LostUpdates), differential against a no-lag reference run
// (Scenario.Differential; judged, as end state below, only when the run's
// workload waits that gave up are those that gave up in the reference run
// and in a second no-lag run made when any did), count safety (Scenario.Counts: live objects per
// controller owner, judged on the apiserver's own history from a direct
// watch, against a limit given or learned from two no-fault reference runs
// per knob setting), end state (Scenario.EndStates: a settled run's
// objects against the same reference runs, where those agree; the elements
// of a list its CRD declares x-kubernetes-list-type: map are matched by their
// keys, not their order; not judged when the run's workflow is not its
// reference runs': Exec.Diverged, a workload that went on after a wait
// gave up, Result.Diverged, unless the same waits gave up in both
// reference runs too), stale self-view
// (Scenario.StaleSelfView: a stored write sent from a view older than its
// writer's own last acknowledged write to the object, audit.SelfStale, that
// replaced a value of that write which no later write restored; every
// execution counts such writes, Result.SelfViews, and a report names them as
// a likely cause), crash (always on: a controller process that exits on its
// own or logs a Go panic), storm (Scenario.Storm: a run that never settled
// because its writes got nowhere while the quiet period would have
// elapsed without them, or set a field back and forth, once the faults were over, while its reference runs
// settled; judged instead of
// being a harness error, except for a schedule with no fault, which is
// the reference runs' own and can only have met a slower machine), and the scenario's own Checks. A violation is
// reported with the schedule in readable form (which ParseSchedule reads
// back), the oracle's message naming object and field, the writes behind
// their writer's own as a likely cause, a timeline around the first
// violation's moment, the blind-write audit of its writes (package
// proxy/audit: each write's kind, lock and call site, and every blind write
// over a change its writer had not seen), the trace as JSONL and a picture
// next to it (package proxy/report: Result.WriteReport), and the
// controllers' log (Result.Logs: what StartManager's managers logged and
// Command's children wrote to the output they were not given, the last
// MaxLogLines lines of each client, every credential-shaped part replaced
// as package proxy/redact replaces it in a trace) as name.log, 0600. A
// replayed corpus entry of a KnownBug scenario writes them too when
// STALEFUZZ_FINDINGS is set. Dry-run writes count for no oracle. What a client had seen of an
// object is package trace's one definition (trace.Views), for the
// lost-update oracle and the audit alike. A finding groups repeated
// violations of one oracle on one object ("and 19 more like it"); its files
// (trace, picture, log, corpus entry) never overwrite an earlier finding's: the
// same name taken gets the next free one.
//
// A campaign (go test -fuzz) has a directory of its own, made by its
// coordinator unless STALEFUZZ_CAMPAIGN names one, where the workers write
// their stats, the harness errors they skipped, why a worker could not
// start (a worker's output goes nowhere, so go test only says "fuzzing
// process terminated without fuzzing: EOF") and every finding they wrote
// (findings.log, LoggedFindings: go test -fuzz drops a failure that an
// input meets only when a worker runs it again before minimizing it for
// its coverage, and stalefuzz fuzz reports such a finding from the log;
// with SearchOnEnv set, the workers write each finding, with its time, and
// search on past it, counting an execution that only repeats a written
// finding's Signature in repeats.log);
// at the end the coordinator
// prints the campaign's one execution count (every worker's executions, the
// corpus replay and minimization included, which go test's own "execs"
// leave out) and those errors, and removes the directory unless it holds
// errors. A campaign ends at -fuzztime as an interrupt ends it, cleanly:
// the coordinator sets -fuzztime to a count it never reaches and interrupts
// itself at the deadline, because Go 1.26's own deadline can fail a target
// with "context deadline exceeded" when a worker is mid-execution
// (golang/go#75804).
//
// Call sites: a controller started in-process with Exec.StartManager or built
// on Exec.Config writes through proxy.Client.Config, whose transport reports
// the first stack frame outside client-go, controller-runtime and
// apimachinery with every write (trace.Request.Caller).
//
// Controllers that run in-process give noisy coverage and out-of-process ones
// give none, so the engine feeds the fuzzer features of each execution's
// trace as coverage (see Features and package internal/signal).
//
// # Environment variables
//
//   - STALEFUZZ_NO_SEEDS: when set, Fuzz adds no Scenario.Seeds, no
//     no-lag seeds and no reference-run seeds (Realistic, AnchoredLoss), so that a
//     campaign measures what the mutator finds on its own.
//   - STALEFUZZ_SHARD: "K/N", while fuzzing only the Kth of N disjoint
//     shares of the schedules, seeds and mutated inputs alike (Shard).
//   - STALEFUZZ_FINDINGS: directory for findings' traces, pictures and
//     corpus entries. Default: $TMPDIR/stalefuzz-findings. When set, a
//     replayed KnownBug corpus entry writes its trace and picture there too.
//   - STALEFUZZ_CAMPAIGN: a campaign's directory (stats, harness errors,
//     worker errors, reference seeds). The coordinator sets it for its
//     workers; a script may set it to a directory it owns. Default: a new
//     directory in STALEFUZZ_FINDINGS.
//   - Those of package proxy/controlplane (KUBEBUILDER_ASSETS, ...).
package fuzz
