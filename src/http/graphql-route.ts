import type { FastifyReply, FastifyRequest } from 'fastify';
import { type ExecutionResult, GraphQLError } from 'graphql';
import { type GraphQLParams, processRegularResult } from 'graphql-yoga';
import { singleResultMediaType } from '../graphql/request-checks.js';
import type { createGraphQLServer } from '../graphql/yoga.js';

type Yoga = ReturnType<typeof createGraphQLServer>;

/**
 * The /graphql handler. Yoga's HTTP layer (a fetch Request rebuilt from the Node request, its
 * request hooks, a fetch Response copied back into Fastify) cost about as much CPU as running the
 * operation. The common request skips it: a JSON POST to /graphql itself (Fastify has parsed the
 * body) for a query or mutation, answered as JSON, without CORS. Its body goes straight to Yoga's
 * params handler (the params checks, parse, validate, context and execute with every envelop
 * plugin) and its result through Yoga's JSON result processor, so the answer is the one Yoga gives.
 * Everything else (GET and GraphiQL, subscriptions, multipart, batches, Origin, other Accept types)
 * goes through Yoga whole.
 */
export function graphqlHandler(yoga: Yoga) {
  // Read once: each read of a property of Yoga's server adapter goes through a Proxy.
  const { fetchAPI, getResultForParams } = yoga;

  const answer = async (reply: FastifyReply, result: ExecutionResult, mediaType: string) => {
    // What Yoga answers for a result without errors or extensions, without building a Response for it.
    if ('data' in result && !result.errors && !result.extensions) {
      reply.header('content-type', `${mediaType}; charset=utf-8`);
      return JSON.stringify(result);
    }
    return copy(reply, await processRegularResult(result, fetchAPI, mediaType));
  };

  return async (request: FastifyRequest, reply: FastifyReply) => {
    const params = request.body as GraphQLParams;
    const mediaType = direct(request) ? singleResultMediaType(request.headers.accept) : null;
    if (mediaType) {
      const fetchRequest = new fetchAPI.Request(`http://${request.headers.host ?? 'localhost'}${request.url}`, {
        method: request.method,
        headers: request.headers as Record<string, string>,
      });
      let result;
      try {
        result = await getResultForParams({ params, request: fetchRequest }, { req: request, reply });
      } catch (err) {
        // Yoga's params checks or the context (401) refused the request before anything ran; Yoga
        // answers that itself, below. Anything else is not run again: the operation may have run.
        if (!(err instanceof GraphQLError)) throw err;
      }
      if (result) return answer(reply, result as ExecutionResult, mediaType);
    }
    return copy(reply, await yoga.handleNodeRequestAndResponse(request, reply, { req: request, reply }));
  };
}

function direct(request: FastifyRequest): boolean {
  const body = request.body as GraphQLParams | null | undefined;
  return (
    request.method === 'POST' &&
    request.url === '/graphql' &&
    request.headers.origin === undefined &&
    typeof body === 'object' &&
    body !== null &&
    !Array.isArray(body) &&
    // A subscription's stream is answered by Yoga's rules for streams (SSE, or 406). Only a document
    // with this keyword can hold one; a false alarm (a field or string with the word) just takes Yoga's path.
    !(typeof body.query === 'string' && body.query.includes('subscription'))
  );
}

/** Yoga's status and headers onto the reply; streams (SSE) pass through, the rest is buffered so idempotency can store it. */
async function copy(reply: FastifyReply, response: Response) {
  response.headers.forEach((value, key) => reply.header(key, value));
  reply.code(response.status);
  const streaming = response.headers.get('content-type')?.includes('text/event-stream');
  return streaming ? response.body : response.text();
}
