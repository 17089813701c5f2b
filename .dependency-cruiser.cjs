// The floors of src/ (docs/reference/development.md): each room imports only downward, and no
// import circle comes back. Type-only imports count (tsPreCompilationDeps): the circles this guards
// against were type-only back edges. Run by `npm run lint` (`npm run deps` alone).
//
//   core < wire < job rooms (jobs, flows, lanes, events, recurring)
//        < consumer, upkeep, read model (inspect) < facade (queue) < operations
const CORE = '^src/core/';
const WIRE = '^src/wire/';
/** The rooms a job's verbs live in: they take a QueueWire and run scripts through it. */
const JOB_ROOMS = '^src/(jobs|flows|lanes|events|recurring)/';
const RUNTIME = '^src/(jobs|flows|lanes|events|recurring|consumer|upkeep)/';
const FACADE = '^src/queue/';
const READ_MODEL = '^src/inspect/';
const OPERATIONS = '^src/(cli/|dashboard/|telemetry/|testing\\.ts$)';
const INDEX = '^src/index\\.ts$';
/** The runtime rooms that run scripts: the read model imports none of them but for types. */
const WRITING_ROOMS = '^src/(jobs|flows|lanes|upkeep|recurring)/';

/** A room may not import `to`: the rule's name says which floor and why. */
const floor = (name, from, to, comment) => ({
  name,
  comment,
  severity: 'error',
  from: { path: from },
  to: { path: to },
});

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment:
        'An import circle (type-only imports included): break it by moving the shared piece down a floor.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    floor('core-is-pure', CORE, '^src/(?!core/)', 'core/ imports nothing else in src (node built-ins only).'),
    floor(
      'wire-over-core-only',
      WIRE,
      '^src/(?!core/|wire/)',
      'The wire knows keys, ARGV and replies; it imports core/ and ioredis only.',
    ),
    floor(
      'job-rooms-below-the-consumer',
      JOB_ROOMS,
      '^src/(consumer|upkeep)/',
      'The consumer and the upkeep verbs use the job rooms (control, logs, hand-offs, rates), not the other way.',
    ),
    floor(
      'runtime-below-facade',
      RUNTIME,
      `${FACADE}|${READ_MODEL}|${OPERATIONS}|${INDEX}`,
      'The runtime rooms take a QueueWire, never the Queue/EchoMQ facade or anything above it.',
    ),
    floor(
      'facade-below-operations',
      FACADE,
      `${READ_MODEL}|${OPERATIONS}|${INDEX}`,
      'The facade composes the rooms below; the Inspector is an entry of its own, beside it.',
    ),
    floor(
      'read-model-cannot-write',
      READ_MODEL,
      `^src/wire/verbs/|^src/consumer/|${FACADE}|${OPERATIONS}|${INDEX}`,
      'The Inspector reads (wire/reads, wire/read-model) through an InspectedQueues shape; it cannot call a verb, start a consumer or reach the facade by import.',
    ),
    {
      ...floor(
        'read-model-sees-writing-rooms-as-types',
        READ_MODEL,
        WRITING_ROOMS,
        "The Inspector names the recurrence rooms' list types, never their code.",
      ),
      to: { path: WRITING_ROOMS, dependencyTypesNot: ['type-only'] },
    },
    floor(
      'telemetry-below-cli-and-dashboard',
      '^src/telemetry/',
      '^src/(cli|dashboard)/',
      'The dashboard may use telemetry, not the other way.',
    ),
    floor(
      'dashboard-below-cli',
      '^src/dashboard/',
      '^src/cli/',
      'The CLI serves the dashboard, not the other way.',
    ),
    floor(
      'testing-apart',
      '^src/(?!testing\\.ts$)',
      '^src/testing\\.ts$',
      'echomq/testing is a subpath of its own: nothing in src imports it.',
    ),
    floor(
      'index-is-the-top',
      '^src/(?!index\\.ts$)',
      INDEX,
      'src/index.ts lists the public exports; nothing imports it.',
    ),
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    includeOnly: '^src/',
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { extensions: ['.ts', '.js'] },
  },
};
