import { costLimitRule } from '@escape.tech/graphql-armor-cost-limit';
import { maxAliasesRule } from '@escape.tech/graphql-armor-max-aliases';
import { maxDepthRule } from '@escape.tech/graphql-armor-max-depth';
import { maxDirectivesRule } from '@escape.tech/graphql-armor-max-directives';
import { MaxTokensParserWLexer } from '@escape.tech/graphql-armor-max-tokens';
import {
  type ArgumentNode,
  type DocumentNode,
  type FieldNode,
  type FragmentDefinitionNode,
  getOperationAST,
  GraphQLError,
  type GraphQLSchema,
  Kind,
  type OperationDefinitionNode,
  Source,
  TypeInfo,
  type ValidationContext,
  type ValidationRule,
  visit,
  visitWithTypeInfo,
} from 'graphql';
import type { Plugin } from 'graphql-yoga';
import { DEFAULT_PAGE, MAX_PAGE } from './connections.js';

/**
 * What one GraphQL document may ask for, checked before anything runs, on every transport.
 * Every example and test operation, and GraphiQL's (graphql-js's) introspection query, fit.
 */
export const LIMITS = {
  /** Lexical tokens: the largest example is ~150, the introspection query ~185. */
  tokens: 1000,
  /** Aliased fields per operation (`__typename` not counted). */
  aliases: 15,
  /** Directives per operation (`@include`, `@skip`, …). */
  directives: 10,
  /**
   * Nested selections, fragments flattened. Introspection counts too: the introspection query
   * reaches 15 (TypeRef's nine `ofType`s); no other type of the schema nests deeper than 7.
   */
  depth: 15,
  /**
   * graphql-armor's cost: each object 2 and each scalar 1, times 1.5 per level of nesting, and a
   * connection's selection times its page width (`first`; a variable counts as its largest value,
   * 250, an absent one as the default page, 20). A page of 250 customers with all their fields
   * costs ~10,000, with each one's latest activity and discount code too ~39,000, the
   * introspection query ~15,500; 250 customers with 5 activities, codes and referees each ~225,000.
   */
  cost: 50_000,
} as const;

/**
 * The 400 a refused document gets: `code` names the limit, the message says what was found. A 400
 * whatever the Accept, as every request refused before it runs (useRequestChecks).
 */
function limitError(code: string, refusal: GraphQLError): GraphQLError {
  // graphql-armor words every refusal as a syntax error ("Syntax Error: Aliases limit of 15 exceeded, found 16.").
  const found = refusal.message.replace(/^Syntax Error: /, '');
  return new GraphQLError(`The document is over a limit and did not run (${code}): ${found} See "Limits" in docs/api.md.`, {
    extensions: { code, http: { status: 400 } },
  });
}

/** graphql-js's parse, stopped (400 `max_tokens`) at the first token over the limit. */
export function parseWithLimits(source: string | Source): DocumentNode {
  const parser = new MaxTokensParserWLexer(typeof source === 'string' ? new Source(source) : source, {
    n: LIMITS.tokens,
    propagateOnRejection: false,
    // Thrown from the lexer: parsing ends at once.
    onReject: [
      (_context, refusal) => {
        throw limitError('max_tokens', refusal);
      },
    ],
  } as ConstructorParameters<typeof MaxTokensParserWLexer>[1]);
  return parser.parseDocument();
}

/** graphql-armor's options for a rule that reports its refusal as `limitError(code)` on the validation context. */
function reporting(context: ValidationContext, code: string) {
  return {
    propagateOnRejection: false,
    onReject: [(_context: unknown, refusal: GraphQLError) => context.reportError(limitError(code, refusal))],
  };
}

const maxAliases: ValidationRule = (context) => maxAliasesRule({ n: LIMITS.aliases, ...reporting(context, 'max_aliases') })(context);
const maxDirectives: ValidationRule = (context) => maxDirectivesRule({ n: LIMITS.directives, ...reporting(context, 'max_directives') })(context);
const maxDepth: ValidationRule = (context) =>
  maxDepthRule({ n: LIMITS.depth, ignoreIntrospection: false, flattenFragments: true, ...reporting(context, 'max_depth') })(context);

/**
 * The document as graphql-armor's cost rule should price it: it multiplies a selection by a
 * literal `first` only, so a `first` given as a variable becomes its largest value and a
 * connection without `first` gets the default page.
 */
function withPageWidths(schema: GraphQLSchema, document: DocumentNode): DocumentNode {
  const typeInfo = new TypeInfo(schema);
  return visit(
    document,
    visitWithTypeInfo(typeInfo, {
      Field(node): FieldNode | undefined {
        if (!typeInfo.getFieldDef()?.args.some((arg) => arg.name === 'first')) return undefined;
        const first = node.arguments?.find((arg) => arg.name.value === 'first');
        if (first?.value.kind === Kind.INT) return undefined;
        const width = first?.value.kind === Kind.VARIABLE ? MAX_PAGE : DEFAULT_PAGE;
        const literal: ArgumentNode = {
          kind: Kind.ARGUMENT,
          name: { kind: Kind.NAME, value: 'first' },
          value: { kind: Kind.INT, value: String(width) },
        };
        return { ...node, arguments: [literal, ...(node.arguments ?? []).filter((arg) => arg.name.value !== 'first')] };
      },
    }),
  );
}

/**
 * graphql-armor's cost of each operation of the document, by operation node, worked out once per
 * document object (the parser caches hand out one object per query text). The limit refuses what
 * costs over LIMITS.cost; the rate limiter charges what runs by its cost (graphqlRateUnits).
 */
const costsByDocument = new WeakMap<DocumentNode, Map<OperationDefinitionNode, number>>();

function operationCosts(schema: GraphQLSchema, document: DocumentNode): Map<OperationDefinitionNode, number> {
  const known = costsByDocument.get(document);
  if (known) return known;
  const priced = withPageWidths(schema, document);
  const fragments = new Map<string, FragmentDefinitionNode>();
  const operations: OperationDefinitionNode[] = [];
  for (const definition of priced.definitions) {
    if (definition.kind === Kind.FRAGMENT_DEFINITION) fragments.set(definition.name.value, definition);
    else if (definition.kind === Kind.OPERATION_DEFINITION) operations.push(definition);
  }
  // The rule reads fragments through the context it is given: the priced ones. Its limit is ours to
  // apply, so it only measures here (onAccept hears every cost).
  const pricedContext = { getFragment: (name: string) => fragments.get(name) } as unknown as ValidationContext;
  let measured = 0;
  const armor = costLimitRule({
    maxCost: Number.POSITIVE_INFINITY,
    ignoreIntrospection: false,
    flattenFragments: true,
    onAccept: [(_context, { n }) => (measured = n)],
  })(pricedContext);
  const originals = document.definitions.filter((d): d is OperationDefinitionNode => d.kind === Kind.OPERATION_DEFINITION);
  const costs = new Map<OperationDefinitionNode, number>();
  // `operations` holds the priced copies in document order, as `originals` the operations themselves.
  operations.forEach((operation, i) => {
    armor.onOperationDefinitionEnter(operation);
    costs.set(originals[i]!, measured);
  });
  costsByDocument.set(document, costs);
  return costs;
}

const maxCost: ValidationRule = (context) => ({
  OperationDefinition(node) {
    const cost = operationCosts(context.getSchema(), context.getDocument()).get(node) ?? 0;
    if (cost > LIMITS.cost) {
      context.reportError(limitError('max_cost', new GraphQLError(`Query Cost limit of ${LIMITS.cost} exceeded, found ${cost}.`)));
    }
  },
});

/**
 * How much of the shop's GraphQL rate limit an operation uses: one unit per COST_PER_RATE_UNIT of
 * cost, at least one. A mutation or a small page costs one, as before; a page of 250 customers
 * with their latest activity and code costs about ninety, so no shop can spend its whole limit
 * on answers that each hold the server for tens of milliseconds while other shops wait.
 */
export const COST_PER_RATE_UNIT = 500;

export function graphqlRateUnits(schema: GraphQLSchema, document: DocumentNode, operationName: string | undefined): number {
  const operation = getOperationAST(document, operationName);
  const cost = operation ? (operationCosts(schema, document).get(operation) ?? 0) : 0;
  return Math.max(1, Math.ceil(cost / COST_PER_RATE_UNIT));
}

/** The validation rules of the limits (tokens are counted while parsing: parseWithLimits). */
export const limitRules: readonly ValidationRule[] = [maxAliases, maxDirectives, maxDepth, maxCost];

/**
 * The limits in Yoga's envelop: its parse (GET, SSE, and whatever the direct path hands
 * over) and its validate, which operationPreparer runs too.
 */
export function useLimits(): Plugin {
  return {
    onParse({ setParseFn }) {
      setParseFn((source) => parseWithLimits(source));
    },
    onValidate({ addValidationRule }) {
      for (const rule of limitRules) addValidationRule(rule);
    },
  };
}
