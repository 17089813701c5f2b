// The floors of src/ (README "Development"): each room imports only downward, and no import
// circle comes back. Type-only imports count (tsPreCompilationDeps): the circles this guards
// against were type-only back edges. Run by `npm run lint` (`npm run deps` alone).
//
//   core < wire < runtime rooms < facade < read model < operations
const CORE = '^src/core/';
const WIRE = '^src/wire/';
const RUNTIME =
  '^src/(consumer/|events/|recurring/|lanes\\.ts$|flows\\.ts$|control\\.ts$|logs\\.ts$|sweep\\.ts$)';
const FACADE = '^src/(echomq\\.ts$|queue\\.ts$|queue/)';
const READ_MODEL = '^src/(inspect\\.ts$|inspect/)';
const OPERATIONS = '^src/(cli/|dashboard/|telemetry/|testing\\.ts$)';
const INDEX = '^src/index\\.ts$';
/** The runtime rooms that run scripts: the read model imports none of them. */
const WRITING_ROOMS =
  '^src/(flows|flow-handoff|control|sweep|retry|settings|admit|logs|lanes)\\.ts$|^src/recurring/';

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
      'runtime-below-facade',
      RUNTIME,
      `${FACADE}|${READ_MODEL}|${OPERATIONS}|${INDEX}`,
      'The runtime rooms take a QueueWire, never the Queue/EchoMQ facade or anything above it.',
    ),
    floor(
      'facade-below-read-model',
      FACADE,
      `${READ_MODEL}|${OPERATIONS}|${INDEX}`,
      'The facade composes the rooms below; nothing it imports is above it.',
    ),
    floor(
      'read-model-cannot-write',
      READ_MODEL,
      `^src/wire/verbs/|^src/consumer/|${WRITING_ROOMS}|${OPERATIONS}|${INDEX}`,
      'The Inspector reads (wire/reads, wire/read-model); it cannot call a verb or start a consumer by import.',
    ),
    {
      ...floor(
        'read-model-sees-the-facade-as-types',
        READ_MODEL,
        FACADE,
        "The Inspector takes EchoMQ as a type (it reaches a queue's wire through it), never the facade's code.",
      ),
      to: { path: FACADE, dependencyTypesNot: ['type-only'] },
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
