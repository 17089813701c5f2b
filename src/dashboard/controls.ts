// The dashboard's controls beyond one job: a lane's pause, resume, concurrency and rate limit
// (the Lanes verbs), a job scheduler's run now and remove, a repeat's remove (JobSchedulers,
// Repeat). A form's text is read here into what the verb takes, and the verb checks it again;
// each answer carries the sentence the page's toast shows (assets-controls.ts).
import type { Queue } from '../queue/queue.js';
import { HttpError } from './http.js';

type Fields = Readonly<Record<string, string>>;

/** What a control did, in a sentence for the toast. */
export interface ControlResult {
  message: string;
}

/** A whole number typed into a form (empty or not a number is refused, not read as 0). */
function whole(fields: Fields, field: string, what: string): number {
  const text = (fields[field] ?? '').trim();
  if (!/^\d{1,15}$/.test(text)) throw new HttpError(400, `${what}: give a whole number (field ${field})`);
  return Number(text);
}

/** A submit button named `do`: "clear" removes the setting, anything else sets it. */
const clearing = (fields: Fields) => fields.do === 'clear';

// ── lanes ───────────────────────────────────────────────────────────────────

export async function pauseLane(queue: Queue, lane: string): Promise<ControlResult> {
  const was = await queue.lanes.pause(lane);
  return {
    message: was
      ? `lane ${lane} paused: its jobs wait, running ones finish`
      : `lane ${lane} was already paused`,
  };
}

export async function resumeLane(queue: Queue, lane: string): Promise<ControlResult> {
  const was = await queue.lanes.resume(lane);
  return { message: was ? `lane ${lane} resumed` : `lane ${lane} was not paused` };
}

/** Sets the lane's concurrency (0 = unlimited), or with do=clear removes its own setting. */
export async function laneConcurrency(queue: Queue, lane: string, fields: Fields): Promise<ControlResult> {
  if (clearing(fields)) {
    await queue.lanes.configure(lane, { concurrency: null });
    return { message: `lane ${lane}: own concurrency removed (the default for lanes applies)` };
  }
  const n = whole(fields, 'concurrency', 'concurrency');
  await queue.lanes.configure(lane, { concurrency: n });
  return { message: `lane ${lane}: concurrency ${n === 0 ? 'unlimited' : n}` };
}

/** Sets the lane's rate limit (max claims per perMs), or with do=clear removes it. */
export async function laneRate(queue: Queue, lane: string, fields: Fields): Promise<ControlResult> {
  if (clearing(fields)) {
    await queue.lanes.configure(lane, { rateLimit: null });
    return { message: `lane ${lane}: rate limit removed` };
  }
  const max = whole(fields, 'max', 'rate limit max');
  const perMs = whole(fields, 'perMs', 'rate limit window (ms)');
  await queue.lanes.configure(lane, { rateLimit: { max, perMs } });
  return { message: `lane ${lane}: at most ${max} per ${perMs} ms` };
}

// ── schedulers and repeats ──────────────────────────────────────────────────

export async function runScheduler(queue: Queue, id: string): Promise<ControlResult & { jobId: string }> {
  const jobId = await queue.schedulers.runNow(id);
  return { jobId, message: `scheduler ${id}: occurrence ${jobId} runs now` };
}

export async function removeScheduler(queue: Queue, id: string): Promise<ControlResult> {
  if (!(await queue.schedulers.remove(id)))
    throw new HttpError(404, `no scheduler ${id} in queue ${queue.name}`);
  return { message: `scheduler ${id} removed, with its upcoming occurrence` };
}

export async function removeRepeat(queue: Queue, name: string): Promise<ControlResult> {
  if (!(await queue.repeat.unregister(name)))
    throw new HttpError(404, `no repeat ${name} in queue ${queue.name}`);
  return { message: `repeat ${name} removed, with its upcoming occurrence` };
}
