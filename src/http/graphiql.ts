import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { CSS, HTML, JS, type PageFile, pageHeaders, registerPageFiles, sendPageFile } from './page-files.js';

const here = join(dirname(fileURLToPath(import.meta.url)), 'graphiql');

export const EXAMPLE_OPERATIONS = `# Loyalty GraphQL. Also here: the REST reference at /docs, the program page at /dashboard.
# The API key you gave is sent with every operation (this tab keeps it until closed); pick one to run.
query Customer {
  customer(identifier: "demo-1001") {
    email
    points
    activities(first: 5) { edges { node { _id type oldPoints newPoints createdAt } } }
  }
}

query RedeemableRewards {
  pointsRedemptions(customerIdentifier: "demo-1001", first: 10) {
    edges { node { _id name type rewardValue discountValue redeemable } }
  }
}

mutation AddPoints {
  pointsAdd(input: { customerIdentifier: "demo-1001", amount: 10, description: "GraphiQL" }) {
    activity { _id oldPoints newPoints }
    userErrors { code field message }
  }
}

# rewardId: an _id from RedeemableRewards
mutation Redeem {
  pointsRedeem(input: { customerIdentifier: "demo-1001", rewardId: "<_id>", pointsAmount: 100 }) {
    discountCode { code value type expiresAt }
    customer { points }
    userErrors { code field message }
  }
}

# When the customer's soonest points expire (null with the shop's default expiry mode, none).
query NextExpiry {
  customer(identifier: "demo-1001") { points nextExpiry { points at } }
}

# Each credit expires a year after it became available, with a warning (points/expiring) 30 days before.
mutation ExpireAfterAYear {
  shopSettingsUpdate(input: { expiry: { mode: per_earn, days: 365, warningDays: 30 } }) {
    settings { expiry { mode days warningDays } }
    userErrors { code field message }
  }
}

# A VIP ladder on points earned this calendar year: Gold earns 1.5x on orders (docs/tiers.md).
mutation VipTiers {
  shopSettingsUpdate(input: { tiers: { metric: points_earned, window: calendar_year } }) { userErrors { code message } }
  silver: tierCreate(input: { name: "Silver", threshold: "500", multiplier: "1.25" }) { tier { id } userErrors { code message } }
  gold: tierCreate(input: { name: "Gold", threshold: "1500", multiplier: "1.5" }) { tier { id } userErrors { code message } }
}

query CustomerTier {
  customer(identifier: "demo-1001") { tier { tier { name multiplier } since } tierProgress { current next { name } remaining } }
}

# Storefronts in the browser (docs/storefront.md): let the shop's pages in, then mint a token for a
# customer; the page sends it to /storefront/graphql (never the API key).
mutation StorefrontAccess {
  shopSettingsUpdate(input: { storefrontOrigins: ["http://127.0.0.1:8080"] }) { settings { storefrontOrigins } userErrors { code message } }
  customerAccessTokenCreate(input: { customerIdentifier: "demo-1001" }) { accessToken expiresAt userErrors { code message } }
}

# The program by local day (the figures /dashboard shows): change the dates to the last weeks.
query Insights {
  shop {
    insights(from: "2026-11-01T00:00:00Z", to: "2026-12-01T00:00:00Z", interval: day) {
      timezone
      points { at issued { total } redeemed expired outstanding pending activeMembers members }
      rewards { name codes used expired cancelled useRate points }
      tiers { name members }
    }
  }
  activities(first: 10) { edges { node { type newPoints createdAt holder { email shopifyCustomerId } } } }
}

# Runs until stopped; add or redeem points meanwhile to see events arrive.
subscription PointsEvents {
  events(topics: ["points/*", "redemptions/created"]) { id type timestamp data }
}
`;

/** What start.js hands to GraphiQL; `<` escaped so no text of it can end the data block it sits in. */
const OPTIONS = JSON.stringify({
  endpoint: '/graphql',
  defaultQuery: EXAMPLE_OPERATIONS,
  title: 'Loyalty GraphQL · REST reference at /docs · program page at /dashboard',
}).replace(/</g, '\\u003c');

const PAGE: PageFile = { body: readFileSync(join(here, 'index.html'), 'utf8').replace('__OPTIONS__', () => OPTIONS), type: HTML };

/**
 * Yoga's GraphiQL build (React, Monaco and its workers), bundled: nothing comes from a CDN. It is
 * 9 MB of strings, loaded on the page's first view: ~40 MiB of resident memory that most servers,
 * never visited by a browser, would hold for nothing.
 */
let bundle: Promise<typeof import('@graphql-yoga/render-graphiql/graphiql')> | undefined;
const fromBundle = (part: 'js' | 'css' | 'editorWorkerService' | 'jsonWorker' | 'graphqlWorker') => async () =>
  (await (bundle ??= import('@graphql-yoga/render-graphiql/graphiql')))[part];

// Scripts and workers are files of this server; GraphiQL and Monaco set inline styles and embed
// their fonts and icons as data: URLs.
const HEADERS = pageHeaders("script-src 'self'; worker-src 'self'; style-src 'self' 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; font-src 'self' data:");

/**
 * GraphiQL at GET /graphql (asked for as HTML), and its files under /graphiql/. Every script is a
 * file, none is inline or built from a function's source text: a runner such as tsx rewrites the
 * functions it loads, and their text no longer runs in a browser. The CSP holds the page to that.
 */
export function registerGraphiQL(app: FastifyInstance): void {
  registerPageFiles(
    app,
    {
      '/graphiql/start.js': { body: readFileSync(join(here, 'start.js')), type: JS },
      '/graphiql/page.css': { body: readFileSync(join(here, 'page.css')), type: CSS },
      '/graphiql/graphiql.js': { body: fromBundle('js'), type: JS },
      '/graphiql/graphiql.css': { body: fromBundle('css'), type: CSS },
      '/graphiql/editor.worker.js': { body: fromBundle('editorWorkerService'), type: JS },
      '/graphiql/json.worker.js': { body: fromBundle('jsonWorker'), type: JS },
      '/graphiql/graphql.worker.js': { body: fromBundle('graphqlWorker'), type: JS },
    },
    HEADERS,
  );
}

/** Whether a request to /graphql asks for GraphiQL: a GET that takes HTML (a browser), as Yoga tells them apart. */
export function wantsGraphiQL(request: FastifyRequest): boolean {
  return request.method === 'GET' && (request.headers.accept ?? '').includes('text/html');
}

export function sendGraphiQL(request: FastifyRequest, reply: FastifyReply) {
  return sendPageFile(request, reply, PAGE, HEADERS);
}
