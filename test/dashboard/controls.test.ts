// The dashboard's controls against a real redis-server: a lane's pause, resume, concurrency and
// rate limit (set and clear) with its waiting count and oldest wait; a scheduler's run now and
// remove, a repeat's remove; running checked scheduled jobs now. Over HTTP (the CSRF guard and
// read-only mode as for every action), and in headless Chromium with the confirm and the toast,
// screenshots at desktop and 390 px width under test-artifacts/.
import { join } from 'node:path';
import { describe, expect } from 'vitest';
import type { Queue } from '../../src/queue/queue.js';
import { useRedisServer } from '../support/harness.js';
import {
  acceptDialogs,
  collectProblems,
  csrfOf,
  dashboardTest,
  HAS_CHROMIUM,
  post,
  scrollWidth,
} from './fixture.js';

const env = useRedisServer();
const it = dashboardTest(env, 'ctl');

/** Jobs waiting in lanes of `q`: tenant-a 5, tenant-b 2, tenant-c 1. */
async function laneJobs(q: Queue): Promise<void> {
  const groups = [
    'tenant-a',
    'tenant-a',
    'tenant-a',
    'tenant-a',
    'tenant-a',
    'tenant-b',
    'tenant-b',
    'tenant-c',
  ];
  await q.enqueueMany(groups.map((group, i) => ({ data: { n: i }, opts: { group, name: 'mail' } })));
}

/** The lane `group` of `q`, as lanes.list() reads it. */
const laneOf = async (q: Queue, group: string) => (await q.lanes.list()).find((l) => l.group === group)!;

// ── over HTTP ───────────────────────────────────────────────────────────────────

describe('controls over HTTP', () => {
  it('lanes: busiest first with waiting and oldest wait; pause, resume, concurrency and rate set and cleared', async ({
    queueName: name,
    q,
    dashboard,
  }) => {
    await laneJobs(q);
    await q.lanes.configureDefault({ concurrency: 4 });
    const d = await dashboard();
    const page = await (await fetch(`${d.url}queues/${name}/lanes`)).text();
    const order = [...page.matchAll(/data-lane-card="([^"]+)"/g)].map((m) => m[1]);
    expect(order).toEqual(['tenant-a', 'tenant-b', 'tenant-c']);
    expect(page).toContain('8 waiting');
    expect(page).toMatch(
      /<span data-lane-pending>5<\/span> waiting · oldest wait <span data-lane-wait>[\d.]+ m?s</,
    );
    const api = (await (await fetch(`${d.url}api/queues/${name}/lanes`)).json()) as {
      lanes: { group: string; pending: number }[];
      oldestWaitingMs: Record<string, number>;
    };
    expect(api.lanes.find((l) => l.group === 'tenant-a')?.pending).toBe(5);
    expect(api.oldestWaitingMs['tenant-a']).toBeGreaterThanOrEqual(0);

    const token = await csrfOf(d.url);
    const lane = `${d.url}queues/${name}/lanes/tenant-a`;
    expect((await post(`${lane}/pause`, token)).body.result?.message).toBe(
      'lane tenant-a paused: its jobs wait, running ones finish',
    );
    expect((await laneOf(q, 'tenant-a')).paused).toBe(true);
    expect((await post(`${lane}/pause`, token)).body.result?.message).toBe(
      'lane tenant-a was already paused',
    );
    await post(`${lane}/resume`, token);
    expect((await laneOf(q, 'tenant-a')).paused).toBe(false);

    expect((await post(`${lane}/concurrency`, token, { concurrency: '2', do: 'set' })).status).toBe(200);
    expect((await laneOf(q, 'tenant-a')).concurrency).toBe(2);
    await post(`${lane}/concurrency`, token, { concurrency: '2', do: 'clear' });
    expect((await laneOf(q, 'tenant-a')).concurrency, 'the default for lanes again').toBe(4);
    expect((await post(`${lane}/rate`, token, { max: '10', perMs: '1000' })).body.result?.message).toBe(
      'lane tenant-a: at most 10 per 1000 ms',
    );
    expect((await laneOf(q, 'tenant-a')).rateLimit).toEqual({ max: 10, perMs: 1000 });
    await post(`${lane}/rate`, token, { do: 'clear' });
    expect((await laneOf(q, 'tenant-a')).rateLimit).toBeNull();

    // Refused: empty or non-numeric text, a zero window (the verb's own check), no CSRF token.
    const empty = await post(`${lane}/concurrency`, token, { concurrency: '' });
    expect(empty).toEqual({
      status: 400,
      body: { error: 'concurrency: give a whole number (field concurrency)' },
    });
    expect((await post(`${lane}/rate`, token, { max: '5', perMs: 'soon' })).status).toBe(400);
    const zero = await post(`${lane}/rate`, token, { max: '5', perMs: '0' });
    expect(zero.status).toBe(400);
    expect(zero.body.error).toContain('perMs >= 1');
    expect((await post(`${lane}/pause`, 'wrong')).status).toBe(403);
    expect((await laneOf(q, 'tenant-a')).paused).toBe(false);
  });

  it('the queue page lists the busiest lanes with pause / resume and links to every lane', async ({
    queueName: name,
    q,
    dashboard,
  }) => {
    await laneJobs(q);
    for (let i = 0; i < 12; i++) await q.enqueue({}, { group: `quiet-${i}` });
    await q.lanes.pause('tenant-b');
    const d = await dashboard();
    const html = await (await fetch(`${d.url}queues/${name}`)).text();
    const rows = [...html.matchAll(/<tr data-lane="([^"]+)"/g)].map((m) => m[1]);
    expect(rows.slice(0, 2)).toEqual(['tenant-a', 'tenant-b']);
    expect(rows).toHaveLength(10);
    expect(html).toContain('the 10 busiest of 15 lanes');
    expect(html).toContain(`action="/queues/${name}/lanes/tenant-b/resume" data-control="1"`);
    expect(html).toContain(`action="/queues/${name}/lanes/tenant-a/pause" data-control="1"`);
    const second = await (await fetch(`${d.url}queues/${name}/lanes?offset=50`)).text();
    expect(second).not.toContain('data-lane-card');
    expect((await fetch(`${d.url}queues/${name}/lanes?offset=x`)).status).toBe(400);
  });

  it('schedulers: run now releases the upcoming occurrence; remove; a repeat’s remove', async ({
    queueName: name,
    q,
    dashboard,
  }) => {
    const up = await q.schedulers.upsert('hourly', { every: 3_600_000 }, { name: 'report' });
    await q.repeat.register('beat', 60_000, {});
    const d = await dashboard();
    const token = await csrfOf(d.url);
    const base = `${d.url}queues/${name}`;
    const run = await post(`${base}/schedulers/hourly/run`, token);
    expect(run.body.result).toEqual({
      jobId: up.jobId,
      message: `scheduler hourly: occurrence ${up.jobId} runs now`,
    });
    expect((await q.get(up.jobId!))?.state).toBe('pending');
    const again = await post(`${base}/schedulers/hourly/run`, token);
    expect(again.status).toBe(409);
    expect(again.body.error).toContain('scheduler hourly has no occurrence waiting');
    expect((await post(`${base}/schedulers/nope/run`, token)).status).toBe(404);
    expect((await post(`${base}/schedulers/hourly/remove`, token)).status).toBe(200);
    expect(await q.schedulers.get('hourly')).toBeNull();
    expect((await post(`${base}/schedulers/hourly/remove`, token)).status).toBe(404);
    expect((await post(`${base}/repeats/beat/remove`, token)).body.result?.message).toBe(
      'repeat beat removed, with its upcoming occurrence',
    );
    expect(await q.repeat.list()).toEqual([]);
  });

  it('runs checked scheduled jobs now (bulk promote), reporting the ones that are not scheduled', async ({
    queueName: name,
    q,
    dashboard,
  }) => {
    const a = await q.enqueueIn({ n: 1 }, 3_600_000);
    const b = await q.enqueueIn({ n: 2 }, 3_600_000);
    const c = await q.enqueue({ n: 3 });
    const d = await dashboard();
    const token = await csrfOf(d.url);
    const html = await (await fetch(`${d.url}queues/${name}?state=scheduled`)).text();
    expect(html).toContain('data-bulk="promote">Run selected now</button>');
    const body = new URLSearchParams([
      ['action', 'promote'],
      ['id', a.id],
      ['id', b.id],
      ['id', c.id],
    ]);
    const res = await fetch(`${d.url}queues/${name}/bulk`, {
      method: 'POST',
      headers: { 'x-csrf-token': token, 'content-type': 'application/x-www-form-urlencoded' },
      body: body.toString(),
    });
    const { result } = (await res.json()) as { result: { done: number; refused: { id: string }[] } };
    expect(result.done).toBe(2);
    expect(result.refused.map((r) => r.id)).toEqual([c.id]);
    expect((await q.counts()).scheduled).toBe(0);
  });

  it('the queue toolbar: pause or resume, drain the waiting jobs and clean the tab’s ended ones, each with its count', async ({
    queueName: name,
    q,
    dashboard,
  }) => {
    await laneJobs(q);
    await q.enqueue({ flat: 1 });
    const gone = await q.enqueue({ c: 1 });
    await q.cancel(gone.id);
    const d = await dashboard();
    const toolbar = async (state: string) => {
      const html = await (await fetch(`${d.url}queues/${name}?state=${state}`)).text();
      return /<div class="toolbar" id="queue-controls">(.*?)<\/div>/s.exec(html)![1]!;
    };
    const pending = await toolbar('pending');
    expect(pending).toContain('data-action="pause">Pause</button>');
    expect(pending).toContain(
      `data-confirm="Delete all 9 waiting jobs of ${name} (pending and in lanes)? Scheduled and running jobs stay." data-task="1"`,
    );
    expect(pending).toContain('>Drain 9 waiting</button>');
    expect(pending).not.toContain('Clean');
    const cancelled = await toolbar('cancelled');
    expect(cancelled).toContain('<input type="hidden" name="state" value="cancelled">');
    expect(cancelled).toContain('>Clean 1 cancelled</button>');
    expect(await toolbar('dead')).not.toContain('Clean');
  });

  it('read-only: no control forms, and every control answers 403', async ({
    queueName: name,
    q,
    dashboard,
  }) => {
    await laneJobs(q);
    await q.schedulers.upsert('hourly', { every: 3_600_000 });
    const d = await dashboard({ readOnly: true });
    const lanes = await (await fetch(`${d.url}queues/${name}/lanes`)).text();
    const scheds = await (await fetch(`${d.url}queues/${name}/schedulers`)).text();
    expect(lanes).not.toContain('data-control');
    expect(scheds).not.toContain('data-control');
    expect((await post(`${d.url}queues/${name}/lanes/tenant-a/pause`, 'x')).status).toBe(403);
    expect((await post(`${d.url}queues/${name}/schedulers/hourly/run`, 'x')).status).toBe(403);
    expect((await laneOf(q, 'tenant-a')).paused).toBe(false);
  });
});

// ── in a browser ────────────────────────────────────────────────────────────────

describe.skipIf(!HAS_CHROMIUM)('controls in headless Chromium', () => {
  it('pauses a lane, sets and clears its limits, runs a scheduler and checked jobs now, with confirms and toasts; 390 px fits', async ({
    queueName: name,
    q,
    dashboard,
    browser,
    shots,
  }) => {
    await laneJobs(q);
    await q.lanes.configure('tenant-c', { rateLimit: { max: 5, perMs: 60_000 } });
    await q.schedulers.upsert('nightly', { pattern: '0 3 * * *', tz: 'Europe/Berlin' }, { name: 'report' });
    const every = await q.schedulers.upsert('hourly', { every: 3_600_000 }, { name: 'digest' });
    const later = [await q.enqueueIn({ n: 1 }, 3_600_000), await q.enqueueIn({ n: 2 }, 3_600_000)];
    const d = await dashboard();
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    // The one refusal this test provokes (an empty concurrency) is logged as a failed load.
    const problems = collectProblems(page, [], (text) => text.includes('status of 400'));
    const dialogs = acceptDialogs(page);
    const toast = () => page.locator('.control-toast').last();

    // The queue page: the lanes card, busiest first, pauses a lane in place.
    await page.goto(`${d.url}queues/${name}`);
    await page.locator('#lanes tr[data-lane="tenant-a"] button[data-action="pause"]').click();
    await toast().waitFor();
    expect(dialogs.pop()).toBe(
      'Pause lane tenant-a? Its 5 waiting job(s) stay until it is resumed; running ones finish.',
    );
    expect(await toast().textContent()).toContain('lane tenant-a paused');
    expect((await laneOf(q, 'tenant-a')).paused).toBe(true);
    expect(await page.locator('#lanes tr[data-lane="tenant-a"] .badge.paused').count()).toBe(1);

    // The lanes page: concurrency set, rate limit set and cleared, each saying what it did.
    await page.locator('#lane-controls').click();
    await page.waitForURL(`**/queues/${name}/lanes`);
    const b = page.locator('[data-lane-card="tenant-b"]');
    await b.locator('input[name="concurrency"]').fill('2');
    await b.locator('form[action$="/concurrency"] button[value="set"]').click();
    await expect.poll(() => toast().textContent()).toContain('lane tenant-b: concurrency 2');
    expect((await laneOf(q, 'tenant-b')).concurrency).toBe(2);
    await b.locator('input[name="max"]').fill('20');
    await b.locator('input[name="perMs"]').fill('1000');
    await b.locator('form[action$="/rate"] button[value="set"]').click();
    await expect.poll(() => toast().textContent()).toContain('lane tenant-b: at most 20 per 1000 ms');
    await page.locator('[data-lane-card="tenant-c"] form[action$="/rate"] button[value="clear"]').click();
    await expect.poll(() => toast().textContent()).toContain('lane tenant-c: rate limit removed');
    expect((await laneOf(q, 'tenant-c')).rateLimit).toBeNull();
    // A refusal stays on the page, in a failed toast.
    await b.locator('input[name="concurrency"]').fill('');
    await b.locator('form[action$="/concurrency"] button[value="set"]').click();
    await page.locator('.control-toast[data-state="failed"]').waitFor();
    expect(await page.locator('.control-toast[data-state="failed"]').textContent()).toContain(
      'give a whole number',
    );
    expect(await page.locator('[data-lane-card="tenant-a"] .badge.paused').count()).toBe(1);
    await page.screenshot({ path: join(shots, 'operate-controls-desktop.png'), fullPage: true });

    // The schedulers page: run now, with its confirm; the toast names the occurrence.
    await page.goto(`${d.url}queues/${name}/schedulers`);
    await page.locator('tr[data-scheduler="hourly"] button[data-action="run-now"]').click();
    await expect.poll(() => toast().textContent()).toContain(`occurrence ${every.jobId} runs now`);
    expect(dialogs.pop()).toBe(
      'Run the upcoming occurrence of hourly now? The one after it comes at its usual time.',
    );
    expect((await q.get(every.jobId!))?.state).toBe('pending');
    await page.screenshot({ path: join(shots, 'operate-controls-schedulers-desktop.png'), fullPage: true });

    // The scheduled tab: checked jobs run now.
    await page.goto(`${d.url}queues/${name}?state=scheduled`);
    for (const j of later) await page.locator(`#jobs input[name="id"][value="${j.id}"]`).check();
    await page.locator('#bulk button[data-bulk="promote"]').click();
    await page.locator('.toast[data-state]').last().waitFor();
    expect(dialogs.pop()).toBe('Run 2 selected job(s) now?');
    await expect
      .poll(() => page.locator('.toast[data-state]').last().textContent())
      .toContain('Promoted 2 of 2');
    for (const j of later) expect((await q.get(j.id))?.state).toBe('pending');

    // The queue toolbar: Drain, its count in the confirm, runs as a task with a toast.
    await page.goto(`${d.url}queues/${name}`);
    await page.locator('#queue-controls button', { hasText: 'Drain 11 waiting' }).click();
    await page.locator('.toast[data-task][data-state="done"]').waitFor({ timeout: 30_000 });
    expect(dialogs.pop()).toBe(
      `Delete all 11 waiting jobs of ${name} (pending and in lanes)? Scheduled and running jobs stay.`,
    );
    expect(await page.locator('.toast[data-task]').textContent()).toContain('drain waiting jobs: done, 11');
    expect((await q.counts()).pending).toBe(0);

    // 390 px: the lanes page and the schedulers page fit the screen.
    const narrow = await browser.newPage({ viewport: { width: 390, height: 844 } });
    const widthOf = () => narrow.evaluate(scrollWidth);
    await narrow.goto(`${d.url}queues/${name}/lanes`);
    await narrow.locator('[data-lane-card]').first().waitFor();
    expect(await widthOf(), 'the lanes page is no wider than the screen').toBeLessThanOrEqual(390);
    await narrow.screenshot({ path: join(shots, 'operate-controls-390.png'), fullPage: true });
    await narrow.goto(`${d.url}queues/${name}/schedulers`);
    expect(await widthOf(), 'the schedulers page is no wider than the screen').toBeLessThanOrEqual(390);
    await narrow.close();
    expect(problems).toEqual([]);
  }, 180_000);
});
