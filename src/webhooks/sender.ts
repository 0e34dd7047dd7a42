import { Agent, request } from 'undici';
import type { UrlPolicy } from './url-policy.js';

/** What one HTTP attempt came to, as the attempt record keeps it. */
export type AttemptOutcome = {
  /** 2xx: the only success. */
  ok: boolean;
  statusCode: number | null;
  durationMs: number;
  error: string | null;
  /** The first 2 KiB of the response body. */
  responseBody: string | null;
  /** The Retry-After header of a 429 or 503. */
  retryAfter: string | undefined;
  /** The attempt never left (refused by the SSRF policy): nothing was sent. */
  blocked: boolean;
  /** Cut short by the caller's signal (a stopping worker): not an attempt to record. */
  aborted: boolean;
};

export type Sender = {
  send(attempt: { url: string; headers: Record<string, string>; body: string }, signal?: AbortSignal): Promise<AttemptOutcome>;
  close(): Promise<void>;
};

export const RESPONSE_EXCERPT_BYTES = 2048;
/** Past the excerpt, a response body is read up to this much so its connection can be reused, then cut. */
const MAX_DRAIN_BYTES = 64 * 1024;

/**
 * Sends deliveries with undici: one Agent per process (keep-alive connections per origin), the
 * SSRF policy's `lookup` on every new connection (so the address actually dialled is checked, DNS
 * rebinding included), a timeout over the whole attempt, and no redirects followed (undici
 * follows none unless told to). The URL itself is checked before each attempt too: Node never
 * calls `lookup` for an IP-literal host.
 */
export function createSender(options: { urlPolicy: Pick<UrlPolicy, 'checkCallbackUrl' | 'lookup'>; timeoutMs: number }): Sender {
  const { urlPolicy, timeoutMs } = options;
  const agent = new Agent({
    connect: { lookup: urlPolicy.lookup, timeout: timeoutMs },
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
    keepAliveTimeout: 30_000,
  });

  async function send(attempt: { url: string; headers: Record<string, string>; body: string }, signal?: AbortSignal): Promise<AttemptOutcome> {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    const verdict = await urlPolicy.checkCallbackUrl(attempt.url);
    if (!verdict.ok) {
      return { ok: false, statusCode: null, durationMs: elapsed(), error: `blocked: ${verdict.reason}`, responseBody: null, retryAfter: undefined, blocked: true, aborted: false };
    }
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), timeoutMs);
    const cancel = () => abort.abort();
    signal?.addEventListener('abort', cancel);
    try {
      const response = await request(verdict.url, {
        method: 'POST',
        headers: attempt.headers,
        body: attempt.body,
        dispatcher: agent,
        signal: abort.signal,
      });
      const excerpt = await readExcerpt(response.body);
      const retryAfter = response.statusCode === 429 || response.statusCode === 503 ? header(response.headers['retry-after']) : undefined;
      const ok = response.statusCode >= 200 && response.statusCode < 300;
      return {
        ok,
        statusCode: response.statusCode,
        durationMs: elapsed(),
        error: ok ? null : `HTTP ${response.statusCode}`,
        responseBody: excerpt,
        retryAfter,
        blocked: false,
        aborted: false,
      };
    } catch (err) {
      const blocked = hasCode(err, 'EWEBHOOKBLOCKED');
      const aborted = signal?.aborted === true;
      const error = abort.signal.aborted && !aborted ? `timed out after ${timeoutMs} ms` : describeError(err);
      return { ok: false, statusCode: null, durationMs: elapsed(), error: blocked ? `blocked: ${error}` : error, responseBody: null, retryAfter: undefined, blocked, aborted };
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', cancel);
    }
  }

  return { send, close: () => agent.close() };
}

function header(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

async function readExcerpt(body: AsyncIterable<Buffer> & { destroy(): void }): Promise<string> {
  const kept: Buffer[] = [];
  let keptBytes = 0;
  let seen = 0;
  for await (const chunk of body) {
    if (keptBytes < RESPONSE_EXCERPT_BYTES) {
      const part = chunk.subarray(0, RESPONSE_EXCERPT_BYTES - keptBytes);
      kept.push(part);
      keptBytes += part.length;
    }
    seen += chunk.length;
    if (seen >= MAX_DRAIN_BYTES) {
      body.destroy();
      break;
    }
  }
  // A multi-byte character cut at the 2 KiB mark becomes U+FFFD rather than an error.
  return new TextDecoder().decode(Buffer.concat(kept));
}

function hasCode(err: unknown, code: string): boolean {
  for (let current = err, depth = 0; current instanceof Error && depth < 3; depth++) {
    if ((current as NodeJS.ErrnoException).code === code) return true;
    current = (current as Error & { cause?: unknown }).cause;
  }
  return false;
}

/** "CODE: message", following `cause` (undici wraps socket errors), never a stack. */
function describeError(err: unknown): string {
  const parts: string[] = [];
  let current: unknown = err;
  for (let depth = 0; current instanceof Error && depth < 3; depth++) {
    const code = (current as NodeJS.ErrnoException).code;
    const text = code && !current.message.includes(code) ? `${code}: ${current.message}` : current.message;
    if (!parts.includes(text)) parts.push(text);
    current = (current as Error & { cause?: unknown }).cause;
  }
  return (parts.join(' <- ') || String(err)).slice(0, 500);
}
