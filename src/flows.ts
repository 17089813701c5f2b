// Flows: a parent job that runs only once all its children have completed. The whole tree is
// admitted by one `flow_add` call (atomically: all of it or none); each child's row names its
// parent, and the scripts that end a child count its parent down (protocol/lib/flow.lua), so
// no process has to watch the flow. The parent's handler reads the children's results with
// ctx.childrenResults().
//
// Every job of a flow lives in one queue: a script can only touch keys of one hash slot on a
// Redis Cluster, and every queue is its own hash tag (`emq:{<queue>}:`).

import { knownKeys } from './core/check.js';
import { EchoMQError, showValue } from './core/errors.js';
import type { EnqueueOptions } from './core/types.js';
import { encodeJob } from './wire/admission.js';
import type { QueueWire } from './wire/queue-wire.js';
import * as verbs from './wire/verbs/index.js';

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
  /** The queue's name; every job of a flow must be in the same queue as the root. */
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

const FLOW_KEYS = new Set(['queue', 'data', 'name', 'opts', 'children']);

/** What a value that is not a flow job is, for a message: null, an array, or its type and text. */
function shape(value: unknown): string {
  if (value === null || value === undefined) return String(value);
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `${typeof value} ${showValue(value)}`;
}

/**
 * Admits a flow: the tree's jobs in one script call, each parent before its children. `wireOf`
 * resolves the root's queue by name (EchoMQ.queue's one object per name).
 */
export async function addFlow<D>(
  wireOf: (queue: string) => QueueWire,
  root: FlowJob<D>,
): Promise<FlowResult> {
  if (typeof root !== 'object' || root === null || typeof root.queue !== 'string') {
    throw new EchoMQError('EMQINPUT', 'a flow is { queue, data, name?, opts?, children? }');
  }
  const queue = wireOf(root.queue);
  const jobs: verbs.FlowAdmission[] = [];
  const seen = new Set<string>();
  // `at` names the job's place in the tree (root.children[0].children[2]) for the messages.
  const visit = (job: FlowJob, parent: string, at: string): FlowNode => {
    if (typeof job !== 'object' || job === null || Array.isArray(job)) {
      throw new EchoMQError(
        'EMQINPUT',
        `the flow job at ${at} must be an object { queue, data, name?, opts?, children? }, got ${shape(job)}`,
      );
    }
    knownKeys(job, FLOW_KEYS, `flow job field (at ${at})`);
    if (job.queue !== root.queue) {
      throw new EchoMQError(
        'EMQINPUT',
        `a flow's jobs must all be in the root's queue "${root.queue}", got "${String(job.queue)}": ` +
          'one script admits and releases them, and each queue is its own Redis Cluster hash slot',
      );
    }
    const { continueOnChildFailure, onChildFailure, ...opts } = job.opts ?? {};
    if (onChildFailure !== undefined && !['fail', 'remove', 'ignore'].includes(onChildFailure)) {
      throw new EchoMQError(
        'EMQINPUT',
        `onChildFailure must be 'fail', 'remove' or 'ignore', got ${String(onChildFailure)}`,
      );
    }
    if ('dedupe' in opts) throw new EchoMQError('EMQINPUT', 'dedupe is not supported on the jobs of a flow');
    const name = job.name ?? opts.name;
    const a = encodeJob(job.data, name === undefined ? opts : { ...opts, name }, queue.limits);
    if (a.retainCompleted || a.retainDead || a.tags || a.lifo || a.timeout) {
      throw new EchoMQError(
        'EMQINPUT',
        'removeOnComplete, removeOnFail, tags, lifo and timeoutMs are not supported on flow jobs yet',
      );
    }
    if (seen.has(a.id)) throw new EchoMQError('EMQINPUT', `job id ${a.id} appears twice in the flow`);
    seen.add(a.id);
    const policy =
      onChildFailure === 'ignore'
        ? 'ignore'
        : onChildFailure === 'remove' || (onChildFailure === undefined && continueOnChildFailure === true)
          ? '1'
          : '';
    jobs.push({ job: a, parent, onChildFailure: policy });
    const children = job.children ?? [];
    if (!Array.isArray(children)) {
      throw new EchoMQError(
        'EMQINPUT',
        `${at}.children must be an array of flow jobs, got ${shape(children)}`,
      );
    }
    return { id: a.id, children: children.map((c, i) => visit(c, a.id, `${at}.children[${i}]`)) };
  };
  const tree = visit(root as FlowJob, '', 'root');
  return { ...tree, status: await verbs.flowAdd(queue, jobs) };
}
