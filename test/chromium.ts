import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type BrowserContext, chromium, type Page } from 'playwright-core';
import { expect } from 'vitest';

/** Debian's Chromium: no browser download. */
export const CHROMIUM = '/usr/bin/chromium';
/** Where page tests leave their screenshots. */
export const OUTPUT = join(process.cwd(), '.test-output');

export type BrowserSession = {
  browser: BrowserContext;
  page: Page;
  /** Console errors and uncaught exceptions of the page. */
  problems: string[];
  /** Requests that went anywhere but `origins` (their WebSocket, blob: and data: URLs count as their own). */
  foreignRequests: string[];
  /**
   * Fails unless the page logged no console error, threw nothing and asked no other origin for
   * anything since the last check (afterEach of every page test); clears what it saw.
   */
  expectClean(): void;
  /** Takes the problems a test caused on purpose out of `problems`, after checking they are exactly those, in order. */
  expectProblems(...expected: RegExp[]): void;
  /** Full-page screenshot into .test-output/; resolves to its path. */
  screenshot(name: string): Promise<string>;
  close(): Promise<void>;
};

/** A headless Chromium with a throwaway profile, watching what the page does against its `origins` (the page's, the API's). */
export async function openChromium(...origins: string[]): Promise<BrowserSession> {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium (as .ci/run does)`);
  const profile = mkdtempSync(join(tmpdir(), 'test-chromium-'));
  const browser = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    viewport: { width: 1280, height: 900 },
  });
  const page = browser.pages()[0] ?? (await browser.newPage());
  const problems: string[] = [];
  const foreignRequests: string[] = [];
  const own = [...origins.flatMap((origin) => [origin, origin.replace(/^http/, 'ws'), `blob:${origin}`]), 'data:'];
  page.on('console', (msg) => {
    if (msg.type() === 'error') problems.push(msg.text());
  });
  page.on('pageerror', (err) => problems.push(`pageerror: ${err.message} ${err.stack}`));
  page.on('request', (req) => {
    if (!own.some((prefix) => req.url().startsWith(prefix))) foreignRequests.push(req.url());
  });
  return {
    browser,
    page,
    problems,
    foreignRequests,
    expectClean() {
      expect(problems.splice(0), 'console errors and page errors').toEqual([]);
      expect(foreignRequests.splice(0), 'requests to other origins').toEqual([]);
    },
    expectProblems(...expected) {
      const seen = problems.splice(0);
      expect(seen, 'the console errors the test caused').toHaveLength(expected.length);
      expected.forEach((pattern, i) => expect(seen[i]).toMatch(pattern));
    },
    async screenshot(name) {
      mkdirSync(OUTPUT, { recursive: true });
      const path = join(OUTPUT, name);
      await page.screenshot({ path, fullPage: true });
      return path;
    },
    async close() {
      await browser.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}
