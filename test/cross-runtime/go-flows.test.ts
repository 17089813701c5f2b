// Flows across queues between Go and TypeScript (SPEC 14.1): a tree added by Go whose children
// live in another queue than their parents, run by consumers of both runtimes. A child whose
// parent is in another queue ends with a notice in its own queue, and whichever runtime's
// consumer of that queue beats next delivers it; each parent runs once, after all its children,
// and reads their results. Without Go the file skips, saying so.
import { describe, expect } from 'vitest';
import type { JobView } from '../../src/core/types.js';
import type { FlowTree } from '../../src/wire/flow-reads.js';
import { queueTest, useRedisServer } from '../support/harness.js';
import { poll, within } from '../support/wait.js';
import { GoConsumer, type GoLine, goRun, haveGo, useGoBuild } from './go-runtime.js';

const env = useRedisServer();

interface Work {
  n: number;
  children?: boolean;
}

interface Ran {
  by: string;
  children?: Record<string, unknown>;
}

/** The tree: report (the test's queue) over two parts in `kids` (one a parent of a leaf back in the test's queue) and a leaf. */
const spec = (name: string, kids: string) => ({
  name: 'report',
  data: { n: 0, children: true },
  children: [
    { queue: kids, name: 'part', data: { n: 1 } },
    {
      queue: kids,
      name: 'part',
      data: { n: 2, children: true },
      children: [{ queue: name, name: 'leaf', data: { n: 3 } }],
    },
    { name: 'leaf', data: { n: 4 } },
  ],
});

interface Tree {
  id: string;
  queue: string;
  children: Tree[];
}

describe.skipIf(!haveGo)('flows across queues, Go and TypeScript', () => {
  const emqGo = useGoBuild();
  const it = queueTest<Work, Ran>(env, 'goflows');

  // Who consumes which queue: both runtimes on both; or one runtime per queue, so the notices
  // of the children's queue are delivered by one runtime and the parent run by the other.
  const fleets: { title: string; parents: ('go' | 'ts')[]; kids: ('go' | 'ts')[] }[] = [
    { title: 'Go and TypeScript consumers on both queues', parents: ['go', 'ts'], kids: ['go', 'ts'] },
    { title: 'Go delivers the notices, TypeScript runs the parents', parents: ['ts'], kids: ['go'] },
    { title: 'TypeScript delivers the notices, Go runs the parents', parents: ['go'], kids: ['ts'] },
  ];

  for (const fleet of fleets) {
    it(`a Go flow with children in another queue, ${fleet.title}: each parent runs once, after its children, with their results`, async ({
      q,
      mq,
      queueName: name,
      consumers,
    }) => {
      const kids = `${name}-kids`;
      const qk = mq.queue<Work, Ran>(kids);
      const tsRuns: string[] = [];
      const goConsumers: GoConsumer[] = [];
      try {
        for (const [queue, who] of [
          [q, fleet.parents],
          [qk, fleet.kids],
        ] as const) {
          if (who.includes('go')) goConsumers.push(new GoConsumer(emqGo.bin, env.server.url, queue.name, 4));
          if (who.includes('ts')) {
            consumers.push(
              queue.consume(
                async (job, ctx) => {
                  tsRuns.push(job.id);
                  return job.data.children
                    ? { by: 'ts', children: await ctx.childrenResults() }
                    : { by: 'ts' };
                },
                { concurrency: 4, beatMs: 200 },
              ),
            );
          }
        }
        await Promise.all(
          goConsumers.map((g) => within(g.ready.promise, 20_000, 'the Go consumers to start')),
        );
        const out = JSON.parse(
          await goRun(
            emqGo.bin,
            ['flow', '--url', env.server.url, '--queue', name],
            JSON.stringify(spec(name, kids)),
          ),
        ) as { status: string; tree: Tree };
        expect(out.status).toBe('added');
        const tree = out.tree;
        const [part1, part2, leaf4] = tree.children as [Tree, Tree, Tree];
        const leaf3 = part2.children[0]!;
        expect([part1.queue, part2.queue, leaf3.queue, leaf4.queue]).toEqual([kids, kids, name, name]);
        const handle = (t: Tree) => (t.queue === name ? q : qk);
        const done = await poll(
          () => q.get(tree.id),
          (v) => v?.state === 'completed' || v?.state === 'dead',
          'the root to end',
          30_000,
        );
        expect(done!.state).toBe('completed');

        // TypeScript reads the Go tree across both queues, every job completed.
        const states = (t: FlowTree | null): unknown => t && [t.queue, t.state, t.children.map(states)];
        expect(states(await q.flow(tree.id))).toEqual([
          name,
          'completed',
          [
            [kids, 'completed', []],
            [kids, 'completed', [[name, 'completed', []]]],
            [name, 'completed', []],
          ],
        ]);

        // Each job ran once, in whichever runtime, and each parent after all its children.
        const all = [tree, part1, part2, leaf3, leaf4];
        const goStarts = (goConsumers.flatMap((g) => g.of('started')) as GoLine[]).map((l) => l.id);
        for (const job of all) {
          expect([...goStarts, ...tsRuns].filter((id) => id === job.id)).toHaveLength(1);
        }
        const rows = new Map<string, JobView>();
        for (const job of all) rows.set(job.id, (await handle(job).get(job.id))!);
        for (const [parent, children] of [
          [tree, tree.children],
          [part2, part2.children],
        ] as const) {
          for (const child of children) {
            expect(rows.get(child.id)!.finishedAt!).toBeLessThanOrEqual(rows.get(parent.id)!.startedAt!);
          }
        }
        // The parents read every child's result (the remote ones handed over by notices).
        const result = (id: string) => rows.get(id)!.result as Ran;
        expect(Object.keys(result(tree.id).children ?? {})).toHaveLength(3);
        expect(Object.keys(result(part2.id).children ?? {})).toHaveLength(1);
        for (const g of goConsumers) expect(await g.close()).toBe(0);
      } finally {
        for (const g of goConsumers) await g.kill();
      }
    }, 60_000);
  }
});
