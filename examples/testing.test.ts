import { EchoMQ, type Job } from 'echomq';
import { enqueued, runUntilIdle } from 'echomq/testing';
import { afterEach, beforeEach, expect, it } from 'vitest';

// The application under test: signing up enqueues a welcome email, and a handler sends it.
const sent: string[] = [];
let mailServerUp = true;

function signUp(mq: EchoMQ, email: string) {
  return mq.queue<{ to: string }>('emails').enqueue({ to: email }, { name: 'welcome' });
}

async function sendEmail(job: Job<{ to: string }>): Promise<void> {
  if (!mailServerUp) throw new Error('the mail server timed out');
  sent.push(job.data.to);
}

let mq: EchoMQ;
beforeEach(async () => {
  mq = await EchoMQ.connect({ url: 'memory://' }); // an engine of this test's own, no Redis
  sent.length = 0;
  mailServerUp = true;
});
afterEach(() => mq.close());

it('enqueues a welcome email on sign-up, and sends it', async () => {
  const emails = mq.queue<{ to: string }>('emails');
  emails.consume(sendEmail);
  await signUp(mq, 'ada@example.com');
  expect(await enqueued(emails, { name: 'welcome', data: { to: 'ada@example.com' } })).toHaveLength(1);

  expect(await runUntilIdle(emails)).toMatchObject({ completed: 1 });
  expect(sent).toEqual(['ada@example.com']);
});

it('retries a failed send 5 minutes later', async () => {
  const emails = mq.queue<{ to: string }>('emails');
  emails.consume(sendEmail, { backoff: { kind: 'fixed', ms: 5 * 60_000 } });
  mailServerUp = false;
  await signUp(mq, 'bob@example.com');
  expect(await runUntilIdle(emails)).toMatchObject({ retried: 1, completed: 0 });

  mailServerUp = true;
  expect(await runUntilIdle(emails, { advance: '4m' })).toMatchObject({ completed: 0 });
  expect(await runUntilIdle(emails, { advance: '1m' })).toMatchObject({ completed: 1 });
  expect(sent).toEqual(['bob@example.com']);
});

it('sends the digest at 09:00 Berlin time, before and after the clocks go forward', async () => {
  mq.clock.set('2026-03-28T06:00:00Z'); // Saturday; summer time starts on Sunday at 02:00
  const digests = mq.queue('digests');
  await digests.schedulers.upsert('morning', { pattern: '0 9 * * *', tz: 'Europe/Berlin' });

  const ranAt: string[] = [];
  const berlin = { timeZone: 'Europe/Berlin', weekday: 'short', hour: '2-digit', minute: '2-digit' } as const;
  await runUntilIdle(digests, {
    handler: () => {
      const now = new Date(mq.clock.now());
      ranAt.push(`${now.toLocaleString('en-GB', berlin)} Berlin, ${now.getUTCHours()}:00 UTC`);
    },
    until: '2026-03-29T12:00:00Z',
  });
  expect(ranAt).toEqual(['Sat 09:00 Berlin, 8:00 UTC', 'Sun 09:00 Berlin, 7:00 UTC']);
});

it('runs a job again when its worker stalls past the lease', async () => {
  const reports = mq.queue('reports');
  const attempts: number[] = [];
  reports.consume(
    async (job, ctx) => {
      attempts.push(job.attempts);
      if (job.attempts > 1) return;
      mq.clock.advance('31s'); // this worker stalls past its 30 s lease...
      await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve)); // ...until it hears
    },
    { leaseMs: 30_000 },
  );
  await reports.enqueue({ month: '2026-03' });

  expect(await runUntilIdle(reports)).toMatchObject({ lost: 1, completed: 1 });
  expect(attempts).toEqual([1, 2]);
});
