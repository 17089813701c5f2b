// echomq is an ES module package. This is what `require('echomq')` finds (package.json's
// "require" condition): an error that says so and how to load it from CommonJS, instead of
// Node's ERR_PACKAGE_PATH_NOT_EXPORTED.
throw Object.assign(
  new Error(
    'echomq is an ES module (ESM only) and cannot be require()d: in CommonJS load it with `const { EchoMQ } = await import(\'echomq\')` (TypeScript compiling to CommonJS: set "module": "node16" so import() is kept); see the README, Install',
  ),
  { code: 'ERR_REQUIRE_ESM' },
);
