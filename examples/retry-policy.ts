import { EchoMQ, type RetryPolicy } from 'echomq';

const mq = await EchoMQ.connect({ url: process.env.REDIS_URL });
const calls = mq.queue<{ status: number }>(`retry-policy-${process.pid}`); // a fresh queue per run

class HttpError extends Error {
  constructor(readonly status: number) {
    super(`HTTP ${status}`);
  }
}

// A 4xx will never succeed: dead-letter it now. A 503: again in 10 ms. Anything else:
// undefined leaves it to the declarative backoff (the job's own, else the consumer's).
const retry: RetryPolicy = (_attempts, error) => {
  if (error instanceof HttpError && error.status < 500) return 'dead';
  if (error instanceof HttpError && error.status === 503) return 10;
  return undefined;
};

const consumer = calls.consume(
  async (job) => {
    if (job.attempts < 3) throw new HttpError(job.data.status); // the API fails twice
    return `ok on attempt ${job.attempts}`;
  },
  { retry },
);

const busy = await calls.enqueue({ status: 503 }, { attempts: 5 });
const bad = await calls.enqueue({ status: 400 }, { attempts: 5 });
console.log(`503: ${await calls.waitFor(busy.id, { timeoutMs: 5000 })}`);
await calls.waitFor(bad.id, { timeoutMs: 5000 }).catch(() => {});
const row = await calls.get(bad.id);
console.log(`400: ${row?.state} after ${row?.attempts} attempt`);

await consumer.close();
await mq.close();
