// Command stalefuzz runs fuzz campaigns on a controller declared in a target
// file, runs the informer proxy on its own in front of any apiserver a
// kubeconfig reaches (envtest, kind, a real cluster), and reads the traces it
// records.
//
//	go install github.com/stalefuzz/stalefuzz/proxy/cmd/stalefuzz@latest
//
// # stalefuzz fuzz, replay, prepare
//
//	stalefuzz fuzz TARGET.yaml [--time 5m] [--workers 2] [--findings DIR] \
//	    [--junit FILE] [--shard K/N] [--corpus DIR]
//	stalefuzz replay TARGET.yaml (INPUT | --schedule WORDS) [--count N] [--findings DIR]
//	stalefuzz encode TARGET.yaml WORDS [-o FILE]
//	stalefuzz prepare TARGET.yaml [--controllers-only]
//
// read a target file (package fuzz/target; a mistake is refused with its
// line, field and a suggestion before anything starts, exit 2), build what
// it needs (its Go controllers, cached outside the repository, and the test
// binary of package fuzz/target/driver from stalefuzz's own module:
// $STALEFUZZ_SRC, else the checkout the working directory is in, else this
// binary's released version in the module cache; the user's repository needs
// no Go dependency on stalefuzz), saying what they build. fuzz searches fault
// schedules with go test's fuzzing engine for --time from an empty corpus (or
// --corpus's entries, to which it adds what it found interesting), --shard
// K/N executing only its share of the schedules, seeds and mutations alike
// (package fuzz, Shard); it prints each
// finding's report, its files in --findings (trace, picture, the
// controllers' log, the saved input) and the replay command, and exits 0 with
// no finding, 1 with one, 2 when the campaign could not run; --junit writes
// the result as JUnit XML. replay runs a saved input (or the schedule in
// words --schedule gives) --count times in one control plane and prints in
// how many runs an oracle was violated and where the input came from (the
// NAME.origin file beside NAME.input, which fuzz, false-alarms, truth-table
// and encode write): exit 1 when in any, 0 when in none, 2 for a harness
// error. encode writes the input of a schedule in words (what a report's
// "schedule:" line says, a knob's value by its name in the file: package
// fuzz, Scenario.ParseSchedule), says what it replays as, and builds and
// runs nothing. prepare only builds (with
// --controllers-only, only the target's Go controllers: what `make
// source-controller` runs for the FluxCD scenario).
//
// # stalefuzz false-alarms, truth-table
//
//	stalefuzz false-alarms TARGET.yaml [--count 200] [--knob NAME=VALUE]... [--answer FAULT] [--findings DIR]
//	stalefuzz truth-table TARGET.yaml [--runs 2] [--positions 1] [--settings 0] [--out FILE] [--findings DIR]
//
// build as fuzz does. false-alarms runs --count executions under ordinary
// latency only (every watch of every client a little late, as a busy
// apiserver delivers them; --knob keeps the knob settings with that value)
// and triages each violation: a race (a finding under ordinary latency)
// unless more no-fault runs show the same difference, or one in a field
// they vary, with no write behind its writer's own to explain it: then a
// false alarm (the controller's nondeterminism). It keeps each execution
// with a violation in --findings (trace, picture, log, input) and prints
// the command that replays it: exit 1 when any, 0 when none. With --answer
// (lose, reset, slow, reject, reject-500, reject-503) each execution also
// has that fault on the answer to a controller's Nth write, so that the
// fault's false alarms are measured alike; the target's space must be
// composed. truth-table
// runs, per knob setting, a no-fault run and each one-fault pattern
// anchored to its events and writes (package fuzz/truthtable)
// --runs times, and writes a Markdown table: per pattern whether a cluster
// on 1.37's defaults can produce it, per setting the oracles that fired,
// then each cell with a violation as an input kept in --findings and the
// command that replays it; exit 0 once the table is made.
//
// # stalefuzz proxy
//
//	stalefuzz proxy --kubeconfig FILE [--context NAME] --client NAME... \
//	    --rules FILE --trace FILE [--out DIR] [--control ADDR] [--mark-now] \
//	    [--trace-in-memory] [--fields PATH]... [-v N] [--profile DIR]
//
// starts package proxy in front of the apiserver of the kubeconfig's context
// and gives each --client (repeated or comma-separated; at least one) its
// own listener on 127.0.0.1 and a kubeconfig, DIR/NAME.kubeconfig (--out:
// default the current directory, created if missing, mode 0600), whose
// only credential is a random token of that client: its listener refuses a
// request without it (401) or addressed to another host (403: DNS
// rebinding), and strips it before adding the upstream kubeconfig's own
// credentials (package proxy, "Client identity"). Point a controller at it,
// or use it with kubectl:
//
//	KUBECONFIG=DIR/NAME.kubeconfig kubectl get configmaps
//
// The rules come from --rules, a YAML file in the format of package
// proxy/rulesfile. Their windows (from, to) are relative to a mark, and no
// rule is in force before the first one. The mark is set to now, and the
// rules put in force, by SIGUSR1, by POST /mark on the control endpoint, or
// at start with --mark-now; each new mark starts the rules over. SIGHUP or
// POST /reload re-reads the rules file and puts its rules in force under the
// same mark (their After counts, and what Break, Freeze and Cut did, start
// over; frozen clients are thawed); a file with errors leaves the old rules
// in force and the errors, each naming its line, rule and field, are
// reported on stderr and in the answer to POST /reload.
//
// The control endpoint is plain HTTP on a loopback address only (--control,
// default 127.0.0.1:0, an unused port); its address is printed on stderr and
// written to DIR/control.addr, which is written last: once it exists, the
// kubeconfigs are in place and the endpoint answers.
//
//	POST /mark    set the mark to now and put the rules in force
//	POST /reload  re-read the rules file, keeping the mark (422 on errors)
//	GET  /trace   the trace so far, as JSONL (package proxy/trace)
//
// It refuses requests whose Host is not the loopback address it listens on,
// and cross-origin requests from browsers.
//
// On SIGINT or SIGTERM it stops the proxy (ending every client's connection),
// completes the trace in --trace (mode 0600), removes DIR/control.addr, and
// exits 0. It keeps the kubeconfigs, the trace and --out (created 0700). It
// creates nothing else, and
// nothing in $TMPDIR. A second SIGINT or SIGTERM during that exits at once
// with status 1, without completing the trace. A start that fails removes
// what it created, --trace included.
//
// # The trace
//
// The trace (package proxy/trace) is written to --trace as JSONL while the
// proxy runs, so that a run of hours in front of a busy cluster takes
// bounded memory: --trace is created (emptied) at start, and each entry is
// appended once it is final, at most a second after (flushed every second):
// a request when its answer arrives, a watch event once it is released to
// its client, dropped or broken. Memory keeps only the watch events a rule
// holds or delays, and up to 64 KiB not yet written; a write that fails
// (a full disk) loses nothing: it is warned about, and what could not be
// written stays in memory until a write succeeds. The file's lines are in
// the order entries became final, so a held event comes after events that
// arrived later; stalefuzz report and audit, and package trace's readers,
// order them by time. On exit the events still held are written as aborted
// (the stop ended their streams); if the file cannot be completed in place,
// the whole trace is written beside it and renamed over it, and an error
// says what, if anything, is missing. GET /trace answers the whole trace so
// far (the file, then the events still held, as pending). A proxy killed
// without a chance to exit (SIGKILL, a second SIGINT) leaves the file with
// every entry final until a second before, whole lines only.
//
// --trace-in-memory keeps the whole trace in memory instead (it grows by
// about 270 bytes a watch event, 100 MB an hour at 100 events a second) and
// writes --trace once, on exit, atomically: the file appears complete or
// not at all.
//
// # When the apiserver goes away
//
// The proxy dials the kubeconfig's server address afresh for each new
// connection. While the apiserver is down, every request gets 502 Bad
// Gateway from the proxy, recorded in the trace with code 502, and every
// open watch ends, so clients re-watch and get 502 too; once it answers at
// that address again, requests go through and informers resume their
// watches. An apiserver that comes back at another address is not followed:
// restart stalefuzz proxy with a kubeconfig that names it.
//
// The trace, on disk and from GET /trace, holds no credentials: Secret data,
// tokens, private keys and kubeconfigs are redacted as they are recorded
// (package proxy/redact).
//
// --fields adds dotted JSON paths whose values the trace records from each
// response (proxy.Proxy.Fields); -v raises the verbosity of the proxy's log
// (0: warnings, such as a stream it could not parse; 1: also connection
// errors). --profile writes the proxy's own CPU profile of the whole run
// and its allocation profile to DIR/cpu.pprof and DIR/allocs.pprof when it
// stops, for go tool pprof (make bench reads them).
//
// # stalefuzz report
//
//	stalefuzz report TRACE [-o FILE.html] [--title T]
//
// draws TRACE (JSONL) as a self-contained HTML page (package proxy/report),
// with the blind-write audit (package proxy/audit) below the picture. The
// default output is TRACE with .html in place of .jsonl, written with mode
// 0600. It prints the path written.
//
// # stalefuzz audit
//
//	stalefuzz audit TRACE [--json]
//
// prints the blind-write audit of TRACE (package proxy/audit) as a table, or
// with --json as the JSON form of audit.Report.
//
// # Exit status
//
// 0 on success (for proxy: stopped by SIGINT or SIGTERM), 1 on an error, 2
// on a usage error. fuzz, replay, false-alarms and truth-table: 0 with no
// finding or false alarm, 1 with one, 2 on a usage or harness error or an
// interrupt (SIGINT or SIGTERM: what the command started is stopped and its
// work directory in $TMPDIR removed before it exits).
//
// # Environment variables
//
// stalefuzz reads none of its own: --kubeconfig is required, so KUBECONFIG
// is not read. The connection to the upstream apiserver honours what
// client-go honours for a kubeconfig: HTTPS_PROXY, HTTP_PROXY and NO_PROXY
// (unless the kubeconfig sets proxy-url), and whatever an exec credential
// plugin the kubeconfig names reads.
package main
