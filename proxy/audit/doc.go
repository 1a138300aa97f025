// Package audit answers, from behaviour, the question behind most stale-cache
// bugs: which of a controller's writes are blind, and which of them ever
// overwrote something the writer had not seen.
//
// # Classification
//
// Every write in a trace (create, update, patch, delete, deletecollection;
// dry-run writes are left out: the apiserver stored nothing) is counted per
// client, call site, verb, resource and subresource, and kind:
//
//	create                          never blind: an existing name is 409 AlreadyExists
//	update                          the whole object; locked when it carries metadata.resourceVersion
//	merge / strategic-merge / JSON patch
//	                                locked when it carries a resourceVersion precondition
//	                                (metadata.resourceVersion, or a JSON patch "test" of it)
//	apply, apply --force            server-side apply; locked with metadata.resourceVersion
//	delete, deletecollection        locked with preconditions.resourceVersion; a uid
//	                                precondition only guards against a recreated object
//
// with how many met 409 Conflict and how many failed otherwise. The call site
// is trace.Request.Caller: known for in-process clients built from
// proxy.Client.Config, empty for out-of-process ones.
//
// # Blind writes over unseen changes
//
// A successful update or patch without a resourceVersion precondition is
// flagged when it replaced a value written after the newest version of the
// object its writer had been sent: by another client, or by the same client
// in a write its view had not shown yet (a cache behind its own writes, a
// restarted instance that never saw them: Overwrite.Own). Precisely, for such
// a write W by client C to object O, committed at resourceVersion w:
//
//   - C's view of O is what C had seen of O when W started, as package trace
//     defines it (trace.Views: the watch events of O released to C, C's GETs
//     of O and C's LISTs of O's resource and group in O's namespace or across
//     namespaces; not its own write responses), the same definition every
//     oracle of package fuzz uses;
//   - for each field path W's body set (trace.Write.Set), the newest
//     successful write to O committed after C's view and before w that set
//     that path, or a path inside or around it, is found; if the values
//     differ, W replaced a change C had not seen.
//
// # Writes behind the writer's own
//
// A write sent from a view older than its writer's own last acknowledged
// write to the same object is listed apart (Report.SelfStale, and the
// BEHIND OWN WRITE column): the writer's cache had not yet shown it what it
// had itself written, and it acted anyway, the stale-cache bug
// controller-runtime's read-your-writes cache exists for. Precisely, an
// update or patch W by client C to object O of a resource C reads at all (an
// event recorder that never reads its Events has no cache to be behind), sent
// at t, is one when C's view
// of O at t (as above, or W's resourceVersion precondition when newer: a
// write built on the answer of its writer's own last write is not behind
// it) is older than the resourceVersion of C's newest
// write to O that was stored and whose answer C had received before t, by
// the same instance of C (a restarted instance did not write what its
// predecessor did; a Cut withheld the answer; an abandoned request was
// never answered). A server-side apply is one field manager's write: C's
// writes are then the applies of W's own field manager only (a process that
// runs several controllers, each applying its own fields under a manager of
// its own, is several writers). Whatever its lock and outcome: a locked W
// from that view meets 409 and stores nothing, which the row shows. For a
// stored W, a field it set is Replaced when the newest stored write to that
// field after C's view and before W was C's own and set another value
// (another manager's apply in between is passed over: the apiserver merged
// it with W's), and Restored when a later stored write set it back. Many correct controllers recompute a
// status from a view like that and lose nothing: a SelfStale write is an
// explanation, which package fuzz's oracles judge (see its doc).
//
// # Answers older than their client's view
//
// A write's answer that reached its client after the client had been shown
// a newer version of the object itself (its watch event or GET at a higher
// resourceVersion; a list does not count, as it says what its scope held,
// not that the object changed) is listed too (Report.Overtaken), with
// whether the client was shown the object again afterwards, by the same
// instance. It harms no client whose cache only its watch feeds; one that
// writes its answers into its cache as they come (an informer write-back,
// which compares no resourceVersions) goes back to the older object, for
// good when nothing showed it the object again (Overtaken.Lasting). A
// write-back made later than the answer is not seen: the trace does not
// show it. Like SelfStale, it is an explanation, not a verdict.
//
// When any write to a resource used the status subresource, that resource has
// one: the status paths of its main-resource writes are ignored (the
// apiserver ignores them). Values are compared as recorded (trace.MaxValue);
// a list is one value, so a strategic-merge patch that merges a list by key
// is compared as if it replaced it.
//
// Package audit reads no environment variables.
package audit
