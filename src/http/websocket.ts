import type { IncomingMessage, Server } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { GraphQLError } from 'graphql';
import { useServer } from 'graphql-ws/use/ws';
import type { YogaServerInstance } from 'graphql-yoga';
import { type WebSocket, WebSocketServer } from 'ws';
import type { Shop } from '../domain/shops/index.js';
import type { EventBus } from '../events/bus.js';
import type { GraphQLContext, ServerContext } from '../graphql/builder.js';
import { operationPreparer, type PreparedOperation } from '../graphql/operation.js';

/** How often idle sockets are pinged; a peer that misses a pong is dropped. */
const KEEP_ALIVE_MS = 12_000;
/** How long clients get to answer the close frame on shutdown before their sockets are cut. */
const CLOSE_GRACE_MS = 1_000;
/** The largest message a client may send, as the HTTP body limit (ws would take 100 MiB). */
const MAX_MESSAGE_BYTES = 1024 * 1024;
/** A socket whose key is revoked or no longer valid (graphql-ws's own code for a refused connection). */
const FORBIDDEN = 4403;
/** A shop over WEBSOCKETS_PER_SHOP: WebSocket's Policy Violation. */
const POLICY_VIOLATION = 1008;

type RootValue = Pick<PreparedOperation, 'execute' | 'subscribe'>;

/** One GraphQL face served over graphql-ws on its Yoga's endpoint. */
export type WebSocketFace = {
  yoga: YogaServerInstance<ServerContext, GraphQLContext>;
  /**
   * Who a connection speaks for, from `connectionParams.Authorization` and the upgrade request;
   * null refuses it (4403). Asked again for every operation, so a revoked credential stops there.
   */
  authenticate(authorization: unknown, request: IncomingMessage): Promise<ServerContext['req'] | null>;
  /** Takes the connection's socket slot (null: at the limit); the release is called once. */
  acquireSlot(identity: ServerContext['req'] & { shop: Shop }): Promise<(() => void) | null>;
};

/**
 * graphql-ws (the graphql-transport-ws protocol) on the HTTP server's port, at each face's path
 * (/graphql, /storefront/graphql). The credential comes in `connectionParams.Authorization`
 * ("Bearer …"); a bad one closes the socket with 4403, and so does the revocation of the API key
 * it was opened with (on any instance). A shop holds at most WEBSOCKETS_PER_SHOP admin sockets,
 * and its storefront STOREFRONT_SUBSCRIPTIONS_PER_SHOP (each customer
 * STOREFRONT_SUBSCRIPTIONS_PER_CUSTOMER); one more is closed with 1008. Every operation then runs through its Yoga's
 * envelop, so context, rate limits, error masking and validation are the same as over HTTP.
 * On /graphql a person's page may open one with their session cookie instead of a key (no
 * Authorization; src/http/staff-session.ts staffSocketDoor): it is held by the session, and
 * closed with 4403 when revocation-watch.ts finds the session ended (on any instance).
 * Returns the shutdown (closes every socket), the ids of the keys and of the staff sessions sockets
 * are open with, and the close of an ended session's sockets.
 */
export function attachGraphQLWebSocket(
  server: Server,
  faces: WebSocketFace[],
  bus: Pick<EventBus, 'onRevoked' | 'wasRevoked'>,
): { close(): Promise<void>; keysInUse(): Iterable<string>; sessionsInUse(): Iterable<string>; closeSessions(ids: Iterable<string>): void } {
  let closing = false;
  // The open admin sockets by the API key, or the staff session, they authenticated with.
  const byKey = socketsBy();
  const bySession = socketsBy();
  const stopHearingRevocations = bus.onRevoked((revocation) => {
    if ('apiKey' in revocation) byKey.close(revocation.apiKey.id, 'Forbidden: the API key was revoked');
  });
  const served = new Map(faces.map((face) => [face.yoga.graphqlEndpoint, serve(face)]));

  server.on('upgrade', (request, socket, head) => {
    // Plain string work: new URL() throws on some request targets, and this runs outside any try.
    const path = (request.url ?? '/').split('?')[0]!.replace(/\/$/, '');
    const wss = served.get(path)?.wss;
    if (closing || !wss) {
      socket.on('error', () => {}); // a peer gone mid-refusal is no error of ours
      socket.end(closing ? 'HTTP/1.1 503 Service Unavailable\r\n\r\n' : 'HTTP/1.1 404 Not Found\r\n\r\n');
      return;
    }
    wss.handleUpgrade(request, socket, head, (ws) => wss.emit('connection', ws, request));
  });

  function serve(face: WebSocketFace) {
    const wss = new WebSocketServer({ noServer: true, maxPayload: MAX_MESSAGE_BYTES });
    const prepare = operationPreparer(face.yoga);
    const disposable = useServer<Record<string, unknown>, { authorization: unknown }>(
      {
        // Returning false closes the socket with 4403 Forbidden (a no-op when it is already closing).
        onConnect: async (ctx) => {
          const params = ctx.connectionParams ?? {};
          ctx.extra.authorization = params.Authorization ?? params.authorization;
          const identity = await face.authenticate(ctx.extra.authorization, ctx.extra.request);
          if (!identity?.shop) return false;
          const socket = ctx.extra.socket;
          const release = await face.acquireSlot({ ...identity, shop: identity.shop });
          if (!release) {
            socket.close(POLICY_VIOLATION, 'socket_limit_reached: the limit of open graphql-ws sockets is reached');
            return false;
          }
          const keyId = identity.apiKey?.id;
          const sessionId = identity.staff?.sessionId;
          const forgetHolder = keyId ? byKey.add(keyId, socket) : sessionId ? bySession.add(sessionId, socket) : () => {};
          const forget = () => {
            release();
            forgetHolder();
          };
          // Gone, or its key revoked, while its slot was being taken: nothing would close it later.
          if (socket.readyState !== socket.OPEN || (keyId && bus.wasRevoked(keyId))) {
            forget();
            return false;
          }
          socket.once('close', forget);
          return true;
        },
        onSubscribe: async (ctx, _id, payload) => {
          // Checked again for every operation (an API key cached for 2 s), so a revoked credential
          // stops opening new ones on a socket that was accepted earlier.
          const identity = await face.authenticate(ctx.extra.authorization, ctx.extra.request);
          if (!identity?.shop) {
            ctx.extra.socket.close(FORBIDDEN, 'Forbidden');
            return [new GraphQLError('the credential is no longer valid')];
          }
          const operation = await prepare({ req: { ...identity, overWebSocket: true } }, payload);
          if ('errors' in operation) return operation.errors;
          const rootValue: RootValue = { execute: operation.execute, subscribe: operation.subscribe };
          return { ...operation.args, rootValue };
        },
        // The enveloped execute/subscribe of this operation, carried in from onSubscribe.
        execute: (args) => (args.rootValue as RootValue).execute(args),
        subscribe: (args) => (args.rootValue as RootValue).subscribe(args),
      },
      wss,
      KEEP_ALIVE_MS,
    );
    return { wss, disposable };
  }

  async function close(): Promise<void> {
    closing = true;
    stopHearingRevocations();
    // Completes every operation and sends 1001 Going Away; resolves once every socket is gone,
    // so whoever does not answer the close frame in time is cut.
    const disposed = [...served.values()].map(({ disposable }) => disposable.dispose());
    const clients = () => [...served.values()].flatMap(({ wss }) => [...wss.clients]);
    for (let waited = 0; clients().length > 0 && waited < CLOSE_GRACE_MS; waited += 20) await sleep(20);
    for (const socket of clients()) socket.terminate();
    await Promise.all(disposed);
  }
  return {
    close,
    keysInUse: () => byKey.ids(),
    sessionsInUse: () => bySession.ids(),
    closeSessions: (ids) => {
      for (const id of ids) bySession.close(id, 'Forbidden: the staff session ended');
    },
  };
}

/** Open sockets by who holds them (a key's id, a session's id): each socket added is forgotten once by the function add returns. */
function socketsBy() {
  const held = new Map<string, Set<WebSocket>>();
  return {
    add(id: string, socket: WebSocket): () => void {
      const sockets = held.get(id) ?? new Set<WebSocket>();
      held.set(id, sockets.add(socket));
      return () => {
        sockets.delete(socket);
        if (sockets.size === 0 && held.get(id) === sockets) held.delete(id);
      };
    },
    close(id: string, reason: string): void {
      for (const socket of held.get(id) ?? []) socket.close(FORBIDDEN, reason);
    },
    ids: () => held.keys(),
  };
}
