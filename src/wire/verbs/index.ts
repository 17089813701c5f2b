// The verbs: one function per protocol script, named after it, in the order of SPEC section 19
// (protocol/conformance/<script>.json holds each one's cases). Each encodes its script's ARGV
// from typed arguments and decodes the reply into named fields, so no caller above the wire
// knows an ARGV position or a reply index. Checking what a caller passed (whole numbers, names,
// sizes) stays with the caller, which knows what to call a bad value in its message; a verb
// takes values already checked. `hello` is QueueWire's own (once per queue, before any verb).
// Callers import the room whole (`import * as verbs`), so a call reads `verbs.claim(w, n, leaseMs)`.
// jobs.ts holds 19.2-19.14, queue.ts 19.15-19.22, recurrence.ts 19.23-19.29, changes.ts 19.30-19.36,
// handoffs.ts 19.37-19.40.
export * from './changes.js';
export * from './handoffs.js';
export * from './jobs.js';
export * from './queue.js';
export * from './recurrence.js';
