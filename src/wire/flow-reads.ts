// Reading a flow: the tree under a job with every job's state (queue.flow(id)), and a parent's
// children one page at a time, pending and processed (queue.dependencies(id)). Both read the
// children index flow_add writes (P job:<id>:deps: the children in admission order, a child in
// another queue named '<its prefix><its id>') and P job:<id>:processed (the children the parent
// has counted). Plain reads: a flow that changes while it is read may show either side of a move.

import { wholeNumber } from '../core/check.js';
import { EchoMQError, optionsObject } from '../core/errors.js';
import type { JobState } from '../core/types.js';
import type { Connector } from './connector.js';
import { Keyspace, remoteParent } from './keyspace.js';

/** A job of a flow with its state; `state` 'missing' when its row is gone (removed, retention). */
export interface FlowTree {
  id: string;
  queue: string;
  name?: string;
  state: JobState | 'missing';
  children: FlowTree[];
}

/** One child of a parent, with what the parent recorded of it once processed. */
export interface Dependency {
  id: string;
  queue: string;
  /** The child's encoded result's value, for a completed child (results). */
  result?: unknown;
  /** '<outcome>: <error>' for a child that failed a parent ignoring failures (failures). */
  failure?: string;
}

export interface DependencyPage {
  /** Children the parent has counted (completed, or ended otherwise), this page's share. */
  processed: Dependency[];
  /** Children the parent still waits for, this page's share. */
  pending: Dependency[];
  /** The cursor of the next page; 0 when this was the last. */
  cursor: number;
}

/** At most this many jobs are read for one flow tree (a bigger flow: page with dependencies). */
const TREE_LIMIT = 10_000;

/** A stored result's value; text that is not JSON as that text (tools show it so). */
function decoded(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function childOf(ref: string, queue: string): { id: string; queue: string } {
  return remoteParent(ref) ?? { id: ref, queue };
}

/** The tree under job `id` of queue `queue`, or null when no such job. */
export async function readFlow(connector: Connector, queue: string, id: string): Promise<FlowTree | null> {
  const client = connector.client;
  let read = 0;
  const visit = async (q: string, job: string): Promise<FlowTree> => {
    if (++read > TREE_LIMIT) {
      throw new EchoMQError(
        'EMQINPUT',
        `the flow has more than ${TREE_LIMIT} jobs: read it with queue.dependencies(id)`,
      );
    }
    const keys = new Keyspace(q);
    const [row, refs] = await Promise.all([
      client.hmget(keys.job(job), 'state', 'name'),
      client.zrange(keys.deps(job), 0, -1),
    ]);
    const children = await Promise.all(refs.map((r) => childOf(r, q)).map((c) => visit(c.queue, c.id)));
    const node: FlowTree = { id: job, queue: q, state: (row[0] as JobState | null) ?? 'missing', children };
    if (row[1]) node.name = row[1];
    return node;
  };
  const tree = await visit(queue, id);
  return tree.state === 'missing' ? null : tree;
}

/** One page of a parent's children, in admission order. */
export async function readDependencies(
  connector: Connector,
  queue: string,
  id: string,
  options?: { cursor?: number; count?: number },
): Promise<DependencyPage> {
  const opts = optionsObject(options, 'dependencies options');
  const cursor = wholeNumber(opts.cursor ?? 0, 'cursor', 0);
  const count = wholeNumber(opts.count ?? 100, 'count', 1, 10_000);
  const client = connector.client;
  const keys = new Keyspace(queue);
  const refs = await client.zrange(keys.deps(id), cursor, cursor + count - 1);
  const page: DependencyPage = { processed: [], pending: [], cursor: 0 };
  if (refs.length === 0) return page;
  const pipe = client.pipeline();
  for (const r of refs) pipe.sismember(keys.processed(id), r);
  const ids = refs.map((r) => childOf(r, queue).id);
  pipe.hmget(keys.results(id), ...ids);
  pipe.hmget(keys.failures(id), ...ids);
  pipe.zcard(keys.deps(id));
  const replies = ((await pipe.exec()) ?? []).map(([err, v]) => {
    if (err) throw err;
    return v;
  });
  const results = replies[refs.length] as (string | null)[];
  const failures = replies[refs.length + 1] as (string | null)[];
  for (const [i, r] of refs.entries()) {
    const dep: Dependency = childOf(r, queue);
    if (replies[i] === 1) {
      const result = results[i];
      if (result !== null && result !== undefined && result !== '') dep.result = decoded(result);
      if (failures[i]) dep.failure = failures[i]!;
      page.processed.push(dep);
    } else page.pending.push(dep);
  }
  const total = replies[refs.length + 2] as number;
  page.cursor = cursor + refs.length < total ? cursor + refs.length : 0;
  return page;
}
