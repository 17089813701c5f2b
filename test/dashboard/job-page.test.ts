// The job page that explains the job, against a real redis-server: each attempt with its
// consumer, wait, run time and error; a running job's lease, flagged once expired; a flow
// parent's children with their results; collapsible formatted JSON with a copy button; long
// logs paged. Over HTTP, and in headless Chromium with screenshots at desktop and 390 px
// (test-artifacts/job-page-desktop.png, job-page-390.png) and no horizontal overflow at 390 px.
import { join } from 'node:path';
import { describe, expect } from 'vitest';
import { useRedisServer } from '../support/harness.js';
import { collectProblems, dashboardTest, HAS_CHROMIUM, scrollWidth } from './fixture.js';

const env = useRedisServer();
const it = dashboardTest<Record<string, unknown>, unknown>(env, 'jobpage');
const clipboardText = () =>
  (
    globalThis as unknown as { navigator: { clipboard: { readText(): Promise<string> } } }
  ).navigator.clipboard.readText();
const LONG_ERROR = `card declined by the issuer: ${'do not honour; '.repeat(20)}(code 05)`;

describe('the job page over HTTP', () => {
  it('lists a flow parent’s children with their results, and pages a long log through the logs API', async ({
    mq,
    q,
    defer,
    dashboard,
  }) => {
    const flow = await mq.flow({
      queue: q.name,
      name: 'report',
      data: { step: 'report' },
      children: [
        { queue: q.name, name: 'fetch', data: { step: 'a' } },
        { queue: q.name, name: 'fetch', data: { step: 'b' } },
      ],
    });
    const c = q.consume(
      (job, ctx) => {
        if (job.name === 'report') for (let i = 1; i <= 250; i++) ctx.log(`line ${i}`);
        return { done: (job.data as { step: string }).step };
      },
      { maxLogLines: 300 },
    );
    defer(() => c.close());
    await q.waitFor(flow.id, { timeoutMs: 10_000 });
    const d = await dashboard();
    const page = await (await fetch(`${d.url}queues/${q.name}/jobs/${flow.id}`)).text();
    for (const child of flow.children) {
      expect(page).toContain(`${child.id}</a>`);
    }
    expect(page).toContain('processed → <span class="mono">{&quot;done&quot;:&quot;a&quot;}</span>');
    expect(page).toContain('lines 151–250 of 250');
    expect(page).toMatch(/<table class="grid runs" id="job-runs"><thead>/);
    const api = `${d.url}api/queues/${q.name}/jobs/${flow.id}/logs`;
    const first = (await (await fetch(`${api}?from=0&count=2`)).json()) as { logs: string[]; count: number };
    expect(first).toEqual({ logs: ['line 1', 'line 2'], count: 250, from: 0 });
    expect((await fetch(`${api}?from=-1`)).status).toBe(400);
    expect((await fetch(`${api}?count=5000`)).status).toBe(400);
    expect((await fetch(`${d.url}api/queues/${q.name}/jobs/nope/logs`)).status).toBe(404);
  });
});

describe.skipIf(!HAS_CHROMIUM)('the job page in headless Chromium', () => {
  it('explains a job that failed twice: attempts, JSON with copy, paged logs, an expired lease; 390 px fits', async ({
    q,
    defer,
    dashboard,
    browser,
    shots,
  }) => {
    const { id } = await q.enqueue(
      {
        customer: 'cus_4242',
        order: { id: 'ord_77', lines: [{ sku: 'tea', qty: 2 }], total: 18.5 },
        notify: true,
      },
      { name: 'charge', attempts: 3, backoff: { kind: 'fixed', ms: 50 }, tags: ['eu'] },
    );
    const c = q.consume(
      (job, ctx) => {
        for (let i = 1; i <= 80; i++) ctx.log(`attempt ${job.attempts}: step ${i}`);
        if (job.attempts === 1) throw new Error('gateway timeout after 30 s');
        if (job.attempts === 2) throw new Error(LONG_ERROR);
        return { charged: 18.5, receipt: { id: 'rcpt_9', at: '2026-12-01' } };
      },
      { maxLogLines: 300 },
    );
    await q.waitFor(id, { timeoutMs: 10_000 });
    await c.close();
    // A second job whose consumer hangs past its lease, with nobody to recover it.
    const hung = q.consume(() => new Promise(() => {}), {
      leaseMs: 300,
      extendMs: 600_000,
      recovery: 'off',
      concurrency: 1,
    });
    defer(() => hung.close({ timeoutMs: 0 }));
    const stuck = await q.enqueue({ to: 'ada@example.com' }, { name: 'send-email' });
    await expect.poll(async () => (await q.get(stuck.id))?.state).toBe('active');
    await new Promise((r) => setTimeout(r, 400)); // past the 300 ms lease

    const d = await dashboard();
    const problems: string[] = [];
    for (const [label, viewport] of [
      ['desktop', { width: 1280, height: 900 }],
      ['390', { width: 390, height: 844 }],
    ] as const) {
      const context = await browser.newContext({ viewport });
      await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: d.url });
      const page = await context.newPage();
      collectProblems(page, problems);
      await page.goto(`${d.url}queues/${q.name}/jobs/${id}`);
      await page.locator('body[data-live="ready"]').waitFor();

      // Each attempt: its consumer, wait and run time, how it ended and its own error.
      const rows = page.locator('#job-runs tbody tr');
      await expect.poll(() => rows.count()).toBe(3);
      expect(await rows.evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-outcome')))).toEqual([
        'failed',
        'failed',
        'completed',
      ]);
      expect(await rows.nth(0).locator('td[data-label="error"]').textContent()).toBe(
        'gateway timeout after 30 s',
      );
      const second = (await rows.nth(1).locator('td[data-label="error"]').textContent()) ?? '';
      expect(second.endsWith('…')).toBe(true);
      expect(LONG_ERROR.startsWith(second.slice(0, -1))).toBe(true);
      expect(await rows.nth(0).locator('td[data-label="consumer"]').textContent()).toBe(c.id);
      expect(await rows.nth(1).locator('td[data-label="waited"]').textContent()).toMatch(/\d+ ms|\d+\.\d s/);
      expect(await page.locator('#job-error').textContent()).toBe(LONG_ERROR); // the row keeps it whole
      // Times read local and relative once the page script has run.
      await page.locator('#job-created time[data-local="1"]').waitFor();
      expect(await page.locator('#job-created time').textContent()).toMatch(/\(\d+ s ago\)$/);
      if (label === '390') {
        // Two screenfuls as a phone shows them: the facts, then the attempts as cards.
        await page.screenshot({ path: join(shots, 'job-page-390-top.png') });
        await page.locator('#job-runs-box').evaluate((box) => box.scrollIntoView());
        await page.screenshot({ path: join(shots, 'job-page-390-attempts.png') });
      }

      // Formatted JSON, folded and unfolded, and copied as it reads.
      expect(await page.locator('#job-data').textContent()).toContain('"sku": "tea"');
      expect(await page.locator('#job-result .j-k').first().textContent()).toBe('"charged"');
      await page.locator('#job-result-box > summary h2').click();
      expect(await page.locator('#job-result-box').getAttribute('open')).toBeNull();
      await page.locator('#job-result-box > summary h2').click();
      expect(await page.locator('#job-result-box').getAttribute('open')).toBe('');
      await page.locator('#job-data-box button.copy').click();
      await expect.poll(() => page.locator('#job-data-box button.copy').textContent()).toBe('Copied');
      expect(JSON.parse(await page.evaluate(clipboardText))).toMatchObject({
        customer: 'cus_4242',
      });

      // 240 log lines: the newest 100, then older pages.
      expect(await page.locator('#job-logs-range').textContent()).toBe('lines 141–240 of 240');
      await page.locator('#job-logs-pager [data-logs="older"]').click();
      await expect.poll(() => page.locator('#job-logs-range').textContent()).toBe('lines 41–140 of 240');
      expect((await page.locator('#job-logs').textContent())?.split('\n')[0]).toBe('attempt 1: step 41');
      await page.locator('#job-logs-pager [data-logs="older"]').click();
      await expect.poll(() => page.locator('#job-logs-range').textContent()).toBe('lines 1–100 of 240');
      expect(await page.locator('#job-logs-pager [data-logs="older"]').isDisabled()).toBe(true);
      await page.locator('#job-logs-pager [data-logs="newer"]').click();
      await expect.poll(() => page.locator('#job-logs-range').textContent()).toBe('lines 101–200 of 240');

      await page.screenshot({ path: join(shots, `job-page-${label}.png`), fullPage: true });
      if (label === '390') {
        const width = await page.evaluate(scrollWidth);
        expect(width, 'the job page is no wider than the screen').toBeLessThanOrEqual(390);
      }

      // The hung job: running, its lease deadline passed and flagged.
      await page.goto(`${d.url}queues/${q.name}/jobs/${stuck.id}`);
      await page.locator('#job-state').waitFor();
      expect(await page.locator('#job-lease .badge.lease-expired').textContent()).toBe('expired');
      expect(await page.locator('#job-runs tbody tr').getAttribute('data-outcome')).toBe('running');
      expect(await page.locator('#job-runs td[data-label="consumer"]').textContent()).toBe(hung.id);
      await page.screenshot({ path: join(shots, `job-page-lease-${label}.png`), fullPage: true });
      if (label === '390') {
        const width = await page.evaluate(scrollWidth);
        expect(width, 'the running job’s page is no wider than the screen').toBeLessThanOrEqual(390);
      }
      await context.close();
    }
    expect(problems).toEqual([]);
  }, 120_000);
});
