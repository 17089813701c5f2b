// The dashboard's actions on many jobs: the checked rows of a list (promote, retry, cancel or
// remove each, at most one page of them, answered with what each did), and the long ones run as tasks
// (tasks.ts): retry all or every match of a name and error filter, clean an ended state, drain
// the waiting jobs. Each goes through the Queue's verbs, which check every job's state again.
import { EchoMQError } from '../core/errors.js';
import type { Queue } from '../queue/queue.js';
import { HttpError } from './http.js';
import { MAX_PAGE_SIZE } from './search.js';
import type { Tasks, TaskView } from './tasks.js';

export type BulkVerb = 'promote' | 'retry' | 'cancel' | 'remove';
const VERBS: readonly BulkVerb[] = ['promote', 'retry', 'cancel', 'remove'];

export interface BulkResult {
  action: BulkVerb;
  /** Jobs the verb took (cancel: ended at once or asked to stop). */
  done: number;
  /** Jobs it refused, with why (ended meanwhile, running, gone). */
  refused: { id: string; error: string }[];
}

/** The checked ids of a form: one a line (http.ts joins a repeated field so), or comma-separated. */
function idsOf(fields: Readonly<Record<string, string>>): string[] {
  const ids = [...new Set((fields.id ?? fields.ids ?? '').split(/[\n,]/).filter((s) => s !== ''))];
  if (ids.length === 0) throw new HttpError(400, 'select at least one job (field id)');
  if (ids.length > MAX_PAGE_SIZE) {
    throw new HttpError(400, `at most ${MAX_PAGE_SIZE} jobs at once (a page); use Retry all for more`);
  }
  return ids;
}

/** Runs promote (run now), retry, cancel or remove on each checked job; a refusal is reported, not thrown. */
export async function bulkAction(
  queue: Queue,
  fields: Readonly<Record<string, string>>,
): Promise<BulkResult> {
  const action = fields.action as BulkVerb;
  if (!VERBS.includes(action)) throw new HttpError(400, `action must be one of ${VERBS.join(', ')}`);
  const ids = idsOf(fields);
  const result: BulkResult = { action, done: 0, refused: [] };
  // A page of calls at once: pipelined by the connection, so one page costs about one round trip.
  await Promise.all(
    ids.map(async (id) => {
      try {
        if (action === 'promote') await queue.promote(id);
        else if (action === 'retry') await queue.retry(id);
        else if (action === 'cancel') await queue.cancel(id);
        else if (!(await queue.remove(id))) throw new EchoMQError('EMQNOJOB', `no job ${id}`);
        result.done += 1;
      } catch (err) {
        if (!(err instanceof EchoMQError)) throw err;
        result.refused.push({ id, error: err.message });
      }
    }),
  );
  return result;
}

const ENDED = ['dead', 'cancelled', 'completed'] as const;
type Ended = (typeof ENDED)[number];

function endedState(value: string | undefined, what: string): Ended {
  const state = (value || 'dead') as Ended;
  if (!ENDED.includes(state)) throw new HttpError(400, `${what} state must be one of ${ENDED.join(', ')}`);
  return state;
}

/** Retry all jobs of an ended state, or those of a name and/or whose error contains a text. */
export function retryAllTask(tasks: Tasks, queue: Queue, fields: Readonly<Record<string, string>>): TaskView {
  const state = endedState(fields.state, 'retry-all');
  const name = fields.name || undefined;
  const error = fields.error || undefined;
  const label = `retry ${state} jobs${name ? ` named ${name}` : ''}${error ? ` whose error contains ${JSON.stringify(error)}` : ''}`;
  return tasks.start(queue.name, label, (progress) =>
    queue.retryAll({
      state,
      ...(name === undefined ? {} : { name }),
      ...(error === undefined ? {} : { error }),
      // retryAll's total counts the whole state; with a filter only the matches found are known.
      onProgress: ({ retried, total }) => progress(retried, name || error ? null : total),
    }),
  );
}

/** Cleans an ended state (optionally only jobs older than ?olderThanMs), 1000 per call. */
export function cleanTask(tasks: Tasks, queue: Queue, fields: Readonly<Record<string, string>>): TaskView {
  const state = endedState(fields.state, 'clean');
  const olderThanMs = fields.olderThanMs ? Number(fields.olderThanMs) : 0;
  if (!Number.isInteger(olderThanMs) || olderThanMs < 0) {
    throw new HttpError(400, 'olderThanMs must be a whole number of ms, 0 or more');
  }
  return tasks.start(queue.name, `clean ${state} jobs`, async (progress) => {
    let deleted = 0;
    for (;;) {
      const n = await queue.clean({ state, olderThanMs, limit: 1000 });
      deleted += n;
      progress(deleted, null);
      if (n < 1000) return deleted;
    }
  });
}

/** Deletes every waiting job (pending and lanes; with scheduled=1 the scheduled ones too). */
export function drainTask(tasks: Tasks, queue: Queue, fields: Readonly<Record<string, string>>): TaskView {
  const scheduled = fields.scheduled === '1' || fields.scheduled === 'on';
  return tasks.start(queue.name, `drain waiting${scheduled ? ' and scheduled' : ''} jobs`, (progress) =>
    queue.drain({ scheduled, onProgress: ({ deleted }) => progress(deleted, null) }),
  );
}
