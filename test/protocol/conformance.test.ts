// The protocol, checked from outside the runtime: every conformance case in
// protocol/conformance/*.json replayed with nothing but a Redis client (as a Go or Elixir
// runtime would), every script's contract header, and every embedded lib block.
// The case format is described in protocol/conformance/README.md and protocol/SPEC.md.
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SCRIPT_KEYS } from '../../src/wire/keyspace.js';
import { PROTOCOL_DIR } from '../../src/wire/scripts.js';
import { embedLibs, readProtocolLib } from '../../tools/embed-lua.js';
import { files, KNOWN_LEVEL, replay, runFunction, runScript, scripts, show } from '../support/conformance.js';
import { onMemory, useRedisServer } from '../support/harness.js';

/** The key names a script's `-- KEYS:` line may use (SPEC.md, "Key taxonomy"; parseScript refuses others). */
const KNOWN_KEYS: ReadonlySet<string> = new Set(SCRIPT_KEYS);

/** The BullMQ vocabulary the seeds fix for the events stream, and `updated` (SPEC.md section 16). */
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
  'updated',
]);

const HEADER_LABELS = ['KEYS', 'ARGV', 'REPLY', 'ERRORS', 'EVENTS'] as const;

// ── the tests ────────────────────────────────────────────────────────────────

const holder = useRedisServer();

// Every case through both transports: EVALSHA (every runtime) and FCALL of the library the
// TypeScript runtime generates from the same scripts (src/wire/library.ts): the contract is one.
// The memory engine has one transport (it runs the contract in TypeScript), so it replays once.
const TRANSPORTS: [string, typeof runScript][] = onMemory
  ? [['EVALSHA', runScript]]
  : [
      ['EVALSHA', runScript],
      ['FCALL', runFunction],
    ];
describe.each(TRANSPORTS)(
  'conformance cases (protocol/conformance/*.json) replayed with a plain Redis client by %s',
  (_via, runner) => {
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
            expect(await replay(client, c, runner)).toEqual([]);
          });
        }
      });
    }
  },
);

describe('the conformance format follows the evolution rule (SPEC 22, 23)', () => {
  let client: Redis;
  beforeAll(() => {
    client = holder.server.client();
  });
  afterAll(async () => {
    await client.quit();
  });
  const hello = files.find((f) => f.script === 'hello')!.cases[0]!;

  it('refuses a case of a later SPEC level, naming the level it needs and the one it knows', async () => {
    const later = { ...hello, level: KNOWN_LEVEL + 1 };
    expect(await replay(client, later)).toEqual([
      `the case needs SPEC level ${KNOWN_LEVEL + 1}; this replayer knows level ${KNOWN_LEVEL} (SPEC 22.2, 23)`,
    ]);
  });

  it('refuses an unknown placeholder with an error naming the SPEC level it knows', async () => {
    const unknown = { ...hello, expect: { ...hello.expect, reply: '$later_thing' } };
    await expect(replay(client, unknown)).rejects.toThrow(
      new RegExp(
        `unknown placeholder \\$later_thing: this replayer knows those of SPEC level ${KNOWN_LEVEL}`,
      ),
    );
  });

  it('marks every case that uses what level 2 added with its level', () => {
    const unmarked = files
      .flatMap((f) => f.cases)
      .filter(
        (c) =>
          (c.call.script === 'migrate' || (c.call.script === 'hello' && c.call.argv.length > 1)) &&
          c.level !== 2,
      )
      .map((c) => c.name);
    expect(unmarked).toEqual([]);
  });
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

/**
 * A script's contract header: its leading comment block, up to the first code line or lib block
 * (after the Redis 7 shebang line, `#!lua flags=…`, of the scripts that declare flags).
 */
function contractHeader(body: string): string[] {
  const lines: string[] = [];
  for (const line of body.replace(/^#!lua[^\n]*\n/, '').split('\n')) {
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
