// GraphiQL's start (GET /graphql): every operation, the schema's introspection included, needs an
// API key, so the page asks for one first (or takes the one this tab already gave) and checks it,
// then starts GraphiQL sending it with every request. The schema then loads at once, and the key
// stays out of the headers editor, whose contents GraphiQL would otherwise turn into a new tab on reload.
'use strict';

/** Where the page keeps the key: this browser tab only, gone when it closes. */
const KEY_STORE = 'loyalty-graphiql-api-key';

// Monaco (GraphiQL's editor) runs its language services in workers: files of this server too.
const WORKERS = {
  editorWorkerService: '/graphiql/editor.worker.js',
  json: '/graphiql/json.worker.js',
  graphql: '/graphiql/graphql.worker.js',
};
self.MonacoEnvironment = { globalAPI: false, getWorkerUrl: (_moduleId, label) => WORKERS[label] };

document.addEventListener('DOMContentLoaded', () => {
  const options = JSON.parse(document.getElementById('graphiql-options').textContent);
  const root = document.getElementById('root');
  const form = document.getElementById('api-key-form');
  const input = document.getElementById('api-key');
  const problem = document.getElementById('api-key-problem');

  const accepted = async (key) => {
    const res = await fetch(options.endpoint, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: JSON.stringify({ query: '{ __typename }' }),
    });
    return res.status !== 401;
  };

  const open = (key) => {
    form.hidden = true;
    window.YogaGraphiQL.renderYogaGraphiQL(root, {
      ...options,
      // GraphiQL opens a tab for the initial query unless a stored tab holds it: with none given, a
      // reload added an empty tab. The examples (or the ?query= GraphiQL keeps in the URL) are it.
      query: options.defaultQuery,
      additionalHeaders: { Authorization: `Bearer ${key}` },
    });
  };

  const ask = (message) => {
    problem.textContent = message;
    form.hidden = false;
    input.focus();
  };

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const key = input.value.trim();
    if (!(await accepted(key))) {
      problem.textContent = 'That key is not valid (or revoked): check it, or create one (see the README).';
      return;
    }
    sessionStorage.setItem(KEY_STORE, key);
    open(key);
  });

  const stored = sessionStorage.getItem(KEY_STORE);
  if (!stored) return ask('');
  void accepted(stored).then((ok) => {
    if (ok) return open(stored);
    sessionStorage.removeItem(KEY_STORE);
    ask('The key this tab used is no longer valid: enter another one.');
  });
});
