import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { servedOpenApiDocument } from '../rest/openapi.js';
import { CSS, HTML, JS, type PageFile, pageHeaders, registerPageFiles } from './page-files.js';

// swagger-ui-dist's prebuilt files, served by us: the reference loads nothing from another origin.
const swaggerUi = dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));

const PAGE = `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>Loyalty · REST API reference</title>
  <link rel="icon" href="data:,">
  <link rel="stylesheet" href="/docs/swagger-ui.css">
  <link rel="stylesheet" href="/docs/docs.css">
  <script src="/docs/swagger-ui-bundle.js" defer></script>
  <script src="/docs/docs.js" defer></script>
</head>
<body>
  <nav class="docs-nav">
    <strong>Loyalty service</strong>
    <a href="/docs" aria-current="page">REST reference</a>
    <a href="/openapi.json">openapi.json</a>
    <a href="/graphql">GraphiQL</a>
    <a href="/dashboard">Program page (live)</a>
  </nav>
  <div id="swagger-ui"></div>
</body>
</html>
`;

// No validator badge (it would call validator.swagger.io); "Authorize" takes the API key.
const INIT = `window.ui = SwaggerUIBundle({
  url: '/openapi.json',
  dom_id: '#swagger-ui',
  deepLinking: true,
  validatorUrl: null,
  presets: [SwaggerUIBundle.presets.apis],
  layout: 'BaseLayout',
});
`;

const NAV_CSS = `.docs-nav { display: flex; gap: 1.5em; align-items: baseline; padding: .8em 20px; background: #1b1b1b; color: #fff; font-family: sans-serif; }
.docs-nav a { color: #9fd4ff; }
`;

// Swagger UI sets inline styles, hence 'unsafe-inline' for styles only; scripts and requests stay on this origin.
const HEADERS = pageHeaders("script-src 'self'; style-src 'self' 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; font-src 'self' data:");

/** GET /openapi.json (the REST API's OpenAPI 3.1 document) and GET /docs (Swagger UI over it); no auth. */
export function registerApiDocs(app: FastifyInstance): void {
  app.get('/openapi.json', async (request, reply) =>
    reply
      .header('cache-control', 'no-cache')
      .type('application/json; charset=utf-8')
      .send(JSON.stringify(servedOpenApiDocument(`${request.protocol}://${request.host}`))),
  );

  const files: Record<string, PageFile> = {
    '/docs': { body: PAGE, type: HTML },
    '/docs/docs.js': { body: INIT, type: JS },
    '/docs/docs.css': { body: NAV_CSS, type: CSS },
    '/docs/swagger-ui-bundle.js': { body: readFileSync(join(swaggerUi, 'swagger-ui-bundle.js')), type: JS },
    '/docs/swagger-ui.css': { body: readFileSync(join(swaggerUi, 'swagger-ui.css')), type: CSS },
  };
  registerPageFiles(app, files, HEADERS);
}
