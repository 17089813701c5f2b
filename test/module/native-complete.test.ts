// EMQ.COMPLETE (module/complete.c, SPEC 26), complete.lua's plain case as a command: it must do
// what the script does wherever it answers, and write nothing where it refuses (EMQNATIVE not
// plain), so a runtime can send the same call to the script. Proven three ways: every conformance case of
// complete.json replayed as the command (a plain case passes as the script does; any other is
// refused, the keyspace untouched); the wire bench's loop (bench/callgrind.ts wire and wire100:
// claim, then complete+claim over and over, past retention's first trims) run by the script on
// one server and by the command on another with the same job ids, replies and keyspaces compared
// with instants, tokens and stream ids blanked; and a non-plain queue refused with nothing written.
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EchoMQ } from '../../src/index.js';
import { type CallRunner, files, replay, runFunction, scripts } from '../support/conformance.js';
import { keyState } from '../support/key-state.js';
import { loadModuleArgs, nativeModule } from '../support/native-module.js';
import { RedisServer } from '../support/redis-server.js';

const complete = files.find((f) => f.script === 'complete')!;
const completeKeys = scripts.get('complete')!.keys;
const claimKeys = scripts.get('claim')!.keys;

/** The cases outside the plain case: lanes, slots, flows, a job's own retention. */
const NOT_PLAIN = /lane|slot|flow child|flow parent|own retention/;

/** Instants (ms), tokens (µs) and stream ids blanked: two servers' runs differ only there. */
const blank = (v: string): string => v.replace(/\b\d{12,}(-\d+)?\b/g, '#');
const blankAll = (v: unknown): unknown =>
  Array.isArray(v)
    ? v.map(blankAll)
    : typeof v === 'string'
      ? blank(v)
      : typeof v === 'number' && v > 1e11
        ? '#'
        : v;

/** Every key under `prefix`: type, encoding and content with instants blanked (stream ids dropped). */
async function snapshot(client: Redis, prefix: string, exact = false): Promise<Record<string, unknown>> {
  const keys = (await client.keys(`${prefix}*`)).sort();
  const out: Record<string, unknown> = {};
  for (const key of keys) {
    const type = await client.type(key);
    const encoding = await client.object('ENCODING', key);
    let value: unknown;
    if (type === 'hash')
      value = Object.entries(await client.hgetall(key)).sort(([a], [b]) => (a < b ? -1 : 1));
    else if (type === 'zset') value = await client.zrange(key, 0, -1, 'WITHSCORES');
    else if (type === 'stream')
      value = (await client.xrange(key, '-', '+')).map(([id, fields]) => (exact ? [id, fields] : fields));
    else if (type === 'string') value = await client.get(key);
    else value = await client.call('DUMP', key);
    const ttl = (await client.pttl(key)) >= 0;
    const minute = exact ? null : /^(.*:stats:)\d+$/.exec(key);
    if (minute && type === 'hash') {
      // The stats counters are per minute: a run that crosses a minute writes two keys where
      // the other run wrote one, so the counters are compared summed over the run's minutes.
      const sums = new Map((out[`${minute[1]}#`] as { value?: [string, string][] } | undefined)?.value ?? []);
      for (const [f, n] of value as [string, string][])
        sums.set(f, String(Number(sums.get(f) ?? 0) + Number(n)));
      const summed = [...sums].sort(([a], [b]) => (a < b ? -1 : 1));
      out[`${minute[1]}#`] = { type, ttl, value: summed };
      continue;
    }
    out[exact ? key : blank(key)] = { type, encoding, ttl, value: exact ? value : blankAll(value) };
  }
  return out;
}

const nativeRunner: CallRunner = async (client, _s, keys, argv) => {
  try {
    return { reply: await client.call('EMQ.COMPLETE', keys.length, ...keys, ...argv) };
  } catch (err) {
    return { error: err as Error };
  }
};

describe.skipIf(!nativeModule.path)('EMQ.COMPLETE, complete.lua for the plain case', () => {
  let script: RedisServer;
  let module: RedisServer;
  let a: Redis;
  let b: Redis;
  beforeAll(async () => {
    [script, module] = [
      await RedisServer.start({ args: loadModuleArgs() }),
      await RedisServer.start({ args: loadModuleArgs() }),
    ];
    a = script.client();
    b = module.client();
  });
  afterAll(async () => {
    a?.disconnect();
    b?.disconnect();
    await script?.stop();
    await module?.stop();
  });

  describe("complete.json's cases, a plain one as the script, any other refused with nothing written", () => {
    for (const c of complete.cases) {
      it(c.name, async () => {
        let refused: string | undefined;
        let unchanged = true;
        const runner: CallRunner = async (client, s, keys, argv) => {
          const before = await keyState(client, `emq:{${c.queue}}:`, { withTtl: true });
          const outcome = await nativeRunner(client, s, keys, argv);
          if ('error' in outcome && outcome.error.message.startsWith('EMQNATIVE')) {
            refused = outcome.error.message;
            unchanged =
              JSON.stringify(await keyState(client, `emq:{${c.queue}}:`, { withTtl: true })) ===
              JSON.stringify(before);
          }
          return outcome;
        };
        const problems = await replay(b, c, runner);
        if (process.env.NP_DEBUG)
          console.log(c.name.slice(0, 60), '=>', refused ?? 'answered', problems.length);
        if (NOT_PLAIN.test(c.name)) {
          expect(refused, 'a case outside the plain case is refused').toMatch(/^EMQNATIVE not plain: /);
          expect(unchanged, 'the refusal wrote nothing').toBe(true);
        } else {
          expect(refused).toBeUndefined();
          expect(problems).toEqual([]);
        }
      });
    }
  });

  /** bench/callgrind.ts's wire loop on one server: the replies of every step, then the keyspace. */
  async function wire(
    client: Redis,
    server: RedisServer,
    via: 'script' | 'native',
    batch: number,
    steps: number,
  ) {
    const q = `w${batch}`;
    const p = `emq:{${q}}:`;
    const mq = await EchoMQ.connect({ url: server.url });
    const jobs = Array.from({ length: batch * (steps + 1) }, (_, i) => ({
      data: { i, pad: 'x'.repeat(i % 7) },
      opts: { id: `JOB${String(i).padStart(6, '0')}` },
    }));
    for (let i = 0; i < jobs.length; i += 1000) await mq.queue(q).enqueueMany(jobs.slice(i, i + 1000));
    await mq.close();
    const s = scripts.get('complete')!;
    const held = (flat: unknown[]) => {
      const triples: string[] = [];
      for (let i = 0; i < flat.length; i += 7)
        triples.push(String(flat[i]), String(flat[i + 1]), i % 3 ? '' : '"r"');
      return triples;
    };
    const first = await runFunction(
      client,
      scripts.get('claim')!,
      claimKeys.map((k) => p + k),
      [p, String(batch), '30000', 'wire'],
    );
    if ('error' in first) throw first.error;
    let triples = held((first.reply as unknown[][])[0]!);
    const replies: unknown[] = [];
    const keys = completeKeys.map((k) => p + k);
    for (let i = 0; i < steps + 1; i++) {
      const argv = [p, '30000', String(batch), ...triples, 'wire'];
      const outcome =
        via === 'script'
          ? await runFunction(client, s, keys, argv)
          : await nativeRunner(client, s, keys, argv);
      if ('error' in outcome) throw outcome.error;
      replies.push(blankAll(outcome.reply));
      triples = held((outcome.reply as unknown[][])[1]!);
    }
    return { replies, keyspace: await snapshot(client, p) };
  }

  // The writes reach a replica as the primary made them (RedisModule_Call: each command's own
  // propagation, XADD's approximate trim included).
  it("a replica holds exactly the primary's keyspace after the wire loop", async () => {
    const replica = await RedisServer.start({ args: ['--replicaof', '127.0.0.1', String(module.port)] });
    const r = replica.client();
    try {
      await b.flushall();
      for (let i = 0; ; i++) {
        const info = await r.info('replication');
        if (/master_link_status:up/.test(info)) break;
        if (i > 200) throw new Error('the replica did not sync');
        await new Promise((res) => setTimeout(res, 50));
      }
      await wire(b, module, 'native', 1, 1150);
      await wire(b, module, 'native', 100, 3);
      await b.call('WAIT', '1', '5000');
      for (const q of ['w1', 'w100']) {
        const primary = await snapshot(b, `emq:{${q}}:`, true);
        expect(Object.keys(primary).length).toBeGreaterThan(100);
        expect(await snapshot(r, `emq:{${q}}:`, true)).toEqual(primary);
      }
    } finally {
      r.disconnect();
      await replica.stop();
    }
  });

  for (const [batch, steps] of [
    [1, 1250],
    [100, 25],
  ] as const) {
    it(`wire at ${batch} a call: the same replies and the same keyspace as the script, retention's trims included`, async () => {
      await a.flushall();
      await b.flushall();
      const byScript = await wire(a, script, 'script', batch, steps);
      const byModule = await wire(b, module, 'native', batch, steps);
      expect(byModule.replies).toEqual(byScript.replies);
      expect(byModule.keyspace).toEqual(byScript.keyspace);
      // The run got past retention's slack: completed was trimmed back to keep_completed.
      expect(
        (byModule.keyspace[`emq:{w${batch}}:completed`] as { value: unknown[] }).value.length / 2,
      ).toBeLessThanOrEqual(1100);
    });
  }

  it('refuses a paused queue with EMQNATIVE and writes nothing', async () => {
    const p = 'emq:{np}:';
    await b.hset(`${p}meta`, 'paused', '1');
    await b.hset(`${p}job:JOB1`, 'state', 'active', 'token', '5');
    await b.zadd(`${p}active`, '99', 'JOB1');
    const before = await keyState(b, p, { withTtl: true });
    await expect(
      b.call('EMQ.COMPLETE', 7, ...completeKeys.map((k) => p + k), p, '30000', '1', 'JOB1', '5', ''),
    ).rejects.toThrow('EMQNATIVE not plain: paused');
    expect(await keyState(b, p, { withTtl: true })).toEqual(before);
  });
});
