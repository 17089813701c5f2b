import { defineConfig } from 'vitest/config';

/**
 * The files that run twice, on redis-server and on the memory engine (the memory project sets
 * ECHOMQ_TEST_ENGINE=memory, which makes test/support's harness hand out a memory:// engine):
 * the conformance replayer and the core behaviour files. A test in them that only a real server
 * can run is marked `redisOnly` with its reason.
 */
const BOTH_ENGINES = [
  'test/protocol.test.ts',
  'test/jobs.test.ts',
  'test/consumer.test.ts',
  'test/lanes.test.ts',
  'test/flow-control.test.ts',
  'test/repeat.test.ts',
  'test/scheduler.test.ts',
  'test/events.test.ts',
  'test/flows.test.ts',
  'test/flows-across-queues.test.ts',
  'test/retry.test.ts',
  'test/bad-data.test.ts',
  'test/attempts.test.ts',
];

export default defineConfig({
  test: {
    // Each test file starts its own redis-server; files run in parallel workers.
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    projects: [
      // examples/*.test.ts: the README's test examples, run as the tests they show.
      { extends: true, test: { name: 'redis', include: ['test/**/*.test.ts', 'examples/**/*.test.ts'] } },
      {
        extends: true,
        test: { name: 'memory', include: BOTH_ENGINES, env: { ECHOMQ_TEST_ENGINE: 'memory' } },
      },
    ],
  },
});
