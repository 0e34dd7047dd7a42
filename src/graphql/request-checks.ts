import { createGraphQLError, type Plugin } from 'graphql-yoga';

/** What Yoga can answer in (its result processors), as it matches them against Accept. */
const ANSWERABLE = ['multipart/mixed', 'text/event-stream', 'application/graphql-response+json', 'application/json'];
/** The two a single (not streamed) result is answered in: Yoga's "regular" result processor. */
const SINGLE_RESULT = ['application/graphql-response+json', 'application/json'];

/** Yoga's reading of Accept: the asked types in order, those with a charset other than utf-8 left out. */
function askedMediaTypes(accept: string | null | undefined): string[] {
  if (!accept) return ['*/*'];
  const asked: string[] = [];
  for (const entry of accept.replace(/\s/g, '').toLowerCase().split(',')) {
    const params = entry.split(';');
    const charset = params.find((p, i) => i > 0 && p.includes('charset=')) ?? 'charset=utf-8';
    if (charset === 'charset=utf-8') asked.push(params[0]!);
  }
  return asked;
}

/** Whether an asked type (wildcards allowed) covers one Yoga answers in. */
function covers(asked: string, answerable: string): boolean {
  const a = asked.split('/');
  const b = answerable.split('/');
  return (a[0] === '*' || a[0] === b[0]) && (a[1] === '*' || a[1] === b[1]);
}

function acceptable(accept: string | null): boolean {
  return askedMediaTypes(accept).some((asked) => ANSWERABLE.some((answerable) => covers(asked, answerable)));
}

/**
 * The type Yoga answers a single result in, or null when Accept asks for none of the two. Yoga
 * lets the first asked type that covers one decide, and application/json wins when it covers both
 * (Accept: *\/*).
 */
export function singleResultMediaType(accept: string | undefined): string | null {
  const asked = askedMediaTypes(accept).find((type) => SINGLE_RESULT.some((answerable) => covers(type, answerable)));
  if (asked === undefined) return null;
  return covers(asked, 'application/json') ? 'application/json' : 'application/graphql-response+json';
}

/**
 * Checks on a GraphQL request before it runs:
 * - Yoga picks the response format by Accept only after executing, so a mutation asked for in a
 *   format it cannot produce (Accept: application/xml) ran and was then answered 406 with an empty
 *   body: a write the client was told failed. It is refused here first, in our error envelope.
 * - Yoga parses a GET's `variables` and `extensions` with JSON.parse and lets the SyntaxError
 *   through as an unexpected error (500); it is a 400 `malformed_json`, like a malformed REST body.
 * - A request refused before it ran (a document that does not parse or validate, a malformed body,
 *   no query) is a 400 whatever the Accept, as a document over a limit is (limits.ts). The
 *   GraphQL-over-HTTP spec, and Yoga after it (its `spec` mark), answer such a request 200 when the
 *   client takes application/json, which a browser's fetch (Accept: *\/*) and most clients do: the
 *   page then saw `res.ok` for a request that did nothing. An operation that ran is 200 whatever
 *   its errors: a refused input is a userError, an argument a field refuses is that field's error.
 */
export function useRequestChecks(): Plugin {
  return {
    onRequestParse({ request, requestParser, setRequestParser, endResponse, fetchAPI }) {
      if (!acceptable(request.headers.get('accept'))) {
        const body = {
          success: false,
          statusCode: 406,
          error: 'not_acceptable',
          message: `GraphQL answers in ${ANSWERABLE.join(', ')}; the Accept header allows none of them`,
        };
        endResponse(new fetchAPI.Response(JSON.stringify(body), { status: 406, headers: { 'content-type': 'application/json; charset=utf-8' } }));
        return;
      }
      if (!requestParser) return;
      setRequestParser(async (req) => {
        try {
          return await requestParser(req);
        } catch (err) {
          if (!(err instanceof SyntaxError)) throw err;
          throw createGraphQLError(`the request's variables or extensions are not valid JSON: ${err.message}`, {
            extensions: { code: 'malformed_json', http: { status: 400 } },
          });
        }
      });
    },
    onResultProcess({ result }) {
      if (Symbol.asyncIterator in result) return;
      for (const single of Array.isArray(result) ? result : [result]) {
        for (const error of single.errors ?? []) {
          const http = error.extensions?.http as { spec?: boolean } | undefined;
          if (http?.spec) http.spec = false;
        }
      }
    },
  };
}
