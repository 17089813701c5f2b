// The examples the guide shows (docs/guide/: flow control, managing jobs, consumers, flows,
// workers, recurring jobs) run: each examples/<feature>.ts is run as its own process against a
// throw-away redis-server (REDIS_URL), exits 0 by itself and prints what it promises; and a page
// of the guide shows each one character for character.
// They import 'echomq', the built package: `npm test` builds it first (pretest).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { pagesShowing } from '../support/docs.js';
import { useRedisServer } from '../support/harness.js';
import { type Run, ROOT as root, runTs } from '../support/run-process.js';

const env = useRedisServer();
/**
 * How long an example may run before it is killed: a guard against a hang, not a speed check.
 * Each example is a fresh node + tsx process (the sandbox example boots three: itself, the
 * handler file's check and the worker thread), five at once: seconds on an idle machine, many
 * times that on a loaded 2-core one. The tests check what an example prints and its exit code.
 */
const HANG_GUARD_MS = 120_000;

function runExample(file: string, timeoutMs = HANG_GUARD_MS): Promise<Run> {
  const { REDIS_URL: _url, ...rest } = process.env;
  return runTs(file, { ...rest, REDIS_URL: env.server.url }, timeoutMs);
}

/** Each example and lines (or patterns) its output must hold. */
const EXAMPLES: [file: string, expected: (string | RegExp)[]][] = [
  [
    'examples/lanes.ts',
    ['started in order: big acme small big big big', 'lane acme: concurrency 1, 0 waiting'],
  ],
  ['examples/priorities.ts', ['password reset, invoice, receipt, weekly report']],
  ['examples/rate-limits.ts', ['call 7', '7 calls, at most 3 started in any 500 ms']],
  ['examples/queue-concurrency.ts', ['6 renders, at most 2 at once across 3 consumers']],
  [
    'examples/back-pressure.ts',
    ['call 1: 429, the queue waits', 'call 1: 200', 'call 3: 200', 'attempts used by call 1: 1'],
  ],
  [
    'examples/step-jobs.ts',
    [
      'step charge',
      /snoozed until \d\d:\d\d:\d\d\.\d{3}\nstep ship/,
      'step done',
      'result: charged, shipped, delivered',
      'attempts used: 1 of 1',
    ],
  ],
  ['examples/pause.ts', ['paused: true, pending: 1', 'ran enqueued while paused', 'paused: false']],
  ['examples/dedupe.ts', ['throttle: deduplicated, kept the first: true', 'ran with sync', 'ran with echo']],
  ['examples/retention.ts', ['kept: {"completed":3,"dead":1}', 'cleaned: 1']],
  ['examples/progress.ts', ['progress {"done":1,"of":3}', 'last progress: {"done":3,"of":3}']],
  [
    'examples/job-control.ts',
    ['sent: ana: see you, cy: disk 97%', 'digest is scheduled', 'alert ran 2 times', 'EMQSTATE'],
  ],
  [
    'examples/logs.ts',
    [
      '4 lines kept:',
      '  row b: ok',
      '  row c: ok',
      '  xxxxxxxxxxxxxx… [truncated, 100 bytes]',
      'from line 2: row c: ok',
    ],
  ],
  [
    'examples/job-options.ts',
    ['tagged billing: invoice', 'ran: ping, invoice, breaking, old news', 'completed kept: 3'],
  ],
  ['examples/flows.ts', ['parent is waiting_children, with 2 children', 'report: Lima: sunny, Oslo: sunny']],
  [
    'examples/flows-across-queues.ts',
    [
      'orders: pending, mail: pending',
      'ship order 7: done',
      'processed: charge card: done, send receipt: done',
    ],
  ],
  // Shown on docs/guide/workers.md.
  ['examples/sandbox.ts', ['checksum: 3b2d9ab4b38f', 'log: hashed 100000 times']],
  [
    'examples/timeouts.ts',
    ['short: 3 pages', 'attempt 1: retry (EMQTIMEOUT)', 'attempt 2: dead (EMQTIMEOUT)', 'long: dead'],
  ],
  ['examples/retry-policy.ts', ['503: ok on attempt 3', '400: dead after 1 attempt']],
  ['examples/manual-claim.ts', ['claimed: a.csv, b.csv', 'b: retry', 'late fail: EMQLEASE']],
  ['examples/batches.ts', ['batch of 5', 'completed: 4, dead: 1']],
  ['examples/consumer-pause.ts', ['queue paused: false, pending: 1', 'sent: welcome']],
  // Shown on docs/guide/recurring.md.
  [
    'examples/recurring.ts',
    [
      'repeat: registered',
      'scheduler: created',
      'nightly: created, next run at 03:00:00 Berlin time',
      'tick ran 3 times',
      'digest ran 3 times, then ended (limit)',
      'unregistered: true, removed: true',
      'next 02:30 New York run: 2026-03-08T07:00:00.000Z',
    ],
  ],
];

describe.concurrent('examples/<feature>.ts', () => {
  for (const [file, expected] of EXAMPLES) {
    it(
      `${file} runs against REDIS_URL, exits 0 and prints what it shows`,
      async () => {
        const run = await runExample(file);
        expect(run.signal, `killed after ${HANG_GUARD_MS} ms: ${run.stdout}`).toBeNull();
        expect(run.stderr).toBe('');
        expect(run.code).toBe(0);
        const lines = run.stdout.trimEnd().split('\n');
        for (const line of expected) {
          if (typeof line === 'string') expect(lines).toContain(line);
          else expect(run.stdout).toMatch(line);
        }
      },
      HANG_GUARD_MS + 30_000,
    );
  }
});

// Each example is shown on one page of the guide (docs/guide/, e.g. flow-control.md, workers.md,
// recurring.md), as it is: a page that drifts from the file it shows fails here, naming both.
describe('the guide shows the examples', () => {
  for (const [file] of EXAMPLES) {
    it(`${file} is shown, as it is, on one page of docs/guide/`, () => {
      const pages = pagesShowing(`\`\`\`ts\n${readFileSync(join(root, file), 'utf8')}\`\`\`\n`);
      expect(pages, `the pages that show ${file} as it is`).toHaveLength(1);
      expect(pages[0], `${file} is shown on ${pages[0]}`).toMatch(/^docs\/guide\//);
    });
  }

  // examples/testing.test.ts is itself a test file the suite runs (vitest.config.ts includes
  // examples/**/*.test.ts); the guide's "Testing your jobs" page shows it as it is.
  it('examples/testing.test.ts is shown, as it is, on docs/guide/testing.md', () => {
    const text = readFileSync(join(root, 'examples/testing.test.ts'), 'utf8');
    expect(pagesShowing(`\`\`\`ts\n${text}\`\`\`\n`)).toEqual(['docs/guide/testing.md']);
  });
});
