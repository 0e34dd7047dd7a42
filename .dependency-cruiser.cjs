// The project's layering rules, checked in CI by `npm run depcruise` (dependency-cruiser).
// test/layering.test.ts proves each rule reports the mistake it is meant to catch.
//
// Group matching: a `(...)` group in `from.path` is available as `$1` in `to.path` and
// `to.pathNot`, so a rule can say "another capability than the importing one's own".
// Arrays of patterns are joined with `|` into one regular expression.

/** Every rule is an error: CI fails, naming it, and prints its comment. */
const rule = (name, comment, from, to) => ({ name, severity: 'error', comment, from, to });

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    rule(
      'no-circular',
      'This import closes a circle of imports: following the imports from this module leads back to it. ' +
      'Modules in a circle load in an order that depends on who is imported first, and cannot be moved ' +
      'or understood one at a time. Break the circle: move what both sides need into a third module ' +
      'that imports neither, or let the lower-level module take what it needs as a parameter.',
      { path: '^src/' },
      { circular: true },
    ),
    rule(
      'domain-imports-no-adapter',
      'The domain (src/domain/) imports an adapter or the application shell (REST, GraphQL, HTTP, ' +
      'requests, events, webhooks, mail, rate limits, CLI, or src/app|main|worker|config|logger|shutdown|demo.ts). ' +
      'The domain must work without them; it may import only src/db/, other domain capabilities ' +
      '(through their index.ts), npm packages and Node built-ins. Pass what the domain needs in as a ' +
      'parameter (a value, a callback, an interface declared in the domain), or move the code that ' +
      'needs the adapter out to the adapter.',
      { path: '^src/domain/' },
      {
        path: [
          '^src/(rest|graphql|http|requests|events|webhooks|mail|rate-limit|cli)/',
          '^src/(app|main|worker|config|logger|shutdown|demo)\\.ts$',
        ],
      },
    ),
    rule(
      'capabilities-through-faces',
      "A domain capability imports a file inside another capability. Each capability's face, " +
      'src/domain/<capability>/index.ts, is the only way in from the other capabilities. Import from ' +
      "'../<capability>/index.js' instead; if what you need is not exported there, export it from " +
      'that index.ts (or ask whether it belongs to your capability).',
      { path: '^src/domain/([^/]+)/' },
      { path: '^src/domain/[^/]+/', pathNot: ['^src/domain/$1/', '^src/domain/[^/]+/index\\.ts$'] },
    ),
    rule(
      'outside-through-faces',
      'Code outside the domain imports a file inside a domain capability. Outside src/domain/, ' +
      "import a capability only through its face, 'src/domain/<capability>/index.ts' " +
      "(e.g. '../domain/ledger/index.js'); if what you need is not exported there, export it from " +
      'that index.ts.',
      { path: '^src/', pathNot: '^src/domain/' },
      { path: '^src/domain/', pathNot: '^src/domain/[^/]+/index\\.ts$' },
    ),
    rule(
      'no-own-face',
      "A module inside a capability imports its own capability's face (index.ts). The face " +
      're-exports the modules of the capability, so this makes a circle through the barrel. Import ' +
      "the file that declares what you need directly (e.g. './points.js').",
      { path: '^src/domain/([^/]+)/(?!index\\.ts$)' },
      { path: '^src/domain/$1/index\\.ts$' },
    ),
    rule(
      'faces-not-adapters-internals',
      'One API adapter imports another adapter: src/rest/ may not import src/graphql/ or src/http/, ' +
      'and src/graphql/ may not import src/rest/ or src/http/. Both adapters are faces over the ' +
      'domain side by side. Move what both need into the domain (through its index.ts) or into a ' +
      'shared module outside both adapters.',
      { path: '^src/(rest|graphql)/' },
      { path: '^src/(rest|graphql|http)/', pathNot: '^src/$1/' },
    ),
    rule(
      'migrations-import-nothing-from-src',
      'A migration imports application code from src/. A migration must keep doing exactly what it ' +
      'did when it was written, whatever src/ becomes later. Copy the constant, type or SQL it ' +
      'needs into the migration itself.',
      { path: '^migrations/' },
      { path: '^src/' },
    ),
    rule(
      'not-to-unresolvable',
      'This import cannot be resolved to a file or a package. Check the path (relative imports ' +
      "end in '.js', even for .ts files) or add the missing package to package.json.",
      { path: '^src/' },
      { couldNotResolve: true },
    ),
  ],
  options: {
    // Type-only imports (`import type`) count: they couple modules just the same.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    doNotFollow: { path: 'node_modules' },
    // Resolve npm packages the way Node does, through their package.json `exports` (dependency-cruiser
    // ignores `exports` by default, so subpath imports such as 'csv-parse/sync' would be unresolvable).
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
      mainFields: ['module', 'main', 'types', 'typings'],
    },
  },
};
