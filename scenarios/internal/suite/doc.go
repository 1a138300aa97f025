// Package suite is what the scenarios' ginkgo suites share: which specs run
// in `make test` and which only in `make test-volume`.
//
// `make test` is run before every push, so it keeps one regression row per
// behaviour: each spec's claim checked on as few executions as can show it
// (a bug reproduces within three tries; a safety property holds over the
// hand-written schedules). `make test-volume` (STALEFUZZ_VOLUME=1) runs the
// same specs as statistics over many executions (19 in 20, hundreds of random
// schedules) and the specs labelled "volume" (truth tables, long waits).
// Plain Go tests call VolumeOnly for the same purpose: a fix's control
// (the controller built with a patch of fix/, judged on the finding's input)
// runs only in make test-volume, beside the finding's regression row at the
// release, which make test runs.
//
// # Environment variables
//
//   - STALEFUZZ_VOLUME: when set (non-empty), Volume is true.
package suite
