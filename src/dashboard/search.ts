// Finding jobs on the dashboard: the query a queue page's filter form sends (?state, ?lane,
// ?tag, ?name, ?error, ?text, ?offset, ?limit), read and checked once, and the page of jobs it asks for.
// A filter by name, error or text has no index to use: it reads the state's jobs in list order, at most
// SEARCH_SCAN of them, and says how far it read (the page shows the bound), so a bounded search
// is never mistaken for "there are none". A tag alone uses the Inspector's tag read.
import { JOB_STATES, type JobState } from '../core/types.js';
import type { Inspector, ListedJob } from '../inspect/inspector.js';
import { HttpError } from './http.js';

export const PAGE_SIZE = 25;
export const MAX_PAGE_SIZE = 200;
/** The most jobs of one state a name or text filter reads (the Inspector's find bound). */
export const SEARCH_SCAN = 10_000;
/** The most matches a filtered list holds (find's most): its pages slice them. */
export const MAX_MATCHES = 1000;

export interface JobQuery {
  state: JobState;
  /** Pending jobs of this lane only. */
  lane: string | undefined;
  tag: string | undefined;
  /** Jobs of exactly this name. */
  name: string | undefined;
  /** Text the job's error message contains (case-sensitive, as retryAll's error filter). */
  error: string | undefined;
  /** Text the job's data or error message contains (case-insensitive). */
  text: string | undefined;
  offset: number;
  limit: number;
}

export interface JobListing extends JobQuery {
  /** Jobs in the state (and lane) in all, or, filtered, the matches found among those read. */
  total: number;
  jobs: readonly ListedJob[];
  /** With a name or text filter: how many jobs of the state were read, of `inState`. */
  search?: {
    scanned: number;
    inState: number;
    bound: number;
    /** Every job of the state was read and fewer than MAX_MATCHES matched: total is exact. */
    complete: boolean;
  };
  /** With a tag alone: the read stopped at the Inspector's bound. */
  partial?: boolean;
}

function wholeParam(value: string | null, what: string, fallback: number, max: number): number {
  if (value === null || value === '') return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > max)
    throw new HttpError(400, `${what} must be a whole number from 0 to ${max}`);
  return n;
}

function stateParam(value: string | null, fallback: JobState): JobState {
  if (value === null || value === '') return fallback;
  if (!(JOB_STATES as readonly string[]).includes(value)) {
    throw new HttpError(400, `state must be one of ${JOB_STATES.join(', ')}`);
  }
  return value as JobState;
}

/** The query of a jobs list: a lane implies state pending (a lane holds waiting jobs only). */
export function jobQuery(query: URLSearchParams): JobQuery {
  const text = (name: string) => query.get(name)?.trim() || undefined;
  const lane = text('lane');
  return {
    state: lane === undefined ? stateParam(query.get('state'), 'pending') : 'pending',
    lane,
    tag: text('tag'),
    name: text('name'),
    error: text('error'),
    text: text('text'),
    offset: wholeParam(query.get('offset'), 'offset', 0, Number.MAX_SAFE_INTEGER),
    limit: Math.max(1, wholeParam(query.get('limit'), 'limit', PAGE_SIZE, MAX_PAGE_SIZE)),
  };
}

/** True when the query filters by more than state and lane. */
export function filtered(q: JobQuery): boolean {
  return q.tag !== undefined || q.name !== undefined || q.error !== undefined || q.text !== undefined;
}

/** The page of jobs a query asks for. */
export async function listJobs(inspector: Inspector, queue: string, q: JobQuery): Promise<JobListing> {
  const group = q.lane === undefined ? {} : { group: q.lane };
  if (q.name === undefined && q.error === undefined && q.text === undefined) {
    const page = await inspector.jobs(queue, q.state, {
      offset: q.offset,
      limit: q.limit,
      ...group,
      ...(q.tag === undefined ? {} : { tag: q.tag }),
    });
    return { ...q, total: page.total, jobs: page.jobs, ...(page.partial ? { partial: true } : {}) };
  }
  const found = await inspector.find(queue, q.state, {
    ...group,
    ...(q.name === undefined ? {} : { name: q.name }),
    ...(q.error === undefined ? {} : { error: q.error }),
    ...(q.text === undefined ? {} : { grep: q.text }),
    ...(q.tag === undefined ? {} : { tag: q.tag }),
    limit: MAX_MATCHES,
    scan: SEARCH_SCAN,
  });
  return {
    ...q,
    total: found.jobs.length,
    jobs: found.jobs.slice(q.offset, q.offset + q.limit),
    search: {
      scanned: found.scanned,
      inState: found.total,
      bound: SEARCH_SCAN,
      complete: found.scanned >= found.total && found.jobs.length < MAX_MATCHES,
    },
  };
}

/** One line of a job's data for a list: compact JSON, cut at `max` characters. */
export function dataPreview(data: unknown, max = 80): string {
  let text: string;
  try {
    text = typeof data === 'string' ? data : (JSON.stringify(data) ?? '');
  } catch {
    text = String(data);
  }
  text = text.replace(/\s+/g, ' ');
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}
