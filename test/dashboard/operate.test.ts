// Operating from the dashboard against a real redis-server: finding jobs (by id, name, lane,
// state, tag, error text, a bounded data search, a data preview), bulk actions on checked rows
// with their feedback, Retry N matching and Retry all as tasks with progress, the completed
// count at the retention cap, and a chart one burst cannot flatten; over HTTP and in headless
// Chromium, with screenshots at desktop and 390 px width under test-artifacts/.
import { join } from 'node:path';
import { describe, expect } from 'vitest';
import { chartScale, throughputSvg } from '../../src/dashboard/pages.js';
import { useRedisServer } from '../support/harness.js';
import {
  acceptDialogs,
  collectProblems,
  csrfOf,
  dashboardTest,
  HAS_CHROMIUM,
  scrollWidth,
} from './fixture.js';

const env = useRedisServer();
const it = dashboardTest(env, 'ops');

// ── over HTTP ───────────────────────────────────────────────────────────────────

describe('finding and acting over HTTP', () => {
  it('opens a job by id (in its queue, or in whichever queue holds it), 404 otherwise', async ({
    mq,
    queueName: name,
    q,
    dashboard,
  }) => {
    const { id } = await q.enqueue({ n: 1 }, { id: 'JOB-find-me' });
    const other = mq.queue(`${name}-b`);
    await other.enqueue({ n: 2 }, { id: 'JOB-twice' });
    await q.enqueue({ n: 3 }, { id: 'JOB-twice' });
    const d = await dashboard();
    const one = await fetch(`${d.url}find?id=${id}`, { redirect: 'manual' });
    expect(one.status).toBe(303);
    expect(one.headers.get('location')).toBe(`/queues/${name}/jobs/${id}`);
    const scoped = await fetch(`${d.url}find?id=JOB-twice&queue=${name}`, { redirect: 'manual' });
    expect(scoped.headers.get('location')).toBe(`/queues/${name}/jobs/JOB-twice`);
    const both = await (await fetch(`${d.url}find?id=JOB-twice`)).text();
    expect(both).toContain('2 queues hold a job with this id');
    const none = await fetch(`${d.url}find?id=JOB-nowhere`);
    expect(none.status).toBe(404);
    expect(await none.text()).toContain('no job JOB-nowhere in any queue');
  });

  it('filters by name, tag, error and data text, saying how far a bounded search read', async ({
    queueName: name,
    dashboard,
    deadJobs,
  }) => {
    await deadJobs([
      {
        data: { to: 'ada@example.com' },
        opts: { name: 'mail', tags: ['vip'] },
        error: 'SMTP 550 mailbox full',
      },
      { data: { to: 'bob@example.com' }, opts: { name: 'mail' }, error: 'SMTP 421 try later' },
      { data: { to: 'ada@example.com' }, opts: { name: 'sms', tags: ['vip'] }, error: 'carrier down' },
    ]);
    const d = await dashboard();
    const list = async (qs: string) =>
      (await (await fetch(`${d.url}api/queues/${name}/jobs?state=dead&${qs}`)).json()) as {
        total: number;
        jobs: { name: string; preview: string; error: { message: string } }[];
        search?: { scanned: number; inState: number; complete: boolean };
      };
    const mail = await list('name=mail');
    expect(mail.total).toBe(2);
    expect(mail.search).toEqual({ scanned: 3, inState: 3, bound: 10_000, complete: true });
    expect((await list('name=mail&tag=vip')).jobs.map((j) => j.preview)).toEqual([
      '{"to":"ada@example.com"}',
    ]);
    expect((await list('error=SMTP')).total).toBe(2);
    expect((await list('error=smtp')).total).toBe(0); // the error filter is retryAll's: case-sensitive
    expect((await list('text=ADA')).total).toBe(2); // data or error, case-insensitive
    const page = await (await fetch(`${d.url}queues/${name}?state=dead&name=mail&error=SMTP`)).text();
    expect(page).toContain('2 matching. All 3 dead jobs read.');
    expect(page).toContain('read at most the first 10,000 jobs of the state');
    expect(page).toContain('data-confirm="Retry the 2 matching dead jobs?"');
    expect(page).toContain('{&quot;to&quot;:&quot;bob@example.com&quot;}'); // the preview cell
  });

  it('bulk retries checked rows and reports what each did; Retry all runs as a task', async ({
    queueName: name,
    q,
    dashboard,
    deadJobs,
  }) => {
    const ids = await deadJobs([{ data: 1 }, { data: 2 }, { data: 3 }]);
    const d = await dashboard();
    const token = await csrfOf(d.url);
    const body = new URLSearchParams([
      ['_csrf', token],
      ['action', 'retry'],
      ['id', ids[0]!],
      ['id', ids[1]!],
      ['id', 'JOB-gone'],
    ]);
    const res = await fetch(`${d.url}queues/${name}/bulk`, {
      method: 'POST',
      headers: { accept: 'application/json', 'content-type': 'application/x-www-form-urlencoded' },
      body: body.toString(),
    });
    expect(res.status).toBe(200);
    const { result } = (await res.json()) as { result: { done: number; refused: { id: string }[] } };
    expect(result.done).toBe(2);
    expect(result.refused.map((r) => r.id)).toEqual(['JOB-gone']);
    expect((await q.get(ids[0]!))?.state).toBe('pending');
    expect((await q.get(ids[2]!))?.state).toBe('dead');
    const none = await fetch(`${d.url}queues/${name}/bulk`, {
      method: 'POST',
      headers: { 'x-csrf-token': token, 'content-type': 'application/x-www-form-urlencoded' },
      body: 'action=retry',
    });
    expect(none.status).toBe(400);
    const bad = await fetch(`${d.url}queues/${name}/bulk`, {
      method: 'POST',
      headers: { 'x-csrf-token': token, 'content-type': 'application/x-www-form-urlencoded' },
      body: `action=purge&id=${ids[2]}`,
    });
    expect(bad.status).toBe(400);
    expect(await bad.text()).toContain('action must be one of promote, retry, cancel, remove');
  });

  it('scales the chart so one burst does not flatten the rest (3 × the 90th percentile), marking cut bars', () => {
    const steady = Array.from({ length: 59 }, (_, i) => 8 + (i % 5));
    expect(chartScale([...steady, 50_000])).toEqual({ max: 36, peak: 50_000, capped: 1 });
    expect(chartScale([0, 0, 40])).toEqual({ max: 40, peak: 40, capped: 0 }); // one busy minute: its own scale
    expect(chartScale([10, 12, 11])).toEqual({ max: 12, peak: 12, capped: 0 });
    const minutes = [...steady, 50_000].map((n, i) => ({ minute: i * 60_000, completed: n, failed: 0 }));
    const svg = throughputSvg(minutes, 'q');
    expect(svg.match(/data-cut="1"/g)).toHaveLength(1);
    expect(svg).toContain('36/min scale: 3 × the 90th percentile minute; 1 taller bar cut (peak 50000/min)');
    // A steady minute keeps a readable height (8 of 36: over a fifth of the plot), not a sliver.
    const heights = [
      ...svg.matchAll(/class="bar-ok" x="[\d.]+" y="[\d.]+" width="[\d.]+" height="([\d.]+)"/g),
    ];
    expect(Number(heights[0]![1])).toBeGreaterThan(118 / 5);
  });

  it('says when the completed count sits at the retention cap', async ({
    queueName: name,
    q,
    dashboard,
    consumers,
  }) => {
    await q.configure({ retention: { completed: { count: 3 } } });
    consumers.push(q.consume(() => 'ok', { concurrency: 4, beatMs: 200 }));
    const ids = (await q.enqueueMany(Array.from({ length: 2 }, (_, i) => ({ data: i })))).map((r) => r.id);
    for (const id of ids) await q.waitFor(id, { timeoutMs: 10_000 });
    const d = await dashboard();
    const below = await (await fetch(`${d.url}queues/${name}`)).text();
    expect(below).toMatch(/data-cap="completed" data-kept="3" title="[^"]+" hidden>at cap 3/);
    const more = (await q.enqueueMany(Array.from({ length: 3 }, (_, i) => ({ data: i })))).map((r) => r.id);
    for (const id of more) await q.waitFor(id, { timeoutMs: 10_000 });
    const at = await (await fetch(`${d.url}queues/${name}`)).text();
    expect(at).toMatch(
      /data-cap="completed" data-kept="3" title="the queue keeps the newest 3 completed jobs[^"]*">at cap 3/,
    );
    const overview = await (await fetch(d.url)).text();
    expect(overview).toContain('>at cap 3</span>');
  });
});

// ── in a browser ────────────────────────────────────────────────────────────────

describe.skipIf(!HAS_CHROMIUM)('operating in headless Chromium', () => {
  it('finds jobs, bulk-retries checked rows, retries N matching and all (toast with progress); 390 px fits', async ({
    queueName: name,
    q,
    dashboard,
    deadJobs,
    browser,
    shots,
  }) => {
    const bulk = Array.from({ length: 1200 }, (_, i) => ({
      data: { invoice: 1000 + i, tenant: `t${i % 3}` },
      opts: { name: i % 4 === 0 ? 'refund' : 'charge', tags: i % 2 === 0 ? ['eu'] : ['us'] },
      error: i % 3 === 0 ? 'card declined' : 'gateway timeout after 30 s',
    }));
    const ids = await deadJobs(bulk);
    const target = ids[7]!;
    const d = await dashboard();
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    const problems = collectProblems(page);
    const dialogs = acceptDialogs(page);

    // Filters: name, tag and error text; the preview shows each job's data on one line.
    await page.goto(`${d.url}queues/${name}?state=dead`);
    await page.locator('body[data-live="ready"]').waitFor();
    await page.locator('#filters input[name="name"]').fill('refund');
    await page.locator('#filters input[name="tag"]').fill('eu');
    await page.locator('#filters input[name="error"]').fill('card declined');
    await page.locator('#filters button[type="submit"]').click();
    await page.waitForURL(/name=refund/);
    // Jobs i with i % 4 === 0 (refund, so eu) and i % 3 === 0: i % 12 === 0, 100 of them.
    expect(await page.locator('#search-note').textContent()).toBe('100 matching. All 1,200 dead jobs read.');
    expect(await page.locator('#jobs tr[data-job]').count()).toBe(25);
    expect(await page.locator('#jobs tr[data-job] td.preview').first().textContent()).toMatch(
      /^\{"invoice":\d+,"tenant":"t\d"\}$/,
    );
    // Times are shown in the browser's zone with a relative form, UTC in the title.
    await expect.poll(() => page.locator('#jobs time[data-local]').count()).toBeGreaterThan(0);
    expect(await page.locator('#jobs time[data-local]').first().textContent()).toMatch(
      /\(\d+ (s|min) ago\)$/,
    );
    await page.screenshot({ path: join(shots, 'operate-filters-desktop.png'), fullPage: true });
    // Retry N matching takes the filters retryAll has (name and error): not offered with a tag.
    expect(await page.locator('#jobs-card form[data-task]').count()).toBe(0);

    // Retry N matching: the count is in the confirm; it runs as a task whose toast ends done.
    await page.goto(
      `${d.url}queues/${name}?state=dead&name=refund&error=${encodeURIComponent('card declined')}`,
    );
    await page.locator('body[data-live="ready"]').waitFor();
    await page.locator('form[data-task] button', { hasText: 'Retry 100 matching' }).click();
    await page.locator('.toast[data-state="done"]').waitFor({ timeout: 60_000 });
    expect(dialogs.pop()).toBe('Retry the 100 matching dead jobs?');
    expect(await page.locator('.toast[data-state="done"]').textContent()).toContain(
      'retry dead jobs named refund whose error contains "card declined": done, 100',
    );
    expect((await q.counts()).dead).toBe(1100);

    // A data search (bounded) and the checked rows: retry two of them.
    await page.goto(`${d.url}queues/${name}?state=dead&text=${encodeURIComponent('"invoice":1007')}`);
    await page.locator('#jobs tr[data-job]').first().waitFor();
    expect(await page.locator('#jobs tr[data-job]').count()).toBe(1);
    expect(await page.locator('#jobs tr[data-job]').getAttribute('data-job')).toBe(target);
    await page.goto(`${d.url}queues/${name}?state=dead&name=charge`);
    await page.locator('body[data-live="ready"]').waitFor();
    const boxes = page.locator('#jobs input[name="id"]');
    await boxes.nth(0).check();
    await boxes.nth(1).check();
    await expect.poll(() => page.locator('#bulk-count').textContent()).toBe('2 selected');
    await page.locator('#bulk button[data-bulk="retry"]').click();
    await page.locator('.toast[data-state]').last().waitFor();
    expect(dialogs.pop()).toBe('Retry 2 selected job(s)?');
    expect(await page.locator('.toast[data-state]').last().textContent()).toContain('Retried 2 of 2');
    expect((await q.counts()).dead).toBe(1098);

    // Open by id from the queue page.
    await page.locator('form.find-id input[name="id"]').fill(target);
    await page.locator('form.find-id button').click();
    await page.waitForURL(`**/queues/${name}/jobs/${target}`);

    // Retry all on the dead tab: a task of 1,098 jobs in batches of 500, its progress in a toast.
    await page.goto(`${d.url}queues/${name}?state=dead`);
    await page.locator('body[data-live="ready"]').waitFor();
    await page.locator('form[data-task] button', { hasText: 'Retry all 1,098' }).click();
    await page.locator('.toast[data-state="done"]').waitFor({ timeout: 60_000 });
    expect(dialogs.pop()).toBe(`Retry all 1,098 dead jobs of ${name}?`);
    expect(await page.locator('.toast[data-state="done"]').textContent()).toContain(
      'retry dead jobs: done, 1,098 of 1,098',
    );
    expect((await q.counts()).dead).toBe(0);
    await page.screenshot({ path: join(shots, 'operate-retry-all-desktop.png'), fullPage: true });

    // Retry all is on the cancelled tab too.
    const cancelled = await q.enqueue({ c: 1 });
    await q.cancel(cancelled.id);
    await page.goto(`${d.url}queues/${name}?state=cancelled`);
    expect(await page.locator('form[data-task] button', { hasText: 'Retry all 1' }).count()).toBe(1);

    // 390 px: the filters and the list fit the screen (the table scrolls inside its card).
    const narrow = await browser.newPage({ viewport: { width: 390, height: 844 } });
    await narrow.goto(`${d.url}queues/${name}?state=pending&name=charge`);
    await narrow.locator('#filters').waitFor();
    const width = await narrow.evaluate(scrollWidth);
    expect(width, 'the queue page is no wider than the screen').toBeLessThanOrEqual(390);
    await narrow.screenshot({ path: join(shots, 'operate-filters-390.png'), fullPage: true });
    await narrow.close();
    expect(problems).toEqual([]);
  }, 240_000);
});
