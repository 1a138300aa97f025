// Package truthtable measures a scenario's truth table: for each knob
// setting, what the oracles say of a no-fault run and of each realistic
// one-fault pattern anchored to that run's events and writes.
//
// # Contract
//
// Measure runs on a started fuzz.Env (it neither starts nor stops it),
// for each knob setting (fuzz.Env.KnobSettings, Options.Settings of them,
// those with the fewest knobs away from their first value first): the
// no-fault run, then each one-fault schedule fuzz.Env.Anchored derives
// from that run (the reference seeds' families of the scenario's space,
// Options.Positions of each per client, resource and kind), the families
// taking turns, Options.Runs runs each (fuzz.Env.Run with fuzz.Retries:
// a harness error is tried again up to twice, then counted in the cell
// apart, never as a violation). A setting whose no-fault run was never
// judged has no anchors and so no cells but its first.
//
// A cell (Cell) counts its judged runs, per oracle the runs with a
// violation that is not a known finding (fuzz.Env.KnownOnly), per known
// finding the runs whose every violation was it, and keeps the first
// message per oracle and, when a run raised one that was not known, the
// cell's schedule as an input of the scenario's space (fuzz.Env.Input),
// which replays it. A pattern (Pattern) carries what in a real cluster
// causes it and whether a cluster on 1.37's defaults can (fuzz.Step.Cause,
// fuzz.Step.OnDefaults). Measure returns what it measured when ctx ends,
// with ctx's error.
//
// Table.Markdown renders the table a row per pattern and a column per
// setting, then the causes; package fuzz/target runs it on a target file
// (target.MeasureTruthTable), and `stalefuzz truth-table` writes it.
package truthtable
