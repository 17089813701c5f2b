// The protocol, checked from outside the runtime: every conformance case in
// protocol/conformance/*.json replayed with nothing but a Redis client (as a Go or Elixir
// runtime would), every script's contract header, and every embedded lib block.
// The case format is described in protocol/conformance/README.md and protocol/SPEC.md.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadScripts, PROTOCOL_DIR, type Script } from '../src/scripts.js';
import { embedLibs, readProtocolLib } from '../tools/embed-lua.js';
import { useRedisServer } from './support/harness.js';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

type KeyExpectation =
  | 'absent'
  | { type: 'hash'; value: Record<string, string> }
  | { type: 'zset'; value: [member: string, score: number | string][] }
  | { type: 'set'; value: string[] }
  | { type: 'string'; value: string }
  | { type: 'stream'; length: number; last?: Record<string, string> };

interface ConformanceCase {
  name: string;
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

interface ConformanceFile {
  script: string;
  cases: ConformanceCase[];
}

/** How far a `$now` placeholder may be from the server's TIME, read once before a case's setup. */
const TOLERANCE_MS = 5000;
const NOW = /^\$now(?:([+-])(\d+))?$/;
const RANGE = /^\$range:(-?\d+):(-?\d+)$/;
/** `$now_us`: the server's TIME in µs (a lease token), within the same tolerance as `$now`. */
const NOW_US = '$now_us';

/** The key names a script's `-- KEYS:` line may use (SPEC.md, "Key taxonomy"). */
const KNOWN_KEYS = new Set([
  'job',
  'schedule',
  'pending',
  'active',
  'completed',
  'dead',
  'cancelled',
  'events',
  'wake',
  'meta',
  'ring',
  'repeat',
  'schedulers',
  'consumers',
]);

/** The BullMQ vocabulary the seeds fix for the events stream. */
const EVENT_NAMES = new Set([
  'added',
  'waiting',
  'active',
  'progress',
  'completed',
  'failed',
  'delayed',
  'stalled',
  'removed',
  'drained',
  'paused',
  'resumed',
  'duplicated',
  'deduplicated',
  'retries_exhausted',
  'waiting_children',
  'cleaned',
]);

const HEADER_LABELS = ['KEYS', 'ARGV', 'REPLY', 'ERRORS', 'EVENTS'] as const;

const scripts = loadScripts();
const conformanceDir = join(PROTOCOL_DIR, 'conformance');
const files: ConformanceFile[] = readdirSync(conformanceDir)
  .filter((f) => f.endsWith('.json'))
  .sort()
  .map((f) => JSON.parse(readFileSync(join(conformanceDir, f), 'utf8')) as ConformanceFile);

// ── comparing what Redis holds with what a case expects ──────────────────────

function show(value: unknown): string {
  return JSON.stringify(value) ?? String(value);
}

/** The instant a `$now`, `$now+N` or `$now-N` placeholder stands for. */
function instant(placeholder: string, now: number, path: string): number {
  const m = NOW.exec(placeholder);
  if (!m)
    throw new Error(
      `${path}: unknown placeholder ${placeholder} (known: $any, $now±N, $now_us, $range:A:B, $$…)`,
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

type Outcome = { reply: unknown } | { error: Error };

async function run(client: Redis, s: Script, keys: string[], argv: string[]): Promise<Outcome> {
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

async function serverNow(client: Redis): Promise<number> {
  const [sec, usec] = await client.time();
  return Number(sec) * 1000 + Math.floor(Number(usec) / 1000);
}

/** Replays one case and returns every way Redis differs from its expectations. */
async function replay(client: Redis, c: ConformanceCase): Promise<string[]> {
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
  const outcome = await run(client, s, c.call.keys, c.call.argv);

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

// ── the tests ────────────────────────────────────────────────────────────────

const holder = useRedisServer();

describe('conformance cases (protocol/conformance/*.json) replayed with a plain Redis client', () => {
  let client: Redis;
  beforeAll(() => {
    client = holder.server.client();
  });
  afterAll(async () => {
    await client.quit();
  });

  for (const file of files) {
    describe(file.script, () => {
      for (const c of file.cases) {
        it(c.name, async () => {
          expect(c.call.script, 'a file holds the cases of one script').toBe(file.script);
          expect(await replay(client, c)).toEqual([]);
        });
      }
    });
  }
});

describe('the conformance suite', () => {
  it('covers every protocol script with at least one case', () => {
    const covered = new Set(files.filter((f) => f.cases.length > 0).map((f) => f.script));
    expect([...scripts.keys()].filter((name) => !covered.has(name)).sort()).toEqual([]);
  });

  it('names only scripts that exist', () => {
    expect(files.map((f) => f.script).filter((name) => !scripts.has(name))).toEqual([]);
  });

  it('gives every case of a file a distinct name', () => {
    for (const f of files) {
      const names = f.cases.map((c) => c.name);
      expect(
        names.filter((n, i) => names.indexOf(n) !== i),
        f.script,
      ).toEqual([]);
    }
  });
});

/** A script's contract header: its leading comment block, up to the first code line or lib block. */
function contractHeader(body: string): string[] {
  const lines: string[] = [];
  for (const line of body.split('\n')) {
    if (!line.startsWith('--') || line.startsWith('-- >>>')) break;
    lines.push(line);
  }
  return lines;
}

describe('script contracts', () => {
  it('every script opens with its name and purpose, then KEYS, ARGV, REPLY, ERRORS and EVENTS in order', () => {
    const problems: string[] = [];
    for (const s of scripts.values()) {
      const lines = contractHeader(s.body);
      if (!new RegExp(`^-- ${s.name}: \\S`).test(lines[0] ?? '')) {
        problems.push(`${s.name}: first line should be "-- ${s.name}: <purpose>", got ${show(lines[0])}`);
      }
      let last = 0;
      for (const label of HEADER_LABELS) {
        const at = lines.findIndex((l) => l.startsWith(`-- ${label}:`));
        const count = lines.filter((l) => l.startsWith(`-- ${label}:`)).length;
        if (at < 0 || count !== 1) problems.push(`${s.name}: needs exactly one "-- ${label}:" line`);
        else if (at <= last) problems.push(`${s.name}: "-- ${label}:" is out of order`);
        else if ((lines[at] ?? '').slice(`-- ${label}:`.length).trim() === '') {
          problems.push(`${s.name}: "-- ${label}:" is empty`);
        }
        last = Math.max(last, at);
      }
    }
    expect(problems).toEqual([]);
  });

  it('every KEYS name in a contract is a key of the taxonomy', () => {
    const unknown = [...scripts.values()].flatMap((s) =>
      s.keys.filter((k) => !KNOWN_KEYS.has(k)).map((k) => `${s.name}: ${k}`),
    );
    expect(unknown).toEqual([]);
    for (const s of scripts.values()) expect(s.keys.length, `${s.name} lists its KEYS`).toBeGreaterThan(0);
  });

  it('every event a script emits is a name from the BullMQ vocabulary, with event and id first', () => {
    const problems: string[] = [];
    for (const s of scripts.values()) {
      for (const m of s.body.matchAll(/'XADD', [^,]+, ([^\n]*)/g)) {
        const rest = m[1] ?? '';
        if (/'\*', 'w', /.test(rest)) continue; // the wake stream: no event
        if (/'\*', 'event', event, 'id', ids\[1\]/.test(rest)) continue; // emit_batch's entry: below
        const name = /^'MAXLEN', '~', \w+, '\*', 'event', '(\w+)', 'id', /.exec(rest)?.[1];
        if (!name) problems.push(`${s.name}: an event is MAXLEN ~ capped and starts with event, id: ${rest}`);
        else if (!EVENT_NAMES.has(name)) problems.push(`${s.name}: ${name} is not in the vocabulary`);
      }
    }
    for (const s of scripts.values()) {
      for (const m of s.body.matchAll(/emit_batch\(K, emax, '(\w+)'/g)) {
        if (!EVENT_NAMES.has(m[1] ?? '')) problems.push(`${s.name}: ${m[1]} is not in the vocabulary`);
      }
    }
    expect(problems).toEqual([]);
  });

  it('every script carries the current copy of the protocol lib blocks', () => {
    const stale = [...scripts.values()]
      .filter((s) => embedLibs(s.body, readProtocolLib) !== s.body)
      .map((s) => `${s.name}.lua (run: npx tsx tools/embed-lua.ts)`);
    expect(stale).toEqual([]);
  });

  it('every lib block a script embeds names a file in protocol/lib', () => {
    const libs = new Set(readdirSync(join(PROTOCOL_DIR, 'lib')).map((f) => `lib/${f}`));
    const missing = [...scripts.values()].flatMap((s) =>
      [...s.body.matchAll(/^-- >>> (\S+)$/gm)].map((m) => m[1] ?? '').filter((name) => !libs.has(name)),
    );
    expect(missing).toEqual([]);
  });
});
