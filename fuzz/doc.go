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
// One execution (Env.Run) creates a fresh namespace, starts the scenario's
// controllers with caches scoped to it, sets the mark and the lag windows,
// drives the workload, lets the lag run out, waits for the run to settle
// (from the proxy trace: no writes and no held events for Scenario.Quiet,
// after the last window ended), checks the oracles, and stops everything it
// started. Its phases have budgets (StartBudget, DriveBudget, SettleBudget,
// StopBudget) that, with the schedule bounds, keep it under Budget (8 s) by
// construction, below go test -fuzz's 10 s limit; an overrun is a
// HarnessError, never a finding.
//
// Oracles: convergence and stuck (Scenario.Converge), lost update
// (Scenario.LostUpdates), differential against a no-lag reference run
// (Scenario.Differential), and the scenario's own Checks. A violation is
// reported with the schedule in readable form, the oracle's message naming
// object and field, a timeline, and the trace as JSONL.
//
// Controllers that run in-process give noisy coverage and out-of-process ones
// give none, so the engine feeds the fuzzer features of each execution's
// trace as coverage (see Features and package internal/signal).
//
// # Environment variables
//
//   - STALEFUZZ_FINDINGS: directory for findings' traces and the harness
//     error log. Default: $TMPDIR/stalefuzz-findings.
//   - Those of package proxy/controlplane (KUBEBUILDER_ASSETS, ...).
package fuzz
