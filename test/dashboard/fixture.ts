// The dashboard tests' wiring, one place for what every dashboard file sets up: a dashboard on
// the test's own queue (closed after the test), dead jobs to act on, the CSRF token a page
// carries, a control POST as the page script sends it, and headless Chromium with the
// screenshots' folder. `dashboardTest(env, prefix)` is queueTest with these fixtures.
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import type { EnqueueOptions } from '../../src/core/types.js';
import { type DashboardOptions, startDashboard } from '../../src/dashboard/index.js';
import type { Queue } from '../../src/queue/queue.js';
import { queueTest } from '../support/harness.js';
import type { RedisServer } from '../support/redis-server.js';
import { ROOT } from '../support/run-process.js';

/** Debian's chromium; the browser tests skip, saying so, where it is missing. */
export const CHROMIUM = '/usr/bin/chromium';
export const HAS_CHROMIUM = existsSync(CHROMIUM);
/** Where the browser tests write their screenshots. */
export const SHOTS = join(ROOT, 'test-artifacts');

export type StartedDashboard = Awaited<ReturnType<typeof startDashboard>>;

/** A job for `deadJobs`: its data and options, and the error its handler throws (default 'boom'). */
export interface DeadJobSpec {
  data: unknown;
  opts?: EnqueueOptions;
  error?: string;
}

/** The CSRF token a page carries in its meta tag. */
export async function csrfOf(url: string, init: RequestInit = {}): Promise<string> {
  const m = /<meta name="csrf-token" content="([^"]+)">/.exec(await (await fetch(url, init)).text());
  if (!m) throw new Error('no csrf meta tag on the page');
  return m[1]!;
}

/** A form POST of `fields` as a browser sends it (no redirect followed). */
export function form(fields: Record<string, string>): RequestInit {
  return {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(fields).toString(),
    redirect: 'manual',
  };
}

/** POSTs a control as the page script does (JSON reply); resolves with the status and body. */
export async function post(url: string, token: string, fields: Record<string, string> = {}) {
  const res = await fetch(url, {
    method: 'POST',
    headers: {
      accept: 'application/json',
      'x-csrf-token': token,
      'content-type': 'application/x-www-form-urlencoded',
    },
    body: new URLSearchParams(fields).toString(),
  });
  return { status: res.status, body: (await res.json()) as { result?: { message: string }; error?: string } };
}

/** The page's width, read in the browser (`page.evaluate(scrollWidth)`; no DOM types here). */
export const scrollWidth = () =>
  (globalThis as unknown as { document: { documentElement: { scrollWidth: number } } }).document
    .documentElement.scrollWidth;

/**
 * Collects the page's uncaught script errors and its console errors (but those `ignore` says
 * are expected) into `into`; a test ends with expect(problems).toEqual([]).
 */
export function collectProblems(
  page: Page,
  into: string[] = [],
  ignore?: (text: string) => boolean,
): string[] {
  page.on('pageerror', (err) => into.push(err.message));
  page.on('console', (m) => {
    if (m.type() === 'error' && !ignore?.(m.text())) into.push(m.text());
  });
  return into;
}

/** Accepts every confirm the page opens, keeping its message (the test pops the latest). */
export function acceptDialogs(page: Page): string[] {
  const dialogs: string[] = [];
  page.on('dialog', (dialog) => {
    dialogs.push(dialog.message());
    void dialog.accept();
  });
  return dialogs;
}

/** Enqueues `jobs` on `q` and lets one consumer fail each for good; resolves with their ids once all are dead. */
export async function deadJobs(q: Queue<unknown, unknown>, jobs: DeadJobSpec[]): Promise<string[]> {
  const errors = new Map<string, string>();
  const ids: string[] = [];
  for (const j of jobs) {
    const { id } = await q.enqueue(j.data, { attempts: 1, ...j.opts });
    errors.set(id, j.error ?? 'boom');
    ids.push(id);
  }
  const dead = new Set<string>();
  const c = q.consume(
    (job) => {
      throw new Error(errors.get(job.id) ?? 'boom');
    },
    { concurrency: Math.min(20, jobs.length), beatMs: 200 },
  );
  try {
    await new Promise<void>((resolve) => {
      c.on('failed', (job, _err, outcome) => {
        if (outcome === 'dead' && errors.has(job.id)) dead.add(job.id);
        if (dead.size === ids.length) resolve();
      });
    });
  } finally {
    await c.close({ timeoutMs: 0 });
  }
  return ids;
}

/** What a dashboardTest's test gets besides queueTest's fixtures. */
export interface DashboardFixtures {
  /** Starts a dashboard on the test's EchoMQ (port 0, and `opts`); closed after the test. */
  /** A dashboard on a free port; `auth: false` unless the test gives one. */
  dashboard: (opts?: Partial<DashboardOptions>) => Promise<StartedDashboard>;
  /** deadJobs on the test's queue. */
  deadJobs: (jobs: DeadJobSpec[]) => Promise<string[]>;
  /** One dead job on the test's queue (its handler throws `message`); resolves with its id. */
  deadJob: (data: unknown, opts?: EnqueueOptions, message?: string) => Promise<string>;
  /** Headless Chromium, launched for the test that names it and closed after it. */
  browser: Browser;
  /** SHOTS, created. */
  shots: string;
}

/**
 * queueTest with the dashboard fixtures (DashboardFixtures): `async ({ q, dashboard, browser }) =>`.
 * Each is made for the test that names it and closed after it; nothing is shared between tests.
 */
export function dashboardTest<D = unknown, R = unknown>(
  env: { readonly server: RedisServer },
  prefix: string,
) {
  return queueTest<D, R>(env, prefix).extend<DashboardFixtures>({
    dashboard: async ({ mq, defer }, use) =>
      use(async (opts = {}) => {
        const d = await startDashboard({ mq, port: 0, auth: false, ...opts });
        defer(() => d.close());
        return d;
      }),
    deadJobs: async ({ q }, use) => use((jobs) => deadJobs(q as Queue<unknown, unknown>, jobs)),
    deadJob: async ({ q }, use) =>
      use(async (data, opts = {}, message = 'boom') => {
        const [id] = await deadJobs(q as Queue<unknown, unknown>, [{ data, opts, error: message }]);
        return id!;
      }),
    // Set up after the test's connections (`opened`), so it closes before them and its dashboards.
    browser: async ({ opened: _opened }, use) => {
      const { chromium } = await import('playwright-core');
      const browser = await chromium.launch({
        executablePath: CHROMIUM,
        headless: true,
        args: [
          '--no-sandbox',
          '--disable-gpu',
          '--disable-quic',
          '--no-first-run',
          '--disable-background-networking',
          '--disable-component-update',
          '--disable-sync',
        ],
      });
      try {
        await use(browser);
      } finally {
        await browser.close();
      }
    },
    // biome-ignore lint/correctness/noEmptyPattern: vitest reads a fixture's dependencies from this pattern
    shots: async ({}, use) => {
      mkdirSync(SHOTS, { recursive: true });
      await use(SHOTS);
    },
  });
}
