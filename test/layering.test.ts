// The layering rules of .dependency-cruiser.cjs (run in CI by `npm run depcruise`) catch what they
// are meant to catch: each case below adds one wrong import to a small clean tree and expects
// exactly the rule it breaks.
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { cruise, type IConfiguration } from 'dependency-cruiser';
import extractTSConfig from 'dependency-cruiser/config-utl/extract-ts-config';
import { afterAll, describe, expect, it } from 'vitest';

const require = createRequire(import.meta.url);
const config = require('../.dependency-cruiser.cjs') as IConfiguration;

// A clean tree: two capabilities, each with its face; adapters and a migration that go through faces.
const CLEAN: Record<string, string> = {
  'tsconfig.json': JSON.stringify({
    compilerOptions: {
      target: 'ES2023',
      module: 'NodeNext',
      moduleResolution: 'NodeNext',
      strict: true,
      verbatimModuleSyntax: true,
      noEmit: true,
    },
    include: ['src', 'migrations'],
  }),
  'src/domain/kernel/errors.ts': `export class DomainError extends Error {}\n`,
  'src/domain/kernel/index.ts': `export { DomainError } from './errors.js';\n`,
  'src/domain/ledger/points.ts': [
    `import { DomainError } from '../kernel/index.js';`,
    `export function award(points: number): number {`,
    `  if (points < 0) throw new DomainError('negative');`,
    `  return points;`,
    `}`,
    ``,
  ].join('\n'),
  'src/domain/ledger/index.ts': `export { award } from './points.js';\n`,
  'src/rest/points.ts': [
    `import { DomainError } from '../domain/kernel/index.js';`,
    `export const statusOf = (error: unknown): number => (error instanceof DomainError ? 422 : 500);`,
    ``,
  ].join('\n'),
  'src/graphql/x.ts': [
    `import { award } from '../domain/ledger/index.js';`,
    `export const resolveAward = (points: number): number => award(points);`,
    ``,
  ].join('\n'),
  'migrations/001.ts': `export async function up(): Promise<void> {}\n`,
};

// Prepends `line` to a file of the clean tree.
const withImport = (file: string, line: string): Record<string, string> => ({ [file]: `${line}\n${CLEAN[file]}` });

interface Case {
  mistake: string;
  files: Record<string, string>;
  rule: string;
  from: string;
  to: string;
}

/** A case where one file of the clean tree gets one more import line. */
const added = (mistake: string, rule: string, from: string, line: string, to: string): Case => ({ mistake, rule, from, to, files: withImport(from, line) });

const CASES: Case[] = [
  {
    mistake: 'two ledger files import each other',
    files: {
      ...withImport('src/domain/ledger/points.ts', `import { limit } from './limits.js'; void limit;`),
      'src/domain/ledger/limits.ts': `import { award } from './points.js';\nexport const limit = () => award(1);\n`,
    },
    rule: 'no-circular',
    from: 'src/domain/ledger/points.ts',
    to: 'src/domain/ledger/limits.ts',
  },
  added('the domain imports a REST adapter', 'domain-imports-no-adapter',
    'src/domain/ledger/points.ts', `import { statusOf } from '../../rest/points.js'; void statusOf;`, 'src/rest/points.ts'),
  {
    mistake: 'a capability imports a file inside another capability',
    files: {
      'src/domain/ledger/points.ts': CLEAN['src/domain/ledger/points.ts']!.replace('../kernel/index.js', '../kernel/errors.js'),
    },
    rule: 'capabilities-through-faces',
    from: 'src/domain/ledger/points.ts',
    to: 'src/domain/kernel/errors.ts',
  },
  added('a type-only import inside another capability (type imports count too)', 'capabilities-through-faces',
    'src/domain/ledger/points.ts', `import type { DomainError as E } from '../kernel/errors.js'; export type Failure = E;`, 'src/domain/kernel/errors.ts'),
  added('an adapter imports a file inside a capability', 'outside-through-faces',
    'src/rest/points.ts', `import { award } from '../domain/ledger/points.js'; void award;`, 'src/domain/ledger/points.ts'),
  {
    mistake: "a capability file imports its own capability's face",
    files: { 'src/domain/ledger/bonus.ts': `import { award } from './index.js';\nexport const bonus = () => award(5);\n` },
    rule: 'no-own-face',
    from: 'src/domain/ledger/bonus.ts',
    to: 'src/domain/ledger/index.ts',
  },
  added('REST imports GraphQL', 'faces-not-adapters-internals',
    'src/rest/points.ts', `import { resolveAward } from '../graphql/x.js'; void resolveAward;`, 'src/graphql/x.ts'),
  added('GraphQL imports REST', 'faces-not-adapters-internals',
    'src/graphql/x.ts', `import { statusOf } from '../rest/points.js'; void statusOf;`, 'src/rest/points.ts'),
  added('a migration imports application code', 'migrations-import-nothing-from-src',
    'migrations/001.ts', `import { DomainError } from '../src/domain/kernel/index.js'; void DomainError;`, 'src/domain/kernel/index.ts'),
  added('an import of a file that does not exist', 'not-to-unresolvable',
    'src/rest/points.ts', `import { gone } from './gone.js'; void gone;`, './gone.js'),
];

const tempDirs: string[] = [];
afterAll(() => {
  for (const dir of tempDirs) fs.rmSync(dir, { recursive: true, force: true });
});

interface Violation {
  rule: string;
  from: string;
  to: string;
}

/** Writes the clean tree with `changes` applied to a new temp dir and cruises it with the repo's rules. */
async function violationsOf(changes: Record<string, string>): Promise<Violation[]> {
  // A fresh directory per cruise: dependency-cruiser caches parsed files by path across calls.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'layering-'));
  tempDirs.push(dir);
  for (const [file, text] of Object.entries({ ...CLEAN, ...changes })) {
    fs.mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
    fs.writeFileSync(path.join(dir, file), text);
  }
  const tsConfigFile = path.join(dir, 'tsconfig.json');
  // What the depcruise CLI does with the config file: its options as cruise options, its rules as
  // the rule set, `validate: true` (the API does not check rules without it) and the parsed tsconfig.
  const { output } = await cruise(
    ['src', 'migrations'],
    {
      ...config.options,
      baseDir: dir, // paths are reported relative to it, so the rules' '^src/' match
      tsConfig: { fileName: tsConfigFile },
      ruleSet: { forbidden: config.forbidden },
      validate: true,
    },
    {},
    { tsConfig: extractTSConfig(tsConfigFile) },
  );
  if (typeof output === 'string') throw new Error('expected a cruise result, got a report');
  expect(output.summary.totalCruised).toBeGreaterThanOrEqual(7);
  return output.summary.violations.map((v) => ({ rule: v.rule.name, from: v.from, to: v.to }));
}

describe('layering rules (.dependency-cruiser.cjs)', () => {
  it('every rule is an error, explains itself in its comment, and has a case below', () => {
    const rules = config.forbidden ?? [];
    expect(rules.map((rule) => rule.name).sort()).toEqual([...new Set(CASES.map((c) => c.rule))].sort());
    for (const rule of rules) {
      expect(rule.severity, rule.name).toBe('error');
      expect(rule.comment?.length ?? 0, rule.name).toBeGreaterThan(60);
    }
  });

  it('the clean tree has no violation', async () => {
    expect(await violationsOf({})).toEqual([]);
  });

  it.each(CASES)('$mistake: $rule', async ({ files, rule, from, to }) => {
    const violations = await violationsOf(files);
    expect([...new Set(violations.map((v) => v.rule))]).toEqual([rule]);
    // A circle is reported once, on whichever of its imports dependency-cruiser meets first.
    const edge = (a: string, b: string) => (rule === 'no-circular' ? [a, b].sort() : [a, b]);
    expect(violations.map((v) => edge(v.from, v.to))).toContainEqual(edge(from, to));
  });
});
