// Package contention is the double-reconcile contention scenario.
//
// A Rollout controller builds a plan when status.plan is empty and writes it
// with a status patch, then advances the plan's steps one patch at a time,
// and finally sets Ready and status.observedGeneration. Two reconciles that
// both see status.plan empty — two replicas without leader election, or one
// replica whose cache has not yet shown its own write — both build a plan.
//
// With a plain MergeFrom status patch (no resourceVersion) the second plan
// silently replaces the first and its progress: a lost update. With
// MergeFromWithOptimisticLock the second write gets a 409 Conflict from the
// apiserver, and the controller requeues, re-reads and continues the plan
// that won.
//
// The invariant: once a plan ID is written and acknowledged, it is never
// replaced.
//
// Realistic is the same controller, one replica, under faults a real cluster
// produces. Its cache also misses its own plan when a watch broken right
// after the plan write meets 410 Gone on re-watch (client-go then waits 0.8 s
// or more before it relists, and the controller keeps reconciling from the
// stale cache), and when it restarts onto an apiserver that has not yet seen
// the plan; the blind patch then loses the plan, the locked one meets 409s.
//
// Package contention reads no environment variables.
package contention
