// Admission: one job's options checked and encoded once, as the admission scripts take them
// (enqueue's 9- or 13-field tuple, schedule's fields, flow_add's tuple; a scheduler's template
// uses the same priority, group, attempts and backoff rules). Every message here is checked word
// for word by the tests.
import { Backoff, type BackoffPolicy } from '../core/backoff.js';
import { assertName, atLeast, knownKeys, PRIORITY_MAX, wholeNumber } from '../core/check.js';
import { encodeJson } from '../core/codec.js';
import { EchoMQError, optionsObject, showValue } from '../core/errors.js';
import { assertJobId, mintJobId } from '../core/ids.js';
import type { DedupeOptions, EnqueueOptions, Retain } from '../core/types.js';
import type { QueueLimits } from './queue-wire.js';

/** The keys of a retention bound: a job's removeOnComplete/removeOnFail and configure's retention. */
export const RETAIN_KEYS: ReadonlySet<string> = new Set(['count', 'ageMs']);

const KNOWN_OPTIONS = new Set([
  'id',
  'name',
  'priority',
  'group',
  'attempts',
  'backoff',
  'dedupe',
  'removeOnComplete',
  'removeOnFail',
  'tags',
  'lifo',
  'timeoutMs',
]);
const DEDUPE_OPTIONS = new Set(['key', 'ttlMs', 'mode']);
const MAX_TAGS = 10;
const BAD_TAG = /[\s,\p{Cc}]/u;

/** One job as the admission scripts take it (enqueue's tuple; schedule and flow_add take these fields). */
export interface Admission {
  id: string;
  payload: string;
  priority: string;
  group: string;
  name: string;
  max: string;
  backoff: string;
  /** '' or the dedupe key, and its spec: 'throttle' | 'debounce', with ':<ttl_ms>' when given. */
  dedupeKey: string;
  dedupeSpec: string;
  /** The job's own retention ('' = the queue's), its tags joined by ',' ('' = none), lifo '1'/''. */
  retainCompleted: string;
  retainDead: string;
  tags: string;
  lifo: string;
  /** '' or the execution timeout per attempt in ms (enqueue's 14-field tuples, schedule). */
  timeout: string;
}

/** Validates and encodes one job for the admission scripts (enqueue, schedule, flow_add). */
export function encodeJob(
  data: unknown,
  options: EnqueueOptions | undefined,
  limits: QueueLimits,
): Admission {
  const opts = optionsObject(options, 'enqueue options');
  knownKeys(opts, KNOWN_OPTIONS, 'enqueue option');
  // A minted id is well formed by construction: only the caller's own is checked.
  let id: string;
  if (opts.id === undefined) id = mintJobId();
  else {
    id = opts.id;
    assertJobId(id);
  }
  if (opts.group !== undefined) assertName('group', opts.group);
  if (opts.name !== undefined) jobName(opts.name);
  const dedupe = dedupeFields(opts.dedupe);
  return {
    id,
    payload: encodeJson(data, 'job data', limits.maxPayloadBytes),
    priority: priorityOf(opts.priority),
    group: opts.group ?? '',
    name: opts.name ?? '',
    max: attemptsOf(opts.attempts ?? limits.defaultAttempts),
    backoff: backoffOf(opts.backoff),
    dedupeKey: dedupe.dedupeKey,
    dedupeSpec: dedupe.dedupeSpec,
    retainCompleted: retainSpec(opts.removeOnComplete, 'removeOnComplete'),
    retainDead: retainSpec(opts.removeOnFail, 'removeOnFail'),
    tags: tagList(opts.tags),
    lifo: lifoFlag(opts.lifo),
    timeout: opts.timeoutMs === undefined ? '' : String(atLeast(opts.timeoutMs, 'timeoutMs', 1)),
  };
}

/** The options a job scheduler's template takes: enqueue's priority, group, attempts and backoff. */
type TemplateOptions = Pick<EnqueueOptions, 'priority' | 'group' | 'attempts' | 'backoff'>;

const TEMPLATE_OPTIONS = new Set(['priority', 'group', 'attempts', 'backoff']);

/**
 * A scheduler template's options checked by enqueue's rules and encoded as its record keeps
 * them: `max` '' when the template names no attempts (each occurrence takes the queue's).
 */
export function encodeTemplateOptions(opts: TemplateOptions): {
  prio: string;
  group: string;
  max: string;
  backoff: string;
} {
  knownKeys(opts, TEMPLATE_OPTIONS, 'job option');
  if (opts.group !== undefined) assertName('group', opts.group);
  return {
    prio: priorityOf(opts.priority),
    group: opts.group ?? '',
    max: opts.attempts === undefined ? '' : attemptsOf(opts.attempts),
    backoff: backoffOf(opts.backoff),
  };
}

/** A job's name: a string of at most 200 characters. */
export function jobName(name: unknown): string {
  if (typeof name !== 'string' || name.length > 200) {
    throw new EchoMQError('EMQINPUT', 'name must be a string of at most 200 characters');
  }
  return name;
}

function priorityOf(priority: number | undefined): string {
  if (priority === undefined) return '0'; // most jobs: no check, no number to print
  return String(wholeNumber(priority, 'priority', 0, PRIORITY_MAX));
}

function attemptsOf(attempts: number): string {
  return String(wholeNumber(attempts, 'attempts', 1, 1_000_000));
}

function backoffOf(backoff: BackoffPolicy | undefined): string {
  return backoff === undefined ? '' : JSON.stringify(Backoff.validate(backoff));
}

/** True when a job needs enqueue's 13-field tuple (its own retention, tags or lifo) or more (a timeout). */
export function extended(j: Admission): boolean {
  return (
    j.retainCompleted !== '' || j.retainDead !== '' || j.tags !== '' || j.lifo !== '' || j.timeout !== ''
  );
}

/** A job's own retention as the row keeps it: '<count>:<age_ms>' (-1 = no bound), '' for none. */
function retainSpec(value: Retain | undefined, what: string): string {
  if (value === undefined || value === false) return '';
  if (value === true) return '0:-1';
  if (typeof value === 'number') return `${wholeNumber(value, what, 0)}:-1`;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new EchoMQError('EMQINPUT', `${what} must be true, a count, or { count, ageMs }`);
  }
  knownKeys(value, RETAIN_KEYS, `${what} option`);
  if (value.count === undefined && value.ageMs === undefined) {
    throw new EchoMQError('EMQINPUT', `${what} needs count, ageMs or both`);
  }
  const count = value.count === undefined ? -1 : wholeNumber(value.count, `${what}.count`, 0);
  const age = value.ageMs === undefined ? -1 : wholeNumber(value.ageMs, `${what}.ageMs`, 0);
  return `${count}:${age}`;
}

function lifoFlag(lifo: unknown): string {
  if (lifo === undefined || lifo === false) return '';
  if (lifo === true) return '1';
  throw new EchoMQError('EMQINPUT', `lifo must be true or false, got ${showValue(lifo)}`);
}

function tagList(tags: unknown): string {
  if (tags === undefined) return '';
  if (!Array.isArray(tags) || tags.length > MAX_TAGS) {
    throw new EchoMQError('EMQINPUT', `tags must be an array of at most ${MAX_TAGS} strings`);
  }
  for (const t of tags) {
    if (typeof t !== 'string' || t.length === 0 || t.length > 64 || BAD_TAG.test(t)) {
      throw new EchoMQError(
        'EMQINPUT',
        `a tag must be 1-64 characters without spaces, commas or control characters, got ${showValue(t)}`,
      );
    }
  }
  return [...new Set(tags as string[])].join(',');
}

const NO_DEDUPE: { readonly dedupeKey: string; readonly dedupeSpec: string } = {
  dedupeKey: '',
  dedupeSpec: '',
};

function dedupeFields(d: DedupeOptions | undefined): {
  readonly dedupeKey: string;
  readonly dedupeSpec: string;
} {
  if (d === undefined) return NO_DEDUPE;
  if (typeof d !== 'object' || d === null) {
    throw new EchoMQError(
      'EMQINPUT',
      "dedupe must be an object { key, mode: 'throttle' | 'debounce', ttlMs? }",
    );
  }
  knownKeys(d, DEDUPE_OPTIONS, 'dedupe option');
  if (typeof d.key !== 'string' || d.key.length === 0 || d.key.length > 200) {
    throw new EchoMQError('EMQINPUT', 'dedupe.key must be a string of 1-200 characters');
  }
  if (d.mode !== 'throttle' && d.mode !== 'debounce') {
    throw new EchoMQError(
      'EMQINPUT',
      `dedupe.mode must be 'throttle' or 'debounce', got ${showValue(d.mode)}`,
    );
  }
  const ttl = d.ttlMs === undefined ? '' : `:${wholeNumber(d.ttlMs, 'dedupe.ttlMs', 1)}`;
  return { dedupeKey: d.key, dedupeSpec: d.mode + ttl };
}
