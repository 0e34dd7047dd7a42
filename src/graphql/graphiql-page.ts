import type { GraphiQLOptions } from 'graphql-yoga';

/** Where the page keeps the key: this browser tab only, gone when it closes. */
const KEY_STORE = 'loyalty-graphiql-api-key';

/**
 * Runs in the page before GraphiQL: every operation, the schema's introspection included, needs an
 * API key, so the page asks for one first (or takes the one this tab already gave) and checks it,
 * then starts GraphiQL sending it with every request. The schema then loads at once, and the key
 * stays out of the headers editor, whose contents GraphiQL would otherwise turn into a new tab on reload.
 */
function startWithApiKey(storeName: string, root: HTMLElement, options: GraphiQLOptions) {
  const accepted = async (key: string) => {
    const res = await fetch(options.endpoint ?? location.pathname, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: JSON.stringify({ query: '{ __typename }' }),
    });
    return res.status !== 401;
  };
  const open = (key: string) => {
    root.replaceChildren();
    (globalThis as unknown as { YogaGraphiQL: { renderYogaGraphiQL(root: HTMLElement, options: GraphiQLOptions): void } }).YogaGraphiQL.renderYogaGraphiQL(root, {
      ...options,
      // GraphiQL opens a tab for the initial query unless a stored tab holds it: with none given, a
      // reload added an empty tab. The examples (or the ?query= GraphiQL keeps in the URL) are it.
      query: options.defaultQuery,
      additionalHeaders: { Authorization: `Bearer ${key}` },
    } as GraphiQLOptions);
  };
  const ask = (problem: string) => {
    root.innerHTML =
      '<form id="api-key-form" style="max-width:32rem;margin:15vh auto;font:16px system-ui,sans-serif;display:grid;gap:.8rem">' +
      '<h1 style="font-size:1.4rem;margin:0">Loyalty GraphQL</h1>' +
      '<label for="api-key">API key of your shop (<code>lk_…</code>); kept in this browser tab only and sent as <code>Authorization: Bearer</code></label>' +
      '<input id="api-key" type="password" autocomplete="off" required style="font:inherit;padding:.4rem">' +
      '<button type="submit" style="font:inherit;padding:.4rem">Open GraphiQL</button>' +
      '<p id="api-key-problem" role="alert" style="color:#b00020;margin:0"></p></form>';
    root.querySelector('#api-key-problem')!.textContent = problem;
    const form = root.querySelector('form')!;
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      const key = (root.querySelector('#api-key') as HTMLInputElement).value.trim();
      if (!(await accepted(key))) {
        root.querySelector('#api-key-problem')!.textContent = 'That key is not valid (or revoked): check it, or create one (see the README).';
        return;
      }
      sessionStorage.setItem(storeName, key);
      open(key);
    });
  };
  const stored = sessionStorage.getItem(storeName);
  if (!stored) return ask('');
  void accepted(stored).then((ok) => {
    if (ok) return open(stored);
    sessionStorage.removeItem(storeName);
    ask('The key this tab used is no longer valid: enter another one.');
  });
}

/**
 * Yoga's GraphiQL page (bundled, nothing from a CDN), started by startWithApiKey instead of directly.
 * The bundle is loaded on the page's first view: it is a 9 MB script held as a string, ~40 MiB of a
 * server's resident memory that most servers, never visited by a browser, would hold for nothing.
 */
export async function renderGraphiQLWithApiKey(options: GraphiQLOptions): Promise<string> {
  const { renderGraphiQL } = await import('@graphql-yoga/render-graphiql');
  const page = renderGraphiQL(options);
  const start = 'YogaGraphiQL.renderYogaGraphiQL(';
  if (page.split(start).length !== 2) throw new Error('the GraphiQL page changed: it no longer calls renderYogaGraphiQL once');
  return page.replace(start, `(${startWithApiKey.toString()})(${JSON.stringify(KEY_STORE)}, `);
}
