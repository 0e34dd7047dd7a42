import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance } from 'fastify';
import { CSS, HTML, JS, type PageFile, pageHeaders, registerPageFiles } from './page-files.js';

const here = join(dirname(fileURLToPath(import.meta.url)), 'dashboard');
// graphql-ws's own browser build (UMD, sets window.graphqlWs): served by us, no CDN.
const require = createRequire(import.meta.url);
const graphqlWsBrowserBuild = join(dirname(require.resolve('graphql-ws')), '..', 'umd', 'graphql-ws.min.js');
// Chart.js's browser build (UMD, sets window.Chart), beside its CommonJS entry.
const chartJsBrowserBuild = join(dirname(require.resolve('chart.js')), 'chart.umd.min.js');

const FILES: Record<string, { path: string; type: string }> = {
  '/dashboard': { path: join(here, 'index.html'), type: HTML },
  '/dashboard/dashboard.js': { path: join(here, 'dashboard.js'), type: JS },
  '/dashboard/dashboard.css': { path: join(here, 'dashboard.css'), type: CSS },
  '/dashboard/graphql-ws.js': { path: graphqlWsBrowserBuild, type: JS },
  '/dashboard/chart.js': { path: chartJsBrowserBuild, type: JS },
};

// Everything the page loads comes from this server; the API key typed into it can go nowhere else.
const HEADERS = pageHeaders("script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:");

/**
 * GET /dashboard: the program page, where a shop owner pastes an API key and sees the program's
 * figures, charts and recent activity, kept live over graphql-ws, and the shop's events as they
 * arrive. Static files, read once at start-up; no build step.
 */
export function registerDashboard(app: FastifyInstance): void {
  const files: Record<string, PageFile> = {};
  for (const [url, file] of Object.entries(FILES)) files[url] = { body: readFileSync(file.path), type: file.type };
  registerPageFiles(app, files, HEADERS);
}
