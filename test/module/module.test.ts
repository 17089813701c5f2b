// The native module (module/): EMQ.PROMOTE and EMQ.STALLED.CHECK on a module-loaded redis-server
// must do what promote.lua and sweep_stalled.lua do. Proven three ways: every conformance case of
// the two scripts replayed as the module command (both the script's KEYS and the seeds' short
// form); random queue states swept once by the script and once by the module, compared key by key
// and event by event; and malformed calls, each refused with a protocol error code and nothing
// written, the server alive after all of them.
import fc from 'fast-check';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NATIVE_COMMANDS } from '../../src/wire/native-module.js';
import { type CallRunner, files, replay, runScript, scripts } from '../support/conformance.js';
import { useRedisServer } from '../support/harness.js';
import { keyState } from '../support/key-state.js';
import { loadModuleArgs, nativeModule } from '../support/native-module.js';

/** The seeds' short form names only the first keys; the module names the rest by the prefix. */
const SHORT_KEYS: Record<string, number> = { promote: 2, sweep_stalled: 3 };

function moduleRunner(form: 'full' | 'short'): CallRunner {
  return async (client, s, keys, argv) => {
    const command = NATIVE_COMMANDS[s.name as keyof typeof NATIVE_COMMANDS];
    const k = form === 'short' ? keys.slice(0, SHORT_KEYS[s.name]) : keys;
    try {
      return { reply: await client.call(command, k.length, ...k, ...argv) };
    } catch (err) {
      return { error: err as Error };
    }
  };
}

const env = nativeModule.path ? useRedisServer({ args: loadModuleArgs() }) : undefined;
// The sweeps; complete's plain case (EMQ.COMPLETE) is held to its script by native-complete.test.ts.
const sweeps = files.filter((f) => f.script === 'promote' || f.script === 'sweep_stalled');

describe.skipIf(!nativeModule.path)(
  `the native module on a module-loaded redis-server${nativeModule.missing ? ` (${nativeModule.missing})` : ''}`,
  () => {
    let client: Redis;
    beforeAll(() => {
      client = env!.server.client();
    });
    afterAll(async () => {
      await client?.quit();
    });

    it('offers both commands, found by COMMAND INFO', async () => {
      const info = (await client.command('INFO', 'EMQ.PROMOTE', 'EMQ.STALLED.CHECK')) as unknown[][];
      expect(info.map((i) => i?.[0])).toEqual(['emq.promote', 'emq.stalled.check']);
    });

    it('covers both sweeps: each has conformance cases to replay', () => {
      expect(sweeps.map((f) => f.script).sort()).toEqual(['promote', 'sweep_stalled']);
      for (const f of sweeps) expect(f.cases.length, f.script).toBeGreaterThan(5);
    });

    for (const file of sweeps) {
      describe(`${file.script}'s conformance cases as ${NATIVE_COMMANDS[file.script as 'promote']}`, () => {
        for (const c of file.cases) {
          it(c.name, async () => {
            expect(await replay(client, c, moduleRunner('full'))).toEqual([]);
          });
          it(`${c.name} (the seeds' short form of the keys)`, async () => {
            expect(await replay(client, c, moduleRunner('short'))).toEqual([]);
          });
        }
      });
    }

    it('refuses every malformed call with a protocol error and writes nothing; the server lives on', async () => {
      const p = 'emq:{fz}:';
      const populate = async () => {
        await client.flushall();
        await client.hset(`${p}job:JOB1`, 'state', 'scheduled', 'group', 'g');
        await client.hset(
          `${p}job:JOB2`,
          'state',
          'active',
          'parent',
          'JOBstr',
          'dedupe',
          'dk',
          'stalled',
          'x',
        );
        await client.set(`${p}job:JOBstr`, 'not a row');
        await client.zadd(`${p}schedule`, 1000, 'JOB1', 1001, 'JOBstr', 9999999999999, 'JOB3');
        await client.zadd(`${p}active`, 1000, 'JOB2', 1001, 'JOBstr');
        await client.set(`${p}g:g:pending`, 'wrong type');
        await client.hset(`${p}lanes:concurrency`, 'g', 'many');
        await client.set(`${p}dedupe:dk`, 'JOB2');
      };
      const snapshot = () => keyState(client, p, { withTtl: true });
      const names = ['schedule', 'pending', 'events', 'wake', 'meta', 'ring', 'active', 'dead', 'cancelled'];
      const atom = fc.oneof(
        fc.constantFrom(
          '',
          ' ',
          '0',
          '1',
          '2',
          '3',
          '6',
          '8',
          '-1',
          '1e3',
          '0x10',
          'nan',
          'inf',
          '9007199254740992',
        ),
        fc.constantFrom(p, 'emq:{other}:', 'emq:{}:', 'emq:{a{b}:', 'next', '\0', 'x\r\ny'),
        fc.constantFrom(...names).map((n) => p + n),
        fc.constantFrom(...names).map((n) => `emq:{other}:${n}`),
        fc.string({ maxLength: 12 }),
        fc.uint8Array({ maxLength: 24 }).map((b) => Buffer.from(b).toString('latin1')),
        fc.constant('a'.repeat(70_000)),
      );
      const argv = fc.oneof(
        fc.array(atom, { maxLength: 5 }),
        fc.tuple(
          fc.constant(p),
          fc.constantFrom('0', '1', '2', '100', 'x'),
          fc.constantFrom('1', '100', 'next', ''),
        ),
      );
      const shaped = (command: string, n: number, order: string[]) =>
        fc
          .tuple(fc.subarray(order, { minLength: 0 }), fc.boolean(), argv)
          .map(([keys, all, rest]) => [
            command,
            String(n),
            ...(all ? order : keys).map((k) => p + k),
            ...rest,
          ]);
      const call = fc.oneof(
        fc
          .tuple(fc.constantFrom('EMQ.PROMOTE', 'EMQ.STALLED.CHECK'), fc.array(atom, { maxLength: 14 }))
          .map(([c, a]) => [c, ...a]),
        shaped('EMQ.PROMOTE', 6, ['schedule', 'pending', 'events', 'wake', 'meta', 'ring']),
        shaped('EMQ.PROMOTE', 2, ['schedule', 'pending']),
        shaped('EMQ.STALLED.CHECK', 8, [
          'active',
          'pending',
          'dead',
          'events',
          'wake',
          'meta',
          'ring',
          'cancelled',
        ]),
        shaped('EMQ.STALLED.CHECK', 3, ['active', 'pending', 'dead']),
      );
      const codes = new Map<string, number>();
      await populate();
      await fc.assert(
        fc.asyncProperty(call, async ([command, ...args]) => {
          const before = await snapshot();
          try {
            await client.call(command!, ...args);
            await populate(); // a valid call may have written: start again from the same state
          } catch (err) {
            const message = (err as Error).message;
            const code = message.split(' ')[0]!;
            codes.set(code, (codes.get(code) ?? 0) + 1);
            expect(message, `${command} ${args.join(' ').slice(0, 200)}`).toMatch(
              /^(EMQINPUT|WRONGTYPE|ERR) /,
            );
            expect(await snapshot(), `${command} refused (${message}) but changed keys`).toEqual(before);
          }
        }),
        { numRuns: 400 },
      );
      expect(await client.ping()).toBe('PONG');
      expect([...codes.keys()].sort()).toEqual(expect.arrayContaining(['EMQINPUT', 'WRONGTYPE']));
    }, 90_000);

    describe('random queue states, swept by the script and by the module, end the same', () => {
      it('promote', async () => {
        await fc.assert(
          fc.asyncProperty(
            queueState,
            fc.integer({ min: 1, max: 12 }),
            fc.boolean(),
            async (st, batch, next) => {
              const argv = (p: string) => [p, String(batch), ...(next ? ['next'] : [])];
              await sameOutcome(client, st, 'promote', argv);
            },
          ),
          { numRuns: 120 },
        );
      }, 60_000);

      it('sweep_stalled', async () => {
        await fc.assert(
          fc.asyncProperty(
            queueState,
            fc.integer({ min: 0, max: 3 }),
            fc.integer({ min: 1, max: 12 }),
            async (st, max, batch) => {
              await sameOutcome(client, st, 'sweep_stalled', (p) => [p, String(max), String(batch)]);
            },
          ),
          { numRuns: 120 },
        );
      }, 60_000);
    });
  },
);

// ── random queue states ─────────────────────────────────────────────────────────

interface JobSpec {
  state: 'scheduled' | 'pending' | 'active' | 'cancelled' | 'dead' | 'waiting_children' | 'ghost';
  group: string | undefined;
  prio: number | undefined;
  cancel: boolean;
  dedupe: boolean;
  parent: number | undefined; // index of another job
  cont: boolean;
  children: number;
  stalled: number | undefined;
  inSchedule: 'due' | 'later' | 'no';
  inActive: 'expired' | 'live' | 'no';
}

interface SchedulerSpec {
  repeat: string;
  count: number;
  pointsAtIt: boolean;
  ended: boolean;
  template: boolean;
}

interface QueueState {
  jobs: JobSpec[];
  schedulers: SchedulerSpec[];
  concurrency: [string, number][];
  running: [string, number][];
  paused: string[];
  ring: string[];
  pendingHasWork: boolean;
  eventsMax: number | undefined;
}

const job: fc.Arbitrary<JobSpec> = fc.record({
  state: fc.constantFrom('scheduled', 'pending', 'active', 'cancelled', 'dead', 'waiting_children', 'ghost'),
  group: fc.option(fc.constantFrom('g1', 'g2', 'g3'), { nil: undefined }),
  prio: fc.option(fc.integer({ min: 1, max: 5 }), { nil: undefined }),
  cancel: fc.boolean(),
  dedupe: fc.boolean(),
  parent: fc.option(fc.integer({ min: 0, max: 7 }), { nil: undefined }),
  cont: fc.boolean(),
  children: fc.integer({ min: 0, max: 3 }),
  stalled: fc.option(fc.integer({ min: 0, max: 4 }), { nil: undefined }),
  inSchedule: fc.constantFrom('due', 'later', 'no'),
  inActive: fc.constantFrom('expired', 'live', 'no'),
});

/** Repeat options as the runtime stores them (JSON), and some it never would. */
const repeatJson = fc.oneof(
  fc
    .record(
      {
        // Periods whose next instant does not depend on the clock (the two runs read it apart); the
        // conformance cases cover the grid after now.
        every: fc.constantFrom(5_000_000_000_000, 10_000_000_000_000),
        immediately: fc.constant(true),
        limit: fc.integer({ min: 1, max: 3 }),
        startDate: fc.constantFrom(500, 9_999_999_999_999),
        endDate: fc.constantFrom(2000, 9_999_999_999_999),
        pattern: fc.constant('0 3 * * *'),
      },
      { requiredKeys: [] },
    )
    .map((r) => JSON.stringify(r)),
  fc.constantFrom(
    'not json',
    '[]',
    '5',
    '{"every":0}',
    '{"every":"5"}',
    '{"every":1000,"every":0}',
    ' {"every" : 1e3 } ',
  ),
);

const scheduler: fc.Arbitrary<SchedulerSpec> = fc.record({
  repeat: repeatJson,
  count: fc.integer({ min: 0, max: 3 }),
  pointsAtIt: fc.boolean(),
  ended: fc.boolean(),
  template: fc.boolean(),
});

const queueState: fc.Arbitrary<QueueState> = fc.record({
  jobs: fc.array(job, { minLength: 1, maxLength: 8 }),
  schedulers: fc.array(scheduler, { maxLength: 3 }),
  concurrency: fc.array(fc.tuple(fc.constantFrom('g1', 'g2', '*'), fc.integer({ min: 1, max: 2 })), {
    maxLength: 2,
  }),
  running: fc.array(fc.tuple(fc.constantFrom('g1', 'g2', 'g3'), fc.integer({ min: 1, max: 3 })), {
    maxLength: 2,
  }),
  paused: fc.subarray(['g1', 'g2']),
  ring: fc.subarray(['g1', 'g3']),
  pendingHasWork: fc.boolean(),
  eventsMax: fc.option(fc.integer({ min: 1, max: 50 }), { nil: undefined }),
});

/** The commands that build a state under prefix `p`. */
function setup(st: QueueState, p: string): string[][] {
  const cmds: string[][] = [];
  st.jobs.forEach((j, i) => {
    const id = `JOB${i}`;
    if (j.state !== 'ghost') {
      const row = ['state', j.state, 'payload', '{}', 'created', '500'];
      if (j.group) row.push('group', j.group);
      if (j.prio !== undefined) row.push('prio', String(j.prio));
      if (j.cancel) row.push('cancel', '1');
      if (j.dedupe) {
        row.push('dedupe', `k${i % 3}`);
        cmds.push(['SET', `${p}dedupe:k${i % 3}`, id]);
      }
      if (j.parent !== undefined && j.parent !== i && j.parent < st.jobs.length)
        row.push('parent', `JOB${j.parent}`);
      if (j.state === 'waiting_children') {
        row.push('children', String(j.children));
        if (j.cont) row.push('continue', '1');
        cmds.push(['ZADD', `${p}waiting_children`, '500', id]);
      }
      if (j.stalled !== undefined) row.push('stalled', String(j.stalled));
      cmds.push(['HSET', `${p}job:${id}`, ...row]);
    }
    if (j.inSchedule !== 'no')
      cmds.push(['ZADD', `${p}schedule`, j.inSchedule === 'due' ? String(1000 + i) : '9999999999999', id]);
    if (j.inActive !== 'no')
      cmds.push(['ZADD', `${p}active`, j.inActive === 'expired' ? String(1000 + i) : '9999999999999', id]);
  });
  st.schedulers.forEach((sc, k) => {
    const id = `JOB000000000${k}:s:sc${k}`;
    const record = ['repeat', sc.repeat, 'count', String(sc.count), 'job', sc.pointsAtIt ? id : 'JOBother'];
    if (sc.ended) record.push('ended', 'limit');
    if (sc.template) record.push('data', '{"t":1}', 'name', `sc${k}`, 'prio', '2', 'group', 'g1');
    cmds.push(['HSET', `${p}scheduler:sc${k}`, ...record]);
    cmds.push(['ZADD', `${p}schedulers`, String(1000 + k), `sc${k}`]);
    cmds.push([
      'HSET',
      `${p}job:${id}`,
      'state',
      'scheduled',
      'payload',
      '{}',
      'created',
      '500',
      'runat',
      String(1000 + k),
    ]);
    cmds.push(['ZADD', `${p}schedule`, String(1000 + k), id]);
  });
  for (const [g, n] of st.concurrency) cmds.push(['HSET', `${p}lanes:concurrency`, g, String(n)]);
  for (const [g, n] of st.running) cmds.push(['HSET', `${p}lanes:running`, g, String(n)]);
  for (const g of st.paused) cmds.push(['SADD', `${p}lanes:paused`, g]);
  st.ring.forEach((g, i) => {
    cmds.push(['ZADD', `${p}ring`, String(i + 1), g]);
  });
  if (st.ring.length > 0) cmds.push(['HSET', `${p}meta`, 'ring_seq', String(st.ring.length)]);
  if (st.pendingHasWork) cmds.push(['ZADD', `${p}pending`, '0', 'JOBold']);
  if (st.eventsMax !== undefined) cmds.push(['HSET', `${p}meta`, 'events_max', String(st.eventsMax)]);
  return cmds;
}

/** A value that is an instant near `now` reads as `$now`: the two runs read the clock apart. */
function norm(v: string, now: number): string {
  return /^\d{13}$/.test(v) && Math.abs(Number(v) - now) < 60_000 ? '$now' : v;
}

/** Everything under the prefix, prefix-free, instants normalised, stream entries without ids. */
async function dump(client: Redis, p: string, now: number): Promise<Record<string, unknown>> {
  const keys = (await client.keys(`${p}*`)).sort();
  const out: Record<string, unknown> = {};
  for (const key of keys) {
    const name = key.slice(p.length);
    const type = await client.type(key);
    if (type === 'hash') {
      const h = await client.hgetall(key);
      out[name] = Object.fromEntries(Object.entries(h).map(([f, v]) => [f, norm(v, now)]));
    } else if (type === 'zset') {
      const flat = await client.zrange(key, 0, -1, 'WITHSCORES');
      out[name] = flat.map((v) => norm(v, now));
    } else if (type === 'set') out[name] = (await client.smembers(key)).sort();
    else if (type === 'stream') out[name] = (await client.xrange(key, '-', '+')).map(([, f]) => f);
    else out[name] = await client.get(key);
  }
  return out;
}

/** Replies as JSON with instants normalised (`next`'s now). */
function normReply(r: unknown, now: number): unknown {
  if (Array.isArray(r)) return r.map((x) => normReply(x, now));
  if (typeof r === 'number') return norm(String(r), now);
  return r;
}

async function sameOutcome(
  client: Redis,
  st: QueueState,
  name: 'promote' | 'sweep_stalled',
  argv: (prefix: string) => string[],
): Promise<void> {
  await client.flushall();
  const s = scripts.get(name)!;
  const [sec] = await client.time();
  const now = Number(sec) * 1000;
  const results: unknown[] = [];
  for (const [q, run] of [
    ['script', runScript],
    ['module', moduleRunner('full')],
  ] as const) {
    const p = `emq:{${q}}:`;
    for (const cmd of setup(st, p)) await client.call(cmd[0]!, ...cmd.slice(1));
    const keys = s.keys.map((k) => p + k);
    const outcome = await run(client, s, keys, argv(p));
    results.push({
      outcome:
        'error' in outcome
          ? { error: outcome.error.message.split(' ')[0] }
          : { reply: normReply(outcome.reply, now) },
      keys: await dump(client, p, now),
    });
  }
  expect(results[1]).toEqual(results[0]);
}
