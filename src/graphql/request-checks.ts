import { createGraphQLError, type Plugin } from 'graphql-yoga';

/** What Yoga can answer in (its result processors), as it matches them against Accept. */
const ANSWERABLE = ['multipart/mixed', 'text/event-stream', 'application/graphql-response+json', 'application/json'];

/** Yoga's reading of Accept: each type with a utf-8 (or no) charset; wildcards on the asked side. */
function acceptable(accept: string | null): boolean {
  const asked = (accept || '*/*').replace(/\s/g, '').toLowerCase().split(',');
  return asked.some((entry) => {
    const [type = '', ...params] = entry.split(';');
    const charset = params.find((p) => p.includes('charset=')) ?? 'charset=utf-8';
    if (charset !== 'charset=utf-8') return false;
    const [pre, suf] = type.split('/');
    return ANSWERABLE.some((answerable) => {
      const [aPre, aSuf] = answerable.split('/');
      return (pre === '*' || pre === aPre) && (suf === '*' || suf === aSuf);
    });
  });
}

/**
 * Checks on a GraphQL request before it runs:
 * - Yoga picks the response format by Accept only after executing, so a mutation asked for in a
 *   format it cannot produce (Accept: application/xml) ran and was then answered 406 with an empty
 *   body: a write the client was told failed. It is refused here first, in our error envelope.
 * - Yoga parses a GET's `variables` and `extensions` with JSON.parse and lets the SyntaxError
 *   through as an unexpected error (500); it is a 400 `malformed_json`, like a malformed REST body.
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
  };
}
