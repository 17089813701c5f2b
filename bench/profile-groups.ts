// Where a Node process's CPU time went, from a V8 CPU profile (.cpuprofile: node --cpu-prof, or
// bench/node-cost.ts with PROF=<file>): self time by group (ioredis, Node's own JS by module,
// EchoMQ's code, native code called from JS such as the socket write, V8's GC and the rest of
// "(program)"), idle and the profiler's own calls left out, then the functions with the most
// self time. Samples are the main thread's wall time while busy, so a syscall's kernel time counts
// to the function that made it (the socket write: `writeUtf8String`).
//   npx tsx bench/profile-groups.ts <file.cpuprofile> [top=25]
import { readFileSync } from 'node:fs';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const IOREDIS =
  /node_modules\/(ioredis|redis-parser|redis-errors|denque|standard-as-callback|cluster-key-slot|debug)\//;

/** The group a function's self time counts to. */
function groupOf(frame: ProfileNode['callFrame']): string {
  const { url, functionName } = frame;
  if (functionName === '(idle)') return 'idle';
  if (functionName === '(garbage collector)') return 'V8: GC';
  if (functionName === '(program)') return 'V8/native: (program)';
  if (IOREDIS.test(url)) return 'ioredis';
  if (url.startsWith('node:')) {
    const module = url.slice('node:'.length).replace(/^internal\//, '');
    if (/^(streams\/|stream_base_commons|net$)/.test(module) || module === 'net')
      return 'node: net and streams';
    if (/^(process\/task_queues|process\/promises|timers|async_hooks)/.test(module))
      return 'node: microtasks, ticks, timers';
    if (/^(events|event_target)/.test(module)) return 'node: events';
    return `node: other (${module})`;
  }
  if (/\/src\//.test(url)) return 'EchoMQ';
  if (url === '') return 'native called from JS';
  if (/node_modules\//.test(url)) return `other package (${url.split('node_modules/')[1]!.split('/')[0]})`;
  return `other (${url})`;
}

function main() {
  const file = process.argv[2];
  if (!file) throw new Error('usage: npx tsx bench/profile-groups.ts <file.cpuprofile> [top=25]');
  const top = Number(process.argv[3] ?? 25);
  const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parentOf = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parentOf.set(c, n.id);
  /** Under a call into node:inspector: the profiler's own work (its stop serialises the profile). */
  const profilerOwn = (id: number): boolean => {
    for (let at: number | undefined = id; at !== undefined; at = parentOf.get(at))
      if (byId.get(at)!.callFrame.url === 'node:inspector') return true;
    return false;
  };
  const self = new Map<number, number>();
  // timeDeltas[i] is the time before sample i: charge it to that sample's node.
  for (let i = 0; i < profile.samples.length; i++) {
    const id = profile.samples[i]!;
    self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  }
  const groups = new Map<string, number>();
  const functions = new Map<string, { group: string; us: number }>();
  let busy = 0;
  let idle = 0;
  for (const [id, us] of self) {
    const frame = byId.get(id)!.callFrame;
    const group = profilerOwn(id) ? 'idle' : groupOf(frame);
    if (group === 'idle') {
      idle += us;
      continue;
    }
    busy += us;
    groups.set(group, (groups.get(group) ?? 0) + us);
    const where = frame.url
      ? `${frame.url.replace(/^.*\/(node_modules|src)\//, '$1/')}:${frame.lineNumber + 1}`
      : '';
    const key = `${frame.functionName || '(anonymous)'} ${where}`.trim();
    const f = functions.get(key) ?? { group, us: 0 };
    f.us += us;
    functions.set(key, f);
  }
  const pct = (us: number) => `${((us / busy) * 100).toFixed(1)} %`;
  console.log(`busy ${(busy / 1000).toFixed(0)} ms, idle ${(idle / 1000).toFixed(0)} ms`);
  console.log('\nself time by group (share of busy):');
  for (const [g, us] of [...groups].sort((a, b) => b[1] - a[1]))
    console.log(`  ${pct(us).padStart(7)}  ${g}`);
  console.log(`\ntop ${top} functions by self time:`);
  for (const [key, f] of [...functions].sort((a, b) => b[1].us - a[1].us).slice(0, top))
    console.log(`  ${pct(f.us).padStart(7)}  ${key}  [${f.group}]`);
}

main();
