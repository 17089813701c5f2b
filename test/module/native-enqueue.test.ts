// EMQ.ENQUEUE (module/enqueue.c, SPEC 26): for the plain case it must do what enqueue.lua does.
// Every conformance case of enqueue.json in the plain case replays against it; every other case
// is refused with EMQNATIVE and nothing written; a consumer parked on the wake stream is woken;
// and a replica fed by the command's propagated writes ends equal to its primary.
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CallRunner, files, replay } from '../support/conformance.js';
import { useRedisServer } from '../support/harness.js';
import { keyState } from '../support/key-state.js';
import { loadModuleArgs, nativeModule } from '../support/native-module.js';
import { RedisServer } from '../support/redis-server.js';

const COMMAND = 'EMQ.ENQUEUE';

function moduleRunner(command: string): CallRunner {
  return async (client, _s, keys, argv) => {
    try {
      return { reply: await client.call(command, keys.length, ...keys, ...argv) };
    } catch (err) {
      return { error: err as Error };
    }
  };
}

/** What the module takes: 7-field tuples (or 9 with no dedupe key), no group. The script's width rule. */
function plain(argv: string[]): boolean {
  if (argv[1] === '#13' || argv[1] === '#14') return false;
  const n = argv.length;
  const w = (n - 1) % 9 === 0 && ((n - 1) % 7 !== 0 || argv[10]?.startsWith('JOB')) ? 9 : 7;
  for (let b = 1; b + w <= n; b += w) {
    if (argv[b + 3] !== '') return false;
    if (w === 9 && argv[b + 7] !== '') return false;
  }
  return true;
}

const env = nativeModule.path ? useRedisServer({ args: loadModuleArgs() }) : undefined;
const cases = files.find((f) => f.script === 'enqueue')?.cases ?? [];

describe.skipIf(!nativeModule.path)('EMQ.ENQUEUE, the native plain enqueue', () => {
  let client: Redis;
  beforeAll(() => {
    client = env!.server.client();
  });
  afterAll(async () => {
    await client?.quit();
  });

  it('has plain and non-plain cases to replay', () => {
    expect(cases.filter((c) => plain(c.call.argv)).length).toBeGreaterThan(8);
    expect(cases.filter((c) => !plain(c.call.argv)).length).toBeGreaterThan(5);
  });

  describe(`enqueue.json's plain cases as ${COMMAND}`, () => {
    for (const c of cases.filter((c) => plain(c.call.argv))) {
      it(c.name, async () => {
        expect(await replay(client, c, moduleRunner(COMMAND))).toEqual([]);
      });
    }
  });

  describe(`enqueue.json's other cases: ${COMMAND} refuses them with EMQNATIVE and writes nothing`, () => {
    for (const c of cases.filter((c) => !plain(c.call.argv))) {
      it(c.name, async () => {
        const p = `emq:{${c.queue}}:`;
        let seen: { error?: string; same?: boolean } = {};
        await replay(client, c, async (cl, _s, keys, argv) => {
          const before = await keyState(cl, p, { withTtl: true });
          const outcome = await moduleRunner(COMMAND)(cl, _s, keys, argv);
          const after = await keyState(cl, p, { withTtl: true });
          seen = { error: 'error' in outcome ? outcome.error.message : undefined, same: undefined };
          seen.same = JSON.stringify(before) === JSON.stringify(after);
          return outcome;
        });
        expect(seen.error).toMatch(/^EMQNATIVE not plain: /);
        expect(seen.same).toBe(true);
      });
    }
  });

  it('a consumer blocked on the wake stream returns when pending goes from empty to some', async () => {
    const p = 'emq:{woken}:';
    const keys = ['pending', 'events', 'wake', 'meta', 'ring'].map((k) => p + k);
    await client.hset(`${p}meta`, 'version', '2');
    await client.xadd(`${p}wake`, '*', 'w', '1'); // a wake stream that exists, as a parked consumer sees it
    const parked = env!.server.client();
    try {
      const woken = parked.xread('BLOCK', 5000, 'STREAMS', `${p}wake`, '$');
      // Admit only once the read is parked (CLIENT LIST shows it blocked in XREAD), not after a pause
      for (let i = 0; !/ flags=b .*cmd=xread/.test((await client.client('LIST')) as string); i++) {
        if (i > 400) throw new Error('the reader never blocked');
        await new Promise((r) => setTimeout(r, 10));
      }
      await client.call(COMMAND, 5, ...keys, p, 'JOBw1', '{}', '0', '', '', '3', '');
      const got = (await woken) as [string, [string, string[]][]][] | null;
      expect(got?.[0]?.[1]?.[0]?.[1]).toEqual(['w', '1']);
    } finally {
      await parked.quit();
    }
  });

  it('a replica fed by the writes it propagates ends equal to its primary', async () => {
    const replica = await RedisServer.start();
    const rc = replica.client();
    try {
      // A diskless full sync waits 5 s by default for more replicas: none are coming.
      await client.config('SET', 'repl-diskless-sync-delay', '0');
      await rc.call('REPLICAOF', '127.0.0.1', String(env!.server.port));
      for (let i = 0; (await rc.info('replication')).includes('master_link_status:up') === false; i++) {
        if (i > 400) throw new Error('the replica did not sync');
        await new Promise((r) => setTimeout(r, 50));
      }
      const p = 'emq:{replicated}:';
      const keys = ['pending', 'events', 'wake', 'meta', 'ring'].map((k) => p + k);
      await client.hset(`${p}meta`, 'version', '2', 'events_max', '5');
      const tuple = (id: string, name = '', prio = '0', max = '3') => [
        id,
        '{"x":1}',
        prio,
        '',
        name,
        max,
        '',
      ];
      const batch = Array.from({ length: 300 }, (_, i) => tuple(`JOBb${i}`, 'n', String(i % 3))).flat();
      await client.call(COMMAND, 5, ...keys, p, ...tuple('JOBone'));
      await client.call(COMMAND, 5, ...keys, p, ...batch);
      for (let i = 0; i < 20; i++)
        await client.call(COMMAND, 5, ...keys, p, ...tuple(`JOBs${i}`, `m${i}`, '1', '4'));
      await client.call(COMMAND, 5, ...keys, p, ...tuple('JOBx', 'a'), ...tuple('JOBy', 'b'));
      await client.call('WAIT', 1, 5000);
      const primary = await keyState(client, p);
      expect(Object.keys(primary).length).toBeGreaterThan(300);
      expect(await keyState(rc, p)).toEqual(primary);
    } finally {
      await rc.quit();
      await replica.stop();
    }
  });
});
