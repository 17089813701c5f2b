// The conformance replayer: a case of protocol/conformance/*.json replayed with nothing but a
// Redis client (as a Go or Elixir runtime would), and every way Redis then differs from what the
// case expects. The format is described in protocol/conformance/README.md and protocol/SPEC.md.
// test/protocol/conformance.test.ts replays every case as its script; test/module/module.test.ts replays the
// sweeps' cases as the native module's commands.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { buildLibrary } from '../../src/wire/library.js';
import { loadScripts, PROTOCOL_DIR, type Script } from '../../src/wire/scripts.js';

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

type KeyExpectation =
  | 'absent'
  | { type: 'hash'; value: Record<string, string> }
  | { type: 'zset'; value: [member: string, score: number | string][] }
  | { type: 'set'; value: string[] }
  | { type: 'list'; value: string[] }
  | { type: 'string'; value: string }
  | { type: 'stream'; length: number; last?: Record<string, string> };

export interface ConformanceCase {
  name: string;
  /** The SPEC feature level the case needs (SPEC 22.2, 23); absent: 1. */
  level?: number;
  queue: string;
  setup: string[][];
  call: { script: string; keys: string[]; argv: string[] };
  expect: {
    reply?: Json;
    error?: string;
    keys?: Record<string, KeyExpectation>;
    events?: Record<string, string>[];
  };
}

export interface ConformanceFile {
  script: string;
  cases: ConformanceCase[];
}

/**
 * The highest SPEC feature level this replayer knows (SPEC 22.2): a case that needs a later one,
 * or a placeholder it does not know, is refused naming the level, never replayed half-understood.
 */
export const KNOWN_LEVEL = 2;

/** How far a `$now` placeholder may be from the server's TIME, read once before a case's setup. */
const TOLERANCE_MS = 5000;
const NOW = /^\$now(?:([+-])(\d+))?$/;
const RANGE = /^\$range:(-?\d+):(-?\d+)$/;
/** `$now_us`: the server's TIME in µs (a lease token), within the same tolerance as `$now`. */
const NOW_US = '$now_us';

export const scripts = loadScripts();
/** The same scripts as one Functions library, as the TypeScript runtime sends them by FCALL. */
const library = buildLibrary(scripts.values());
const conformanceDir = join(PROTOCOL_DIR, 'conformance');
export const files: ConformanceFile[] = readdirSync(conformanceDir)
  .filter((f) => f.endsWith('.json'))
  .sort()
  .map((f) => JSON.parse(readFileSync(join(conformanceDir, f), 'utf8')) as ConformanceFile);

// ── comparing what Redis holds with what a case expects ──────────────────────

export function show(value: unknown): string {
  return JSON.stringify(value) ?? String(value);
}

/** The instant a `$now`, `$now+N` or `$now-N` placeholder stands for. */
function instant(placeholder: string, now: number, path: string): number {
  const m = NOW.exec(placeholder);
  if (!m)
    throw new Error(
      `${path}: unknown placeholder ${placeholder}: this replayer knows those of SPEC level ${KNOWN_LEVEL} ($any, $now±N, $now_us, $range:A:B, $$…); a later level's case needs a replayer of that level (SPEC 23)`,
    );
  return now + (m[1] === '-' ? -1 : 1) * Number(m[2] ?? 0);
}

/** A setup argument with its placeholder resolved: `$now±N` to an instant, `$$x` to `$x`. */
function setupArg(arg: string, now: number): string {
  if (arg.startsWith('$$')) return arg.slice(1);
  return arg.startsWith('$') ? String(instant(arg, now, 'setup')) : arg;
}

/** Pushes one line per mismatch between an expected JSON value (with placeholders) and a reply. */
function compare(expected: Json, actual: unknown, now: number, path: string, out: string[]): void {
  if (typeof expected === 'string' && expected.startsWith('$')) {
    if (expected.startsWith('$$')) {
      if (actual !== expected.slice(1))
        out.push(`${path}: expected ${show(expected.slice(1))}, got ${show(actual)}`);
      return;
    }
    if (expected === '$any') {
      if (actual === undefined || actual === null) out.push(`${path}: expected a value, got ${show(actual)}`);
      return;
    }
    const n =
      typeof actual === 'number'
        ? actual
        : typeof actual === 'string' && /^-?\d+$/.test(actual)
          ? Number(actual)
          : NaN;
    if (expected === NOW_US) {
      if (!Number.isInteger(n) || Math.abs(n - now * 1000) > TOLERANCE_MS * 1000) {
        out.push(
          `${path}: expected $now_us (${now * 1000} ± ${TOLERANCE_MS * 1000} µs), got ${show(actual)}`,
        );
      }
      return;
    }
    const range = RANGE.exec(expected);
    if (range) {
      if (!Number.isInteger(n) || n < Number(range[1]) || n > Number(range[2])) {
        out.push(`${path}: expected an integer in [${range[1]}, ${range[2]}], got ${show(actual)}`);
      }
      return;
    }
    const target = instant(expected, now, path);
    if (!Number.isInteger(n) || Math.abs(n - target) > TOLERANCE_MS) {
      out.push(`${path}: expected ${expected} (${target} ± ${TOLERANCE_MS} ms), got ${show(actual)}`);
    }
    return;
  }
  if (Array.isArray(expected)) {
    if (!Array.isArray(actual) || actual.length !== expected.length) {
      out.push(`${path}: expected ${show(expected)}, got ${show(actual)}`);
      return;
    }
    expected.forEach((e, i) => {
      compare(e, actual[i], now, `${path}[${i}]`, out);
    });
    return;
  }
  if (expected !== null && typeof expected === 'object') {
    throw new Error(`${path}: an expected reply holds no objects (Redis replies are scalars and arrays)`);
  }
  if (actual !== expected) out.push(`${path}: expected ${show(expected)}, got ${show(actual)}`);
}

/** A score as a number: Redis writes infinities as `inf`, `+inf` and `-inf`. */
function scoreValue(v: number | string): number {
  if (v === 'inf' || v === '+inf') return Number.POSITIVE_INFINITY;
  if (v === '-inf') return Number.NEGATIVE_INFINITY;
  return Number(v);
}

/** A zset score: a placeholder, or a number (or decimal text, or `inf`) compared numerically. */
function compareScore(
  expected: number | string,
  actual: string,
  now: number,
  path: string,
  out: string[],
): void {
  if (typeof expected === 'string' && expected.startsWith('$')) {
    compare(expected, actual, now, path, out);
  } else if (scoreValue(expected) !== scoreValue(actual)) {
    out.push(`${path}: expected score ${show(expected)}, got ${show(actual)}`);
  }
}

async function compareKey(
  client: Redis,
  key: string,
  expected: KeyExpectation,
  now: number,
  out: string[],
): Promise<void> {
  const type = await client.type(key);
  if (expected === 'absent') {
    if (type !== 'none') out.push(`${key}: expected absent, found a ${type}`);
    return;
  }
  if (type !== expected.type) {
    out.push(`${key}: expected a ${expected.type}, found ${type === 'none' ? 'no key' : `a ${type}`}`);
    return;
  }
  switch (expected.type) {
    case 'hash': {
      const actual = await client.hgetall(key);
      const fields = new Set([...Object.keys(expected.value), ...Object.keys(actual)]);
      for (const f of [...fields].sort()) {
        if (!(f in actual)) out.push(`${key} ${f}: expected ${show(expected.value[f])}, field absent`);
        else if (!(f in expected.value)) out.push(`${key} ${f}: unexpected field, value ${show(actual[f])}`);
        else compare(expected.value[f] as Json, actual[f], now, `${key} ${f}`, out);
      }
      return;
    }
    case 'zset': {
      const flat = await client.zrange(key, 0, -1, 'WITHSCORES');
      const members = flat.filter((_, i) => i % 2 === 0);
      if (members.length !== expected.value.length) {
        out.push(`${key}: expected ${show(expected.value)}, got ${show(flat)}`);
        return;
      }
      expected.value.forEach(([member, score], i) => {
        if (members[i] !== member)
          out.push(`${key}[${i}]: expected member ${member}, got ${show(members[i])}`);
        compareScore(score, flat[i * 2 + 1] ?? '', now, `${key}[${i}] ${member} score`, out);
      });
      return;
    }
    case 'set': {
      const actual = (await client.smembers(key)).sort();
      compare([...expected.value].sort(), actual, now, key, out);
      return;
    }
    case 'list':
      compare(expected.value, await client.lrange(key, 0, -1), now, key, out);
      return;
    case 'string':
      compare(expected.value, await client.get(key), now, key, out);
      return;
    case 'stream': {
      const length = await client.xlen(key);
      if (length !== expected.length) out.push(`${key}: expected ${expected.length} entries, got ${length}`);
      if (expected.last) {
        const [entry] = await client.xrevrange(key, '+', '-', 'COUNT', 1);
        const flat = entry?.[1] ?? [];
        const fields: Record<string, string> = {};
        for (let i = 0; i + 1 < flat.length; i += 2) fields[flat[i]!] = flat[i + 1]!;
        for (const [field, value] of Object.entries(expected.last)) {
          compare(value, fields[field], now, `${key} last entry ${field}`, out);
        }
      }
      return;
    }
  }
}

/** The fields of one stream entry as a map, checking the protocol rule that `event`, `id` lead. */
function eventFields(entry: [string, string[]], out: string[]): Record<string, string> {
  const [id, flat] = entry;
  if (flat[0] !== 'event' || flat[2] !== 'id') {
    out.push(`event ${id}: the first fields must be event and id, got ${show(flat)}`);
  }
  const fields: Record<string, string> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) fields[flat[i]!] = flat[i + 1]!;
  return fields;
}

/** The KEYS of a case must follow the script's contract: same count, same names, same order. */
function keysFollowContract(c: ConformanceCase, s: Script): string[] {
  const prefix = `emq:{${c.queue}}:`;
  const problems: string[] = [];
  if (c.call.keys.length !== s.keys.length) {
    problems.push(
      `call.keys has ${c.call.keys.length} keys, the contract of ${s.name} lists ${s.keys.length}`,
    );
  }
  s.keys.forEach((name, i) => {
    const key = c.call.keys[i] ?? '';
    const ok =
      name === 'job'
        ? key.startsWith(`${prefix}job:`) && key.length > prefix.length + 4
        : key === prefix + name;
    if (!ok) problems.push(`KEYS[${i + 1}] should be the ${name} key under ${prefix}, got ${show(key)}`);
  });
  return problems;
}

export type Outcome = { reply: unknown } | { error: Error };

/** Runs a case's call as a script: EVALSHA, and EVAL on NOSCRIPT. */
export async function runScript(client: Redis, s: Script, keys: string[], argv: string[]): Promise<Outcome> {
  try {
    return { reply: await client.evalsha(s.sha, keys.length, ...keys, ...argv) };
  } catch (err) {
    if (!(err instanceof Error)) throw err;
    if (!err.message.startsWith('NOSCRIPT')) return { error: err };
  }
  try {
    return { reply: await client.eval(s.body, keys.length, ...keys, ...argv) };
  } catch (err) {
    if (!(err instanceof Error)) throw err;
    return { error: err };
  }
}

/**
 * Runs a case's call as the library's function (src/wire/library.ts): FCALL, and FUNCTION LOAD
 * once when the server does not have it yet. Same case, same expectations as runScript.
 */
export async function runFunction(
  client: Redis,
  s: Script,
  keys: string[],
  argv: string[],
): Promise<Outcome> {
  const fn = library.functions.get(s.name)?.name ?? `(no function for ${s.name})`;
  const send = () => client.call('FCALL', fn, keys.length, ...keys, ...argv);
  try {
    try {
      return { reply: await send() };
    } catch (err) {
      if (!(err instanceof Error && err.message.startsWith('ERR Function not found'))) throw err;
    }
    await client.call('FUNCTION', 'LOAD', 'REPLACE', library.code);
    return { reply: await send() };
  } catch (err) {
    if (!(err instanceof Error)) throw err;
    return { error: err };
  }
}

async function serverNow(client: Redis): Promise<number> {
  const [sec, usec] = await client.time();
  return Number(sec) * 1000 + Math.floor(Number(usec) / 1000);
}

/** How a case's call reaches Redis: as the script (the default), or as a module command. */
export type CallRunner = (client: Redis, s: Script, keys: string[], argv: string[]) => Promise<Outcome>;

/** Replays one case and returns every way Redis differs from its expectations. */
export async function replay(
  client: Redis,
  c: ConformanceCase,
  call: CallRunner = runScript,
): Promise<string[]> {
  if ((c.level ?? 1) > KNOWN_LEVEL) {
    return [`the case needs SPEC level ${c.level}; this replayer knows level ${KNOWN_LEVEL} (SPEC 22.2, 23)`];
  }
  const s = scripts.get(c.call.script);
  if (!s) return [`no script protocol/scripts/${c.call.script}.lua`];
  const contract = keysFollowContract(c, s);
  if (contract.length > 0) return contract;
  if ('reply' in c.expect === 'error' in c.expect) return ['expect needs exactly one of reply and error'];

  await client.flushall();
  const now = await serverNow(client);
  for (const command of c.setup) {
    const [name, ...args] = command.map((arg) => setupArg(arg, now));
    await client.call(name!, ...args);
  }
  const eventsKey = `emq:{${c.queue}}:events`;
  const before = await client.xrevrange(eventsKey, '+', '-', 'COUNT', 1);
  const outcome = await call(client, s, c.call.keys, c.call.argv);

  const out: string[] = [];
  if ('error' in outcome) {
    const code = c.expect.error;
    const msg = outcome.error.message;
    if (code === undefined) out.push(`reply: expected ${show(c.expect.reply)}, got error ${show(msg)}`);
    else if (msg !== code && !msg.startsWith(`${code} `))
      out.push(`error: expected ${code}, got ${show(msg)}`);
  } else if (c.expect.error !== undefined) {
    out.push(`error: expected ${c.expect.error}, got reply ${show(outcome.reply)}`);
  } else {
    compare(c.expect.reply as Json, outcome.reply, now, 'reply', out);
  }

  for (const [key, expected] of Object.entries(c.expect.keys ?? {})) {
    await compareKey(client, key, expected, now, out);
  }

  const start = before[0] ? `(${before[0][0]}` : '-';
  const entries = await client.xrange(eventsKey, start, '+');
  const expectedEvents = c.expect.events ?? [];
  const actualEvents = entries.map((e) => eventFields(e, out));
  if (actualEvents.length !== expectedEvents.length) {
    out.push(`events: expected ${show(expectedEvents)}, got ${show(actualEvents)}`);
  } else {
    expectedEvents.forEach((fields, i) => {
      for (const [field, value] of Object.entries(fields)) {
        compare(value, actualEvents[i]?.[field], now, `events[${i}].${field}`, out);
      }
    });
  }
  return out;
}
