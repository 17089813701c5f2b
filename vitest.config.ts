import { defineConfig } from 'vitest/config';

/**
 * The files that run twice, on redis-server and on the memory engine (the memory project sets
 * ECHOMQ_TEST_ENGINE=memory, which makes test/support's harness hand out a memory:// engine):
 * the conformance replayer and the core behaviour files. A test in them that only a real server
 * can run is marked `redisOnly` with its reason.
 */
const BOTH_ENGINES = [
  'test/protocol/conformance.test.ts',
  'test/jobs/jobs.test.ts',
  'test/consumer/consumer.test.ts',
  'test/lanes/lanes.test.ts',
  'test/lanes/flow-control.test.ts',
  'test/recurring/repeat.test.ts',
  'test/recurring/schedulers.test.ts',
  'test/events/events.test.ts',
  'test/flows/flows.test.ts',
  'test/flows/across-queues.test.ts',
  'test/jobs/retry.test.ts',
  'test/consumer/bad-data.test.ts',
  'test/core/attempts.test.ts',
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
