import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance } from 'fastify';
import { CSS, HTML, JS, type PageFile, pageHeaders, registerPageFiles } from './page-files.js';

const here = join(dirname(fileURLToPath(import.meta.url)), 'admin');
const page: PageFile = { body: readFileSync(join(here, 'index.html')), type: HTML };

/**
 * GET /admin: the staff console, a client of /graphql signed in with a staff session
 * (src/http/staff-session.ts). One page; the one-time links of invites and resets open it at
 * /admin/accept and /admin/reset. Static files, read once at start-up; no build step.
 */
export function registerAdminPage(app: FastifyInstance): void {
  registerPageFiles(
    app,
    {
      '/admin': page,
      '/admin/accept': page,
      '/admin/reset': page,
      '/admin/admin.js': { body: readFileSync(join(here, 'admin.js')), type: JS },
      '/admin/settings.js': { body: readFileSync(join(here, 'settings.js')), type: JS },
      '/admin/webhooks.js': { body: readFileSync(join(here, 'webhooks.js')), type: JS },
      '/admin/audit.js': { body: readFileSync(join(here, 'audit.js')), type: JS },
      '/admin/admin.css': { body: readFileSync(join(here, 'admin.css')), type: CSS },
    },
    // Everything from this origin; the session's cookie and CSRF token go nowhere else.
    pageHeaders("script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:"),
  );
}
