import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance } from 'fastify';

const here = join(dirname(fileURLToPath(import.meta.url)), 'dashboard');
// graphql-ws's own browser build (UMD, sets window.graphqlWs): served by us, no CDN.
const require = createRequire(import.meta.url);
const graphqlWsBrowserBuild = join(dirname(require.resolve('graphql-ws')), '..', 'umd', 'graphql-ws.min.js');
// Chart.js's browser build (UMD, sets window.Chart), beside its CommonJS entry.
const chartJsBrowserBuild = join(dirname(require.resolve('chart.js')), 'chart.umd.min.js');

const FILES: Record<string, { path: string; type: string }> = {
  '/dashboard': { path: join(here, 'index.html'), type: 'text/html; charset=utf-8' },
  '/dashboard/dashboard.js': { path: join(here, 'dashboard.js'), type: 'text/javascript; charset=utf-8' },
  '/dashboard/dashboard.css': { path: join(here, 'dashboard.css'), type: 'text/css; charset=utf-8' },
  '/dashboard/graphql-ws.js': { path: graphqlWsBrowserBuild, type: 'text/javascript; charset=utf-8' },
  '/dashboard/chart.js': { path: chartJsBrowserBuild, type: 'text/javascript; charset=utf-8' },
};

// Everything the page loads comes from this server; the API key typed into it can go nowhere else.
const SECURITY_HEADERS = {
  'content-security-policy': "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-cache',
};

/**
 * GET /dashboard: the program page, where a shop owner pastes an API key and sees the program's
 * figures, charts and recent activity, kept live over graphql-ws, and the shop's events as they
 * arrive. Static files, read once at start-up; no build step.
 */
export function registerDashboard(app: FastifyInstance): void {
  for (const [url, file] of Object.entries(FILES)) {
    const body = readFileSync(file.path);
    app.get(url, async (_request, reply) => reply.headers(SECURITY_HEADERS).type(file.type).send(body));
  }
}
