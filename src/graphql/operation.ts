import { type DocumentNode, type ExecutionArgs, GraphQLError } from 'graphql';
import type { YogaServerInstance } from 'graphql-yoga';
import { LRUCache } from 'lru-cache';
import type { GraphQLContext, ServerContext } from './builder.js';
import { parseWithLimits } from './limits.js';

type Yoga = YogaServerInstance<ServerContext, GraphQLContext>;
type Enveloped = ReturnType<Yoga['getEnveloped']>;

/** A request's GraphQL parameters, once checked to be of the right types. */
export type OperationParams = { query: string; variables?: Record<string, unknown> | null; operationName?: string | null };

/** An operation ready to run: its arguments and the enveloped execute and subscribe that run it. */
export type PreparedOperation = {
  args: ExecutionArgs;
  execute: Enveloped['execute'];
  subscribe: Enveloped['subscribe'];
};

/**
 * Prepares operations as Yoga does (its envelop: validation, context factory, rate limits, error
 * masking), for the callers that run them without Yoga's HTTP handling: graphql-ws and the direct
 * /graphql path. A query text is parsed and validated once: the schema never changes, and Yoga's
 * parse and validate hooks cost more per request than the rest of the envelop together.
 * Resolves to the parse or validation errors instead when there are any; throws what the context
 * factory throws (401 without a shop).
 */
export function operationPreparer(yoga: Yoga) {
  // As many as Yoga's own parser cache keeps.
  const documents = new LRUCache<string, DocumentNode>({ max: 1024 });
  return async (
    initialContext: ServerContext,
    params: OperationParams,
  ): Promise<PreparedOperation | { errors: readonly GraphQLError[] }> => {
    // One shape for every request's context (a spread would not give one): the plugins that extend it stay fast.
    const enveloped = yoga.getEnveloped({ req: initialContext.req, reply: initialContext.reply, params } as Parameters<Yoga['getEnveloped']>[0]);
    let document = documents.get(params.query);
    if (!document) {
      const checked = parseAndValidate(enveloped, params.query);
      if ('errors' in checked) return checked;
      document = checked.document;
      documents.set(params.query, document);
    }
    const contextValue = await enveloped.contextFactory();
    return {
      args: {
        schema: enveloped.schema,
        document,
        operationName: params.operationName,
        variableValues: params.variables,
        contextValue,
      },
      execute: enveloped.execute,
      subscribe: enveloped.subscribe,
    };
  };
}

function parseAndValidate(enveloped: Enveloped, query: string): { document: DocumentNode } | { errors: readonly GraphQLError[] } {
  let document: DocumentNode;
  try {
    // graphql-js's parse with the token limit, as Yoga's engine with useLimits, but not Yoga's
    // parse hooks: their parser cache keeps each syntax error, and the hook that marks it 400
    // needs the HTTP request; a cached error made here would take the 400 from Yoga's own later
    // answers to the same text. The other limits are validation rules: enveloped.validate runs them.
    document = parseWithLimits(query);
  } catch (err) {
    if (err instanceof GraphQLError) return { errors: [err] };
    throw err;
  }
  const errors = enveloped.validate(enveloped.schema, document);
  return errors.length ? { errors } : { document };
}
