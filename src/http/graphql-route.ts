import type { FastifyReply, FastifyRequest } from 'fastify';
import { type ExecutionResult, getOperationAST } from 'graphql';
import { processRegularResult } from 'graphql-yoga';
import type { DB } from '../db/database.js';
import { type OperationParams, operationPreparer } from '../graphql/operation.js';
import { singleResultMediaType } from '../graphql/request-checks.js';
import { type createGraphQLServer, unauthenticatedError } from '../graphql/yoga.js';
import { closeIfBodyUnread, resolveShop } from '../requests/auth.js';
import type { StaffDoorOutcome } from './staff-session.js';

type Yoga = ReturnType<typeof createGraphQLServer>;

/**
 * The handler of /graphql and /storefront/graphql. Yoga's HTTP layer (a fetch Request rebuilt from the Node request, its
 * request and params hooks, a fetch Response copied back into Fastify) cost more CPU than running
 * the operation. The common request skips it: a JSON POST to /graphql itself (Fastify has parsed
 * the body) with plain parameters, for a query or mutation, answered as JSON, without CORS. It
 * runs through Yoga's envelop (operationPreparer: context, rate limits, error masking, as over
 * graphql-ws) and its result goes through Yoga's JSON result processor, so the answer is the one
 * Yoga gives. Everything else (GET, subscriptions, multipart, batches, Origin, other
 * Accept types, parameters Yoga refuses, documents that do not parse or validate) goes through
 * Yoga whole, which answers it.
 */
export function graphqlHandler(yoga: Yoga) {
  // Read once: each read of a property of Yoga's server adapter goes through a Proxy.
  const { fetchAPI } = yoga;
  const prepare = operationPreparer(yoga);
  const endpoint = yoga.graphqlEndpoint;

  const answer = async (reply: FastifyReply, result: ExecutionResult, mediaType: string) => {
    // What Yoga answers for a result without errors or extensions, without building a Response for it.
    if ('data' in result && !result.errors && !result.extensions) {
      reply.header('content-type', `${mediaType}; charset=utf-8`);
      return JSON.stringify(result);
    }
    return copy(reply, await processRegularResult(result, fetchAPI, mediaType));
  };

  return async (request: FastifyRequest, reply: FastifyReply) => {
    const params = direct(request, endpoint);
    const mediaType = params && singleResultMediaType(request.headers.accept);
    if (params && mediaType) {
      // Authenticated: requireShopForGraphQL (the storefront's door) answered a POST without a key (token).
      const operation = await prepare({ req: request, reply }, params);
      const ready = 'args' in operation ? operation : undefined;
      // A subscription's stream (SSE, or 406) and a document without that operation take Yoga's path.
      const kind = ready && getOperationAST(ready.args.document, params.operationName)?.operation;
      if (ready && (kind === 'query' || kind === 'mutation')) {
        // Not retried through Yoga if this throws: the operation may have run.
        return answer(reply, (await ready.execute(ready.args)) as ExecutionResult, mediaType);
      }
    }
    return copy(reply, await yoga.handleNodeRequestAndResponse(request, reply, { req: request, reply }));
  };
}

/**
 * onRequest hook of /graphql: a POST without a valid key is answered 401 here, before its body is
 * read, as the GraphQL response Yoga gives it (`extensions.code` unauthorized, in the single-result
 * type Accept asks for). Without an Authorization header, a staff session's cookie may authenticate
 * instead (staffDoor: 401 for an ended session, 403 without its CSRF token). GET (the GraphiQL page
 * needs no key; an operation without one is refused by the context) and CORS preflights carry no
 * body and go on to Yoga.
 */
export function requireShopForGraphQL(db: DB, staffDoor: (request: FastifyRequest) => Promise<StaffDoorOutcome>) {
  const resolve = resolveShop(db);
  const refuse = (request: FastifyRequest, reply: FastifyReply, status: number, code: string, message: string, headers: Record<string, string>) => {
    closeIfBodyUnread(request, reply);
    const mediaType = singleResultMediaType(request.headers.accept) ?? 'application/json';
    const body = JSON.stringify({ errors: [{ message, extensions: { code } }] });
    return reply.code(status).headers(headers).header('content-type', `${mediaType}; charset=utf-8`).send(body);
  };
  return async (request: FastifyRequest, reply: FastifyReply) => {
    await resolve(request);
    if (!request.shop && request.headers.authorization === undefined) {
      const staff = await staffDoor(request);
      if (staff.refused) return refuse(request, reply, staff.status, staff.code, staff.message, {});
    }
    if (request.shop || request.method !== 'POST') return;
    return refuse(request, reply, 401, 'unauthorized', unauthenticatedError().message, { 'www-authenticate': 'Bearer' });
  };
}

/** The parameters of a request the direct path takes: a JSON POST to the endpoint itself without Origin, with plain parameters. */
function direct(request: FastifyRequest, endpoint: string): OperationParams | null {
  if (request.method !== 'POST' || request.url !== endpoint || request.headers.origin !== undefined) return null;
  return plainParams(request.body);
}

const isObject = (value: unknown) => typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * `body` when it holds only parameters of the types Yoga accepts (a query string; variables and
 * extensions objects, an operation name; each may be null or absent), else null: Yoga then
 * answers with its own 400.
 */
function plainParams(body: unknown): OperationParams | null {
  if (!isObject(body)) return null;
  const { query, variables, operationName, extensions, ...rest } = body as Record<string, unknown>;
  if (typeof query !== 'string' || Object.keys(rest).length > 0) return null;
  if (variables != null && !isObject(variables)) return null;
  if (extensions != null && !isObject(extensions)) return null;
  if (operationName != null && typeof operationName !== 'string') return null;
  return body as OperationParams;
}

/** Yoga's status and headers onto the reply; streams (SSE) pass through, the rest is buffered so idempotency can store it. */
async function copy(reply: FastifyReply, response: Response) {
  response.headers.forEach((value, key) => reply.header(key, value));
  reply.code(response.status);
  const streaming = response.headers.get('content-type')?.includes('text/event-stream');
  return streaming ? response.body : response.text();
}
