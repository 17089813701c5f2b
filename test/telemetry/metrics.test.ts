// Prometheus metrics against a real redis-server: after a run of completed, retried and dead
// jobs, a scrape of the dashboard's /metrics (and of a registry of one's own) shows the counts
// per state and per lane, the completed and failed totals from the events stream, and the
// processing and enqueue-to-start histograms. Tests wait on events and bounded polls.
import { Registry } from 'prom-client';
import { describe, expect, vi } from 'vitest';
import { startDashboard } from '../../src/dashboard/index.js';
import type { Queue } from '../../src/queue/queue.js';
import { type ObservedConsumer, registerMetrics, streamMs } from '../../src/telemetry/metrics.js';
import { queueTest, useRedisServer } from '../support/harness.js';

type Data = { n: number; fail?: boolean };
const env = useRedisServer();
const it = queueTest<Data>(env, 'metrics');

/** The value of one sample line `name{labels} value` in a scrape, or undefined. */
function sample(text: string, metric: string, labels: Record<string, string>): number | undefined {
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${metric}{`)) continue;
    const inner = line.slice(metric.length + 1, line.lastIndexOf('}'));
    const have = inner.split(',');
    if (want.every((w) => have.includes(w))) return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return undefined;
}

/**
 * Runs 5 more jobs (one in each of two lanes among them), one failing once then passing, one
 * dead; resolves once 5 jobs in all completed (the one enqueued before included) and one died.
 */
async function run(q: Queue<Data>, consumer: ObservedConsumer): Promise<void> {
  const outcomes: string[] = [];
  const settled = new Promise<void>((resolve) => {
    const check = () => {
      const completed = outcomes.filter((o) => o === 'completed').length;
      if (completed === 5 && outcomes.includes('dead')) resolve();
    };
    consumer.on('completed', () => {
      outcomes.push('completed');
      check();
    });
    consumer.on('failed', (_job, _err, outcome) => {
      outcomes.push(outcome);
      check();
    });
  });
  await q.enqueue({ n: 1 });
  await q.enqueue({ n: 2 }, { group: 'red' });
  await q.enqueue({ n: 3 }, { group: 'blue' });
  await q.enqueue({ n: 4, fail: true }, { attempts: 2, backoff: { kind: 'fixed', ms: 0 } });
  await q.enqueue({ n: 5, fail: true }, { attempts: 1 });
  await settled;
}

describe('metrics', () => {
  it('shows counts, totals and histograms on the dashboard /metrics after a run', async ({
    mq,
    q,
    queueName: name,
    defer,
  }) => {
    const d = await startDashboard({ mq, port: 0, auth: false });
    defer(() => d.close());
    const metrics = (await d.handler.metrics())!;
    await q.enqueue({ n: 0 }, { group: 'red' }); // registers the queue before the readers start
    await metrics.ready();
    const seen = new Set<number>();
    const consumer = q.consume(
      async (job) => {
        const first = !seen.has(job.data.n);
        seen.add(job.data.n);
        if (job.data.fail && (job.data.n === 5 || first)) throw new Error('no');
        return job.data.n;
      },
      { concurrency: 4, beatMs: 200 },
    );
    defer(() => consumer.close({ timeoutMs: 0 }));
    metrics.observe(consumer);
    await run(q, consumer);
    await consumer.idle();

    let text = '';
    await vi.waitFor(
      async () => {
        text = await (await fetch(`${d.url}metrics`)).text();
        expect(sample(text, 'echomq_jobs_completed_total', { queue: name })).toBe(5); // n 0..4
      },
      { timeout: 5000 },
    );
    expect(sample(text, 'echomq_jobs', { queue: name, state: 'completed' })).toBe(5);
    expect(sample(text, 'echomq_jobs', { queue: name, state: 'dead' })).toBe(1);
    expect(sample(text, 'echomq_jobs', { queue: name, state: 'pending' })).toBe(0);
    expect(sample(text, 'echomq_queue_paused', { queue: name })).toBe(0);
    expect(sample(text, 'echomq_lane_jobs', { queue: name, lane: 'red', state: 'pending' })).toBe(0);
    expect(sample(text, 'echomq_lane_jobs', { queue: name, lane: 'blue', state: 'running' })).toBe(0);
    expect(sample(text, 'echomq_consumers', { queue: name })).toBe(1);
    // The retried attempt and the dead one both failed with an error (attempts ran out: not
    // an UnrecoverableError).
    expect(sample(text, 'echomq_jobs_failed_total', { queue: name, reason: 'error' })).toBe(2);
    // Processing, from the observed consumer: 5 completions, 1 retry, 1 dead.
    expect(sample(text, 'echomq_job_processing_seconds_count', { queue: name, outcome: 'completed' })).toBe(
      5,
    );
    expect(sample(text, 'echomq_job_processing_seconds_count', { queue: name, outcome: 'retry' })).toBe(1);
    expect(sample(text, 'echomq_job_processing_seconds_count', { queue: name, outcome: 'dead' })).toBe(1);
    // Enqueue-to-start, from the stream: the 5 jobs added after the readers started, plus the
    // retry's `waiting` -> `active` (the job enqueued before ready() has no claimable instant).
    expect(sample(text, 'echomq_job_wait_seconds_count', { queue: name })).toBe(6);
    expect(sample(text, 'echomq_job_wait_seconds_bucket', { queue: name, le: '+Inf' })).toBe(6);
    // Every script call of this process, at the connector seam.
    expect(sample(text, 'echomq_script_duration_seconds_count', { script: 'enqueue', outcome: 'ok' })).toBe(
      6,
    );
    expect(sample(text, 'echomq_script_duration_seconds_count', { script: 'fail', outcome: 'ok' })).toBe(2);
    expect(text).toContain('# TYPE echomq_job_wait_seconds histogram');
  });

  it('registers in a registry of its own, reads lanes and pause on scrape, and on close leaves other observers in place', async ({
    mq,
    q,
    queueName: name,
  }) => {
    const previous = vi.fn();
    mq.connector.observe(previous);
    const registry = new Registry();
    const metrics = registerMetrics(registry, { mq, queues: [name], prefix: 'app_' });
    await q.enqueue({ n: 1 }, { group: 'red' });
    await q.enqueue({ n: 2 }, { group: 'red' });
    await q.enqueue({ n: 3 });
    await mq.queue(name).lanes.pause('red');
    await q.pause();
    const text = await registry.metrics();
    expect(sample(text, 'app_jobs', { queue: name, state: 'pending' })).toBe(3);
    expect(sample(text, 'app_lane_jobs', { queue: name, lane: 'red', state: 'pending' })).toBe(2);
    expect(sample(text, 'app_lane_paused', { queue: name, lane: 'red' })).toBe(1);
    expect(sample(text, 'app_queue_paused', { queue: name })).toBe(1);
    expect(previous.mock.calls.some((c) => c[0] === 'enqueue' && typeof c[1] === 'number')).toBe(true);
    const enqueues = () =>
      registry
        .metrics()
        .then((t) => sample(t, 'app_script_duration_seconds_count', { script: 'enqueue', outcome: 'ok' }));
    expect(await enqueues()).toBe(3);
    await metrics.close();
    previous.mockClear();
    await q.enqueue({ n: 4 });
    expect(previous).toHaveBeenCalledWith('enqueue', expect.any(Number), undefined);
    expect(await enqueues()).toBe(3); // the metrics' own observer is gone
  });

  it('reads the ms of a stream id', () => {
    expect(streamMs('1767225600123-7')).toBe(1767225600123);
  });
});
