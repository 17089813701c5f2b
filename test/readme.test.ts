// The README's promises, checked: its quick start is examples/quickstart.ts and prints what the
// README says; the `npm start` demo runs its jobs to completion and exits by itself; and
// findOrStartRedis finds, starts, stops, or explains plainly how to install redis-server.
import { accessSync, constants, readFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { EchoMQError } from '../src/core/errors.js';
import { findOrStartRedis } from '../tools/dev-redis.js';
import { useRedisServer } from './support/harness.js';
import { freePort } from './support/redis-server.js';
import { ROOT as root, runTs } from './support/run-process.js';

const readme = readFileSync(join(root, 'README.md'), 'utf8');
const env = useRedisServer();

afterEach(() => {
  vi.unstubAllEnvs();
});

// ── helpers ─────────────────────────────────────────────────────────────────────

/** The body of the first fenced block with this language after the `## <heading>` line. */
function fencedBlock(heading: string, lang: string): string {
  const at = readme.indexOf(`\n## ${heading}\n`);
  if (at < 0) throw new Error(`README has no "## ${heading}" section`);
  const open = readme.indexOf(`\n\`\`\`${lang}\n`, at);
  if (open < 0) throw new Error(`README's "${heading}" section has no \`\`\`${lang} block`);
  const start = open + lang.length + 5;
  const end = readme.indexOf('\n```\n', start);
  return readme.slice(start, end + 1);
}

/** The environment of this process without the variables that pick a Redis. */
function cleanEnv(extra: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const { REDIS_URL: _url, DEMO_PROBE_URL: _probe, DEMO_SECONDS: _seconds, ...rest } = process.env;
  return { ...rest, ...extra };
}

/** PATH without any directory that holds a redis-server executable. */
function pathWithoutRedis(): string {
  return (process.env.PATH ?? '')
    .split(delimiter)
    .filter((dir) => {
      try {
        accessSync(join(dir, 'redis-server'), constants.X_OK);
        return false;
      } catch {
        return true;
      }
    })
    .join(delimiter);
}

/** A URL on which nothing listens. */
async function closedUrl(): Promise<string> {
  return `redis://127.0.0.1:${await freePort()}`;
}

async function answers(url: string): Promise<boolean> {
  const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  client.on('error', () => {});
  try {
    await client.connect();
    return (await client.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    client.disconnect();
  }
}

// ── the quick start ─────────────────────────────────────────────────────────────

describe('README quick start', () => {
  it('is examples/quickstart.ts, character for character', () => {
    const file = readFileSync(join(root, 'examples/quickstart.ts'), 'utf8');
    expect(fencedBlock('Quick start', 'ts')).toBe(file);
  });

  it('runs against REDIS_URL, exits 0 and prints the lines the README shows', async () => {
    const run = await runTs('examples/quickstart.ts', cleanEnv({ REDIS_URL: env.server.url }));
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);

    const promised = fencedBlock('Quick start', 'text').trimEnd().split('\n');
    const printed = run.stdout.trimEnd().split('\n');
    // The same lines; the event lines in the same order (the others may interleave with them).
    expect([...printed].sort()).toEqual([...promised].sort());
    const events = (lines: string[]) => lines.filter((l) => l.startsWith('event: '));
    expect(events(printed)).toEqual(events(promised));
    expect(promised).toContain('result: sent to ada@example.com');
  });
});

// ── the demo ────────────────────────────────────────────────────────────────────

describe('npm start (examples/demo.ts)', () => {
  it('runs every job to completion against REDIS_URL, exits by itself and leaves no keys', async () => {
    const run = await runTs('examples/demo.ts', cleanEnv({ REDIS_URL: env.server.url, DEMO_SECONDS: '2' }));
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const out = run.stdout;
    expect(out).toContain(`using ${env.server.url}`);
    for (const job of ['resize photo-1.jpg', 'resize photo-2.jpg', 'resize photo-3.jpg', 'nightly report']) {
      expect(out).toMatch(new RegExp(`consumer completed ${job}: `));
    }
    // The flaky job fails its first attempt, is retried, and completes on the second.
    expect(out).toMatch(/consumer failed send welcome email: .* \(will retry\)/);
    expect(out).toMatch(/consumer start send welcome email \(attempt 2 of 3\)/);
    expect(out).toMatch(/consumer completed send welcome email: /);
    // The delayed job is announced as delayed before it runs; the event reader prints events.
    expect(out).toMatch(/event +delayed +nightly report at=/);
    expect(out).toMatch(/event +completed +nightly report/);
    expect(out).toMatch(/2 s are up: closing/);
    expect(out).toContain('"completed":5');
    // Every line carries its time since the start.
    for (const line of out.trimEnd().split('\n')) expect(line).toMatch(/^\[\+ *\d+\.\d{3}s\] /);

    const raw = env.server.client();
    try {
      expect(await raw.keys('emq:{demo-*')).toEqual([]);
    } finally {
      await raw.quit();
    }
  });

  it('says plainly how to install redis-server when there is no Redis and none on PATH', async () => {
    const closed = await closedUrl();
    const run = await runTs(
      'examples/demo.ts',
      cleanEnv({ PATH: pathWithoutRedis(), REDIS_URL: closed, DEMO_PROBE_URL: closed }),
    );
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr).toContain('no redis-server was found on PATH');
    expect(run.stderr).toContain('apt-get install redis-server');
  });
});

// ── findOrStartRedis ────────────────────────────────────────────────────────────

describe('findOrStartRedis', () => {
  it('uses REDIS_URL when it answers, and starts nothing', async () => {
    vi.stubEnv('REDIS_URL', env.server.url);
    const found = await findOrStartRedis();
    expect(found).toMatchObject({ url: env.server.url, started: false });
    await found.stop(); // a no-op: the server is not ours
    expect(await answers(env.server.url)).toBe(true);
  });

  it('uses the probe URL when no REDIS_URL is given and it answers', async () => {
    vi.stubEnv('REDIS_URL', '');
    vi.stubEnv('DEMO_PROBE_URL', env.server.url);
    const found = await findOrStartRedis();
    expect(found).toMatchObject({ url: env.server.url, started: false });
  });

  it('starts a throw-away redis-server from PATH when nothing answers, and stop() ends it', async () => {
    vi.stubEnv('REDIS_URL', '');
    vi.stubEnv('DEMO_PROBE_URL', await closedUrl());
    const dev = await findOrStartRedis();
    try {
      expect(dev.started).toBe(true);
      expect(dev.url).toMatch(/^redis:\/\/127\.0\.0\.1:\d+$/);
      expect(await answers(dev.url)).toBe(true);
    } finally {
      await dev.stop();
    }
    expect(await answers(dev.url)).toBe(false);
  });

  it('starts one too when REDIS_URL does not answer, and says why', async () => {
    const closed = await closedUrl();
    const dev = await findOrStartRedis({ url: closed });
    try {
      expect(dev.started).toBe(true);
      expect(dev.note).toContain(`REDIS_URL ${closed} did not answer`);
    } finally {
      await dev.stop();
    }
  });

  it('throws EMQNOSERVER with the install hint when nothing answers and redis-server is not on PATH', async () => {
    const closed = await closedUrl();
    vi.stubEnv('PATH', pathWithoutRedis());
    vi.stubEnv('REDIS_URL', closed);
    vi.stubEnv('DEMO_PROBE_URL', closed);
    const err = await findOrStartRedis().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(EchoMQError);
    expect((err as EchoMQError).code).toBe('EMQNOSERVER');
    expect((err as EchoMQError).message).toBe(
      `EMQNOSERVER: no Redis answered at ${closed} and no redis-server was found on PATH; ` +
        'install it with: apt-get install redis-server (or set REDIS_URL)',
    );
  });
});
