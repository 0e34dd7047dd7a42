import { type Client, createClient } from 'graphql-ws';
import WebSocket from 'ws';

/** A graphql-ws client for a test server; `apiKey` (or a customer's token) goes in connectionParams.Authorization. */
export function wsClient(baseUrl: string, apiKey: string, options: { onClose?: (code: number) => void; path?: string } = {}): Client {
  return createClient({
    url: `${baseUrl.replace(/^http/, 'ws')}${options.path ?? '/graphql'}`,
    webSocketImpl: WebSocket,
    connectionParams: { Authorization: `Bearer ${apiKey}` },
    retryAttempts: 0,
    shouldRetry: () => false,
    on: { closed: (event) => options.onClose?.((event as { code: number }).code) },
  });
}

export type Collected<T = any> = {
  results: Array<{ data?: T; errors?: Array<{ message: string; extensions?: Record<string, unknown> }> }>;
  /** Errors the server sent instead of a stream (an `error` message), or a socket failure. */
  failure?: unknown;
  completed: boolean;
  stop(): void;
};

/** Subscribes and records every result until stopped. */
export function collect<T = any>(client: Client, query: string, variables?: Record<string, unknown>): Collected<T> {
  const collected: Collected<T> = { results: [], completed: false, stop: () => {} };
  collected.stop = client.subscribe<T>(
    { query, variables },
    {
      next: (result) => void collected.results.push(result as Collected<T>['results'][number]),
      error: (err) => {
        collected.failure = err;
        collected.completed = true;
      },
      complete: () => {
        collected.completed = true;
      },
    },
  );
  return collected;
}

/** A GraphQL-over-SSE subscription read straight off a fetch stream, as a browser would. */
export type SseStream = {
  status: number;
  contentType: string;
  events: Array<{ event: string; data: any }>;
  /** Resolves when the server ends the stream. */
  ended: Promise<void>;
  close(): void;
};

export async function sse(
  baseUrl: string,
  apiKey: string,
  query: string,
  variables?: Record<string, unknown>,
  headers: Record<string, string> = {},
  path = '/graphql',
): Promise<SseStream> {
  const abort = new AbortController();
  const res = await fetch(`${baseUrl}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'text/event-stream', authorization: `Bearer ${apiKey}`, ...headers },
    body: JSON.stringify({ query, variables }),
    signal: abort.signal,
  });
  const events: SseStream['events'] = [];
  const ended = (async () => {
    if (!res.body) return;
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true });
        let end: number;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          let event = 'message';
          const data: string[] = [];
          for (const line of block.split('\n')) {
            if (line.startsWith('event:')) event = line.slice(6).trim();
            else if (line.startsWith('data:')) data.push(line.slice(5).trimStart());
          }
          if (data.length) events.push({ event, data: data.join('\n') ? JSON.parse(data.join('\n')) : null });
        }
      }
    } catch (err) {
      if (!abort.signal.aborted) throw err;
    }
  })();
  return {
    status: res.status,
    contentType: res.headers.get('content-type') ?? '',
    events,
    ended,
    close: () => abort.abort(),
  };
}

/** Polls until `check` holds (or throws after `ms`). */
export async function until(check: () => boolean | Promise<boolean>, ms = 10_000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
