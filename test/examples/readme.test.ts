// The README's promises, checked: it is a front door (at most 300 lines) whose links, and those
// of every page of docs/, reach a file and a heading that exist; its quick start is
// examples/quickstart.ts and prints what the README says; the `npm start` demo runs its jobs to
// completion and exits by itself; and findRedis finds a Redis or falls back to the memory
// engine, and a dead REDIS_URL is an error.
import { accessSync, constants, existsSync, readFileSync } from 'node:fs';
import { delimiter, dirname, join, normalize } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { EchoMQError } from '../../src/core/errors.js';
import { findRedis } from '../../tools/dev-redis.js';
import { DOC_PAGES, readPage } from '../support/docs.js';
import { useRedisServer } from '../support/harness.js';
import { freePort } from '../support/redis-server.js';
import { ROOT as root, runTs } from '../support/run-process.js';

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

// ── the front door and the links ────────────────────────────────────────────────

/** The page's text with its fenced blocks blanked (a `#` line there is code, not a heading), lines kept. */
function unfenced(text: string): string {
  return text.replace(/^```[^\n]*\n[\s\S]*?^```$/gm, (block) => block.replace(/[^\n]/g, ''));
}

/** The page's text without its fenced blocks and inline code, where `](` is code, not a link. */
function prose(text: string): string {
  return unfenced(text).replace(/`[^`\n]*`/g, '');
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens. */
function slug(heading: string): string {
  return heading
    .replace(/`/g, '')
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');
}

/** The anchors a page's headings make (a repeated heading gets -1, -2, … as on GitHub). */
function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const [, heading] of unfenced(text).matchAll(/^#{1,6} (.+)$/gm)) {
    const base = slug(heading!.trim());
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

/** The relative links of a page (`[text](target)`), with the line each is on. */
function links(text: string): { line: number; target: string }[] {
  const out: { line: number; target: string }[] = [];
  prose(text)
    .split('\n')
    .forEach((l, i) => {
      for (const [, target] of l.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (!/^[a-z]+:/.test(target!)) out.push({ line: i + 1, target: target! });
      }
    });
  return out;
}

describe('the documentation', () => {
  it('has a README that is a front door: at most 300 lines', () => {
    expect(readme.split('\n').length).toBeLessThanOrEqual(300);
  });

  it('indexes every page of docs/ in docs/README.md, and the README links the index', () => {
    const index = readPage('docs/README.md');
    const linked = new Set(links(index).map((l) => normalize(join('docs', l.target.split('#')[0]!))));
    const pages = DOC_PAGES.filter((p) => p.startsWith('docs/') && p !== 'docs/README.md');
    expect(pages.length).toBeGreaterThan(10);
    for (const page of pages) expect(linked, `docs/README.md links ${page}`).toContain(page);
    expect(links(readme).map((l) => l.target)).toContain('docs/README.md');
  });

  it('links only to files and headings that exist (README.md and every page of docs/)', () => {
    const broken: string[] = [];
    for (const page of DOC_PAGES) {
      for (const { line, target } of links(readPage(page))) {
        const [path, anchor] = target.split('#') as [string, string | undefined];
        const file = path === '' ? page : normalize(join(dirname(page), path));
        const where = `${page} line ${line}: ${target}`;
        if (file.startsWith('..') || !existsSync(join(root, file))) {
          broken.push(`${where}: no file ${file}`);
          continue;
        }
        if (anchor !== undefined && !anchors(readFileSync(join(root, file), 'utf8')).has(anchor))
          broken.push(`${where}: ${file} has no heading whose anchor is #${anchor}`);
      }
    }
    expect(broken).toEqual([]);
  });
});

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
  it('runs every job to completion against REDIS_URL, exits by itself and leaves no keys, nor its name in the registry', async () => {
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
    expect(out).toContain('next: `npx echomq dashboard --no-auth`');
    // Every line carries its time since the start.
    for (const line of out.trimEnd().split('\n')) expect(line).toMatch(/^\[\+ *\d+\.\d{3}s\] /);

    const raw = env.server.client();
    try {
      expect(await raw.keys('emq:{demo-*')).toEqual([]);
      // `echomq queues` lists the registry (emq:queues): no ghost of the demo's queue in it.
      const registered = await raw.smembers('emq:queues');
      expect(registered.filter((name) => name.startsWith('demo-'))).toEqual([]);
    } finally {
      await raw.quit();
    }
  });

  it('runs on the memory engine, saying so in one line, when no REDIS_URL is given and nothing answers the probe', async () => {
    // The probe address is a closed port of this machine's, never 127.0.0.1:6379; PATH holds no
    // redis-server, so nothing could start one.
    const closed = await closedUrl();
    const run = await runTs(
      'examples/demo.ts',
      cleanEnv({ PATH: pathWithoutRedis(), DEMO_PROBE_URL: closed, DEMO_SECONDS: '2' }),
    );
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const notes = run.stdout.split('\n').filter((l) => l.includes('memory engine'));
    expect(notes).toHaveLength(1);
    expect(notes[0]).toContain(
      `no REDIS_URL and no Redis at ${closed}: running on the in-process memory engine`,
    );
    expect(run.stdout).toMatch(/consumer completed send welcome email: /);
    expect(run.stdout).toMatch(/event +completed +nightly report/);
    expect(run.stdout).toContain('"completed":5');
  });

  it('exits 1 naming REDIS_URL (without its password) and the cause when REDIS_URL is set but does not answer', async () => {
    const closed = (await closedUrl()).replace('redis://', 'redis://ada:s3cret@');
    const run = await runTs(
      'examples/demo.ts',
      cleanEnv({ REDIS_URL: closed, DEMO_PROBE_URL: env.server.url }),
    );
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr).toContain(`REDIS_URL ${closed.replace('s3cret', '***')} did not answer: `);
    expect(run.stderr).toContain('ECONNREFUSED');
    expect(run.stderr).not.toContain('s3cret');
  });
});

// ── findRedis ───────────────────────────────────────────────────────────────────

describe('findRedis', () => {
  it('uses REDIS_URL when it answers', async () => {
    vi.stubEnv('REDIS_URL', env.server.url);
    expect(await findRedis()).toEqual({ url: env.server.url, note: `using ${env.server.url}` });
  });

  it('uses the probe URL when no REDIS_URL is given and it answers', async () => {
    vi.stubEnv('REDIS_URL', '');
    vi.stubEnv('DEMO_PROBE_URL', env.server.url);
    expect((await findRedis()).url).toBe(env.server.url);
  });

  it('falls back to memory:// when no REDIS_URL is given and nothing answers the probe', async () => {
    vi.stubEnv('REDIS_URL', '');
    const closed = await closedUrl();
    const found = await findRedis({ probeUrl: closed });
    expect(found.url).toBe('memory://');
    expect(found.note).toContain(`no Redis at ${closed}`);
  });

  it('throws EMQNOSERVER naming the URL and the cause when the REDIS_URL given does not answer', async () => {
    const closed = await closedUrl();
    vi.stubEnv('DEMO_PROBE_URL', env.server.url); // a Redis that answers does not stand in for it
    const err = await findRedis({ url: closed }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(EchoMQError);
    expect((err as EchoMQError).code).toBe('EMQNOSERVER');
    expect((err as EchoMQError).message).toMatch(
      new RegExp(
        `^EMQNOSERVER: REDIS_URL ${closed} did not answer: .*ECONNREFUSED.*; start that Redis, or unset REDIS_URL`,
      ),
    );
  });
});
