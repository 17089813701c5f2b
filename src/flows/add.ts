// Flows: a parent job that runs only once all its children have completed. Each child's row
// names its parent, and the scripts that end a child count its parent down (protocol/lib/
// flow.lua), so no process has to watch the flow. The parent's handler reads the children's
// results with ctx.childrenResults().
//
// A flow may span queues. One flow_add call admits every job it names atomically, and one call
// can reach several queues when they share a Redis Cluster hash slot or the server is not a
// Cluster (each queue is its own hash tag, `emq:{<queue>}:`). Otherwise the flow is admitted per
// queue, the parent's part first, and a child in another queue than its parent reaches it
// through a hand-off (flows/handoff.ts, SPEC 14.1). `{ atomic: true }` refuses that split.

import { knownKeys } from '../core/check.js';
import { EchoMQError, showValue } from '../core/errors.js';
import type { EnqueueOptions } from '../core/types.js';
import { type Admission, encodeJob } from '../wire/admission.js';
import type { QueueWire } from '../wire/queue-wire.js';
import { keySlot } from '../wire/slot.js';
import * as verbs from '../wire/verbs/index.js';

/** Options of one job in a flow: enqueue's, without dedupe, plus what a parent may set. */
export interface FlowJobOptions extends Omit<EnqueueOptions, 'dedupe'> {
  /**
   * A parent with this runs even when a child of it ends without completing (dead, cancelled
   * or removed); without it (the default), such a child ends the parent dead.
   */
  continueOnChildFailure?: boolean;
  /**
   * What a child that ends without completing (dead, cancelled, removed) does to this parent:
   * 'fail' (default) ends it dead; 'remove' drops the dependency (the same as
   * continueOnChildFailure); 'ignore' drops it too and records the failure, which the parent's
   * handler reads with ctx.childrenFailures().
   */
  onChildFailure?: 'fail' | 'remove' | 'ignore';
}

export interface FlowJob<D = unknown> {
  /** The queue's name: any queue (a child may be in another queue than its parent). */
  queue: string;
  data: D;
  name?: string;
  opts?: FlowJobOptions;
  /** Jobs that must complete before this one runs (it waits in state waiting_children). */
  children?: FlowJob[];
}

/** The ids of a flow's jobs, shaped like the flow. */
export interface FlowNode {
  id: string;
  children: FlowNode[];
}

export interface FlowResult extends FlowNode {
  /** 'added', or 'duplicate' when a job with the root's id exists (nothing was written). */
  status: 'added' | 'duplicate';
}

export interface FlowOptions {
  /**
   * true: admit the whole flow in one atomic call or not at all: a flow whose queues one script
   * cannot reach (different hash slots on a Redis Cluster) is refused with EMQINPUT, nothing
   * written. false (default): such a flow is admitted per queue, the parent's part first.
   */
  atomic?: boolean;
}

/** One job of the flow, encoded: its queue, its admission, and its place in the tree. */
interface FlowEntry {
  queue: QueueWire;
  job: Admission;
  cont: '' | '1' | 'ignore';
  id: string;
  parent: FlowEntry | undefined;
  children: FlowEntry[];
}

const FLOW_OPTIONS = new Set(['atomic']);

const FLOW_KEYS = new Set(['queue', 'data', 'name', 'opts', 'children']);

/** What a value that is not a flow job is, for a message: null, an array, or its type and text. */
function shape(value: unknown): string {
  if (value === null || value === undefined) return String(value);
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `${typeof value} ${showValue(value)}`;
}

/**
 * Admits a flow: in one script call when one can reach every queue of it, else per queue.
 * `wireOf` resolves a queue by name (EchoMQ.queue's one object per name).
 */
export async function addFlow<D>(
  wireOf: (queue: string) => QueueWire,
  root: FlowJob<D>,
  options?: FlowOptions,
): Promise<FlowResult> {
  if (typeof root !== 'object' || root === null || typeof root.queue !== 'string') {
    throw new EchoMQError('EMQINPUT', 'a flow is { queue, data, name?, opts?, children? }');
  }
  const opts = options ?? {};
  if (typeof opts !== 'object')
    throw new EchoMQError('EMQINPUT', 'flow options must be an object { atomic? }');
  knownKeys(opts, FLOW_OPTIONS, 'flow option');
  if (opts.atomic !== undefined && typeof opts.atomic !== 'boolean') {
    throw new EchoMQError('EMQINPUT', `atomic must be true or false, got ${showValue(opts.atomic)}`);
  }
  const seen = new Set<string>();
  const entries: FlowEntry[] = [];
  // `at` names the job's place in the tree (root.children[0].children[2]) for the messages.
  const visit = (job: FlowJob, parent: FlowEntry | undefined, at: string): FlowNode => {
    if (typeof job !== 'object' || job === null || Array.isArray(job)) {
      throw new EchoMQError(
        'EMQINPUT',
        `the flow job at ${at} must be an object { queue, data, name?, opts?, children? }, got ${shape(job)}`,
      );
    }
    knownKeys(job, FLOW_KEYS, `flow job field (at ${at})`);
    if (typeof job.queue !== 'string') {
      throw new EchoMQError('EMQINPUT', `the flow job at ${at} needs a queue name, got ${shape(job.queue)}`);
    }
    const queue = wireOf(job.queue);
    const { continueOnChildFailure, onChildFailure, ...jobOpts } = job.opts ?? {};
    if (onChildFailure !== undefined && !['fail', 'remove', 'ignore'].includes(onChildFailure)) {
      throw new EchoMQError(
        'EMQINPUT',
        `onChildFailure must be 'fail', 'remove' or 'ignore', got ${String(onChildFailure)}`,
      );
    }
    if ('dedupe' in jobOpts)
      throw new EchoMQError('EMQINPUT', 'dedupe is not supported on the jobs of a flow');
    const name = job.name ?? jobOpts.name;
    const a = encodeJob(job.data, name === undefined ? jobOpts : { ...jobOpts, name }, queue.limits);
    if (a.timeout) {
      throw new EchoMQError('EMQINPUT', 'timeoutMs is not supported on flow jobs yet');
    }
    if (seen.has(a.id)) throw new EchoMQError('EMQINPUT', `job id ${a.id} appears twice in the flow`);
    seen.add(a.id);
    const cont =
      onChildFailure === 'ignore'
        ? 'ignore'
        : onChildFailure === 'remove' || (onChildFailure === undefined && continueOnChildFailure === true)
          ? '1'
          : '';
    const entry: FlowEntry = { queue, job: a, cont, id: a.id, parent, children: [] };
    entries.push(entry);
    parent?.children.push(entry);
    const children = job.children ?? [];
    if (!Array.isArray(children)) {
      throw new EchoMQError(
        'EMQINPUT',
        `${at}.children must be an array of flow jobs, got ${shape(children)}`,
      );
    }
    return { id: a.id, children: children.map((c, i) => visit(c, entry, `${at}.children[${i}]`)) };
  };
  const tree = visit(root as FlowJob, undefined, 'root');
  // One call may write queues other than its own: each says hello first (version, registry).
  await Promise.all([...new Set(entries.map((e) => e.queue))].map((q) => q.greet()));
  const head = entries[0]!.queue;
  const slots = new Map<string, number>();
  if (head.connector.isCluster)
    for (const e of entries) slots.set(e.queue.name, keySlot(e.queue.keys.prefix));
  if (new Set(slots.values()).size <= 1) {
    return { ...tree, status: await verbs.flowAdd(head, flowTuples(head, entries[0]!, new Set(entries))) };
  }
  if (opts.atomic) {
    throw new EchoMQError(
      'EMQINPUT',
      `the flow's queues are in different Redis Cluster hash slots (${[...slots].map(([q, s]) => `${q}: ${s}`).join(', ')}), ` +
        'so no one call can admit it atomically; nothing was written. Leave atomic out to admit it per queue ' +
        "(the parent's part first; its children reach it through the hand-off), or keep the flow in one queue",
    );
  }
  // Per queue: each part is the jobs of one queue reached from its first job without leaving
  // that queue; a part's children in other queues are only named (refs) and admitted by parts
  // of their own, which come after it, so every parent exists before its children can end.
  let status: FlowResult['status'] = 'added';
  for (const start of entries.filter((e) => !e.parent || e.parent.queue !== e.queue)) {
    const part = new Set<FlowEntry>();
    const grow = (e: FlowEntry) => {
      part.add(e);
      for (const c of e.children) if (c.queue === e.queue) grow(c);
    };
    grow(start);
    let reply: 'added' | 'duplicate';
    try {
      reply = await verbs.flowAdd(start.queue, flowTuples(start.queue, start, part));
    } catch (err) {
      if (start === entries[0]) throw err;
      throw new EchoMQError(
        err instanceof EchoMQError ? err.code : 'EMQINPUT',
        `the flow was admitted only in part (its part in queue ${start.queue.name} failed: ` +
          `${err instanceof Error ? err.message : String(err)}); call mq.flow again with the same job ids to admit the rest`,
      );
    }
    if (start === entries[0] && reply === 'duplicate') status = 'duplicate';
  }
  return { ...tree, status };
}

/**
 * flow_add's jobs for the part of the tree from `start` in `call`'s queue (`part`: the jobs it
 * admits), in tree order: a child of the part that is not in it goes as a ref in its place
 * (named and counted, admitted by its own part), so `deps` keeps the children's order.
 */
function flowTuples(call: QueueWire, start: FlowEntry, part: Set<FlowEntry>): verbs.FlowTuple[] {
  const tuples: verbs.FlowTuple[] = [];
  const push = (e: FlowEntry) => {
    const prefix = e.queue === call ? '' : e.queue.keys.prefix;
    // The first job's parent outside the call is named '<its prefix><its id>'.
    const parent = !e.parent
      ? ''
      : part.has(e.parent)
        ? e.parent.id
        : e.parent.queue.keys.prefix + e.parent.id;
    if (!part.has(e)) return void tuples.push({ prefix, id: e.id, parent });
    tuples.push({ prefix, id: e.id, parent, job: e.job, cont: e.cont });
    for (const c of e.children) push(c);
  };
  push(start);
  return tuples;
}
