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
 * The 400 a refused document gets: `code` names the limit, the message says what was found.
 * Not `spec`: the GraphQL-over-HTTP spec answers a document that does not validate 200 when the
 * client takes application/json, but a refusal is a 400 whatever the client asked for.
 */
function limitError(code: string, refusal: GraphQLError): GraphQLError {
  // graphql-armor words every refusal as a syntax error ("Syntax Error: Aliases limit of 15 exceeded, found 16.").
  const found = refusal.message.replace(/^Syntax Error: /, '');
  return new GraphQLError(`The document is over a limit and did not run (${code}): ${found} See "Limits" in docs/api.md.`, {
    extensions: {
      code,
      // Yoga's parse hook sets `spec` on every parse error (max_tokens is one); it stays false.
      http: {
        status: 400,
        get spec() {
          return false;
        },
        set spec(_ignored: boolean) {},
      },
    },
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

const maxCost: ValidationRule = (context) => {
  const priced = withPageWidths(context.getSchema(), context.getDocument());
  const fragments = new Map<string, FragmentDefinitionNode>();
  const operations: OperationDefinitionNode[] = [];
  for (const definition of priced.definitions) {
    if (definition.kind === Kind.FRAGMENT_DEFINITION) fragments.set(definition.name.value, definition);
    else if (definition.kind === Kind.OPERATION_DEFINITION) operations.push(definition);
  }
  // The rule reads fragments through the context it is given: the priced ones.
  const pricedContext = { getFragment: (name: string) => fragments.get(name) } as unknown as ValidationContext;
  const armor = costLimitRule({ maxCost: LIMITS.cost, ignoreIntrospection: false, flattenFragments: true, ...reporting(context, 'max_cost') })(pricedContext);
  let next = 0;
  return {
    // Operations are visited in document order, as `operations` holds their priced copies.
    OperationDefinition: () => {
      armor.onOperationDefinitionEnter(operations[next++]!);
    },
  };
};

/** The validation rules of the limits (tokens are counted while parsing: parseWithLimits). */
export const limitRules: readonly ValidationRule[] = [maxAliases, maxDirectives, maxDepth, maxCost];

/**
 * The limits in Yoga's envelop: its parse (GET, SSE, GraphiQL, and whatever the direct path hands
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
