import mjml2html from 'mjml';

/**
 * What each kind of e-mail says (issue 36, item 2). A template is a subject and paragraphs of
 * words with `{{variable}}` placeholders, built in or the shop's own, laid out in MJML: MJML is
 * compiled once per template (it takes milliseconds, too long per message), and each message
 * fills the placeholders of the compiled HTML with escaped values, of the plain-text part and
 * the subject with the values as they are.
 */
export const MAIL_KINDS = [
  'reward_issued', 'points_earned', 'points_expiring', 'points_expired', 'code_expiring', 'tier_reached', 'tier_lost', 'referral_reward', 'birthday',
] as const;
export type MailKind = (typeof MAIL_KINDS)[number];

export type MailVariables = Record<string, string>;

type Template = { subject: string; mjml: string; text: string };

const layout = (body: string) => `
<mjml>
  <mj-head>
    <mj-attributes><mj-all font-family="Helvetica, Arial, sans-serif" /><mj-text font-size="16px" line-height="24px" color="#222222" /></mj-attributes>
  </mj-head>
  <mj-body background-color="#f4f4f4">
    <mj-section background-color="#ffffff" padding="24px">
      <mj-column>
        <mj-text font-size="20px" font-weight="bold">{{shopName}}</mj-text>
        ${body}
      </mj-column>
    </mj-section>
    <mj-section padding="12px">
      <mj-column>
        <mj-text font-size="12px" color="#666666" align="center">
          You receive this e-mail as a member of {{shopName}}'s loyalty program.
          <a href="{{unsubscribeUrl}}" style="color:#666666">Unsubscribe</a>
        </mj-text>
      </mj-column>
    </mj-section>
  </mj-body>
</mjml>`;

const footer = `\n\n--\nYou receive this e-mail as a member of {{shopName}}'s loyalty program.\nUnsubscribe: {{unsubscribeUrl}}\n`;

/**
 * A paragraph (its HTML, and its words for the text part), or a discount code shown large and on
 * one line (a code broken at its hyphen is easily copied wrong).
 */
type Part = { html: string; text: string } | { code: string };

/** A template from its subject and paragraphs: MJML for the HTML part, the same words (without markup) for the text part. */
function template(subject: string, parts: readonly Part[]): Template {
  const mjml = parts.map((part) =>
    'html' in part
      ? `<mj-text>${part.html}</mj-text>`
      : `<mj-text align="center" font-size="24px" line-height="32px" font-weight="bold" letter-spacing="1px" padding="16px"><span style="white-space:nowrap">${part.code}</span></mj-text>`,
  );
  const text = parts.map((part) => ('html' in part ? part.text : `    ${part.code}`));
  return { subject, mjml: layout(mjml.join('\n        ')), text: `${text.join('\n\n')}${footer}` };
}

/** A shop's own subject and body for a kind (mail_templates); the built-in ones are written the same way. */
export type ShopTemplate = { subject: string; body: string };

const PLACEHOLDER = /\{\{(\w+)\}\}/g;
const BOLD = /\*\*(.+?)\*\*/g;

/**
 * A template from the words a shop writes, not markup: its text is escaped in the HTML part (so it
 * can add no tag, link or style) except `**words**`, which are bold; a blank line starts a
 * paragraph, a line break stays one, and a paragraph of `{{code}}` alone is shown large and on one
 * line (a code broken at its hyphen is easily copied wrong).
 */
function fromWords({ subject, body }: ShopTemplate): Template {
  const paragraphs = body.split(/\r?\n[ \t]*\r?\n/).map((p) => p.trim()).filter(Boolean);
  return template(subject, paragraphs.map((p) =>
    p === '{{code}}' ? { code: p } : { html: escapeHtml(p).replace(BOLD, '<strong>$1</strong>').replace(/\r?\n/g, '<br />'), text: p.replace(BOLD, '$1') }));
}

const hi = 'Hi {{customerName}},';
const balance = 'Your balance is now {{balance}} points.';
const words = (subject: string, paragraphs: readonly string[]): ShopTemplate => ({ subject, body: paragraphs.join('\n\n') });

const BUILT_IN: Record<MailKind, ShopTemplate> = {
  reward_issued: words('Your reward from {{shopName}}: {{code}}', [
    hi, 'You redeemed {{pointsSpent}} points for **{{reward}}**. Here is your code:', '{{code}}', '{{terms}}', balance,
  ]),
  points_earned: words('You earned {{points}} points at {{shopName}}', [hi, 'On {{date}} you earned **{{points}} points**.', balance]),
  points_expiring: words('{{points}} of your points at {{shopName}} expire soon', [
    hi, '**{{points}} points** of your balance expire after {{date}}. Spend them by then, or they are gone.', balance,
  ]),
  points_expired: words('{{points}} of your points at {{shopName}} expired', [hi, 'On {{date}}, **{{points}} points** of your balance expired.', balance]),
  code_expiring: words('Your code {{code}} at {{shopName}} expires on {{expiresAt}}', [
    hi, 'Your code for **{{reward}}** has not been used yet:', '{{code}}', 'Use it once at checkout, until {{expiresAt}}.', balance,
  ]),
  tier_reached: words('You reached {{tier}} at {{shopName}}', [hi, 'Congratulations: you are now a **{{tier}}** member.', balance]),
  tier_lost: words('Your {{previousTier}} membership at {{shopName}} has ended', [hi, 'You are no longer a **{{previousTier}}** member. {{tierNow}}', balance]),
  referral_reward: words('You earned {{points}} points at {{shopName}} with a referral', [hi, 'You earned **{{points}} points** {{referral}}.', balance]),
  birthday: words('Happy birthday from {{shopName}}: {{points}} points', [hi, 'Happy birthday! We gave you **{{points}} points** to celebrate.', balance]),
};

/** The built-in subject and body of a kind: what a shop without its own sends, and the start of its own. */
export const builtInTemplate = (kind: MailKind): ShopTemplate => BUILT_IN[kind];

/** The variables every e-mail has. */
const COMMON_VARIABLES = ['shopName', 'customerName', 'email', 'balance', 'unsubscribeUrl'] as const;
const CODE_VARIABLES = ['code', 'reward', 'pointsSpent', 'expiresAt', 'terms'] as const;
const TIER_VARIABLES = ['tier', 'previousTier', 'tierNow'] as const;

/** The variables each kind's e-mail fills (src/domain/mail/messages.ts mailVariables): a shop's template may use these only. */
export const MAIL_VARIABLES: Record<MailKind, readonly string[]> = {
  reward_issued: [...COMMON_VARIABLES, ...CODE_VARIABLES],
  code_expiring: [...COMMON_VARIABLES, ...CODE_VARIABLES],
  points_earned: [...COMMON_VARIABLES, 'points', 'date'],
  points_expiring: [...COMMON_VARIABLES, 'points', 'expiresAt', 'date'],
  points_expired: [...COMMON_VARIABLES, 'points', 'date'],
  tier_reached: [...COMMON_VARIABLES, ...TIER_VARIABLES],
  tier_lost: [...COMMON_VARIABLES, ...TIER_VARIABLES],
  referral_reward: [...COMMON_VARIABLES, 'points', 'referral'],
  birthday: [...COMMON_VARIABLES, 'points'],
};

/**
 * What is wrong with a shop's subject or body for `kind`: each unknown variable, and braces that
 * open or close no `{{variable}}` (a typo that would otherwise be sent as it stands).
 */
export function templateProblems(kind: MailKind, text: string): string[] {
  const known = new Set(MAIL_VARIABLES[kind]);
  const unknown = [...new Set([...text.matchAll(PLACEHOLDER)].map((m) => m[1]!).filter((name) => !known.has(name)))];
  const problems = unknown.map((name) => `unknown variable {{${name}}}; this e-mail has ${MAIL_VARIABLES[kind].map((v) => `{{${v}}}`).join(', ')}`);
  if (/[{}]/.test(text.replace(PLACEHOLDER, ''))) problems.push('unbalanced braces: write a variable as {{name}}');
  return problems;
}

// Templates are made once per object: the built-in ones once, a shop's once per worker lane (which reads them once).
const made = new WeakMap<ShopTemplate, Template>();
function templateOf(kind: MailKind, own: ShopTemplate | undefined): Template {
  const words = own ?? BUILT_IN[kind];
  let held = made.get(words);
  if (!held) {
    held = fromWords(words);
    made.set(words, held);
  }
  return held;
}

/** Compiled HTML by its MJML: the built-in kinds', and the shops' own (bounded: cleared when full, compiling again costs milliseconds). */
const compiled = new Map<string, Promise<string>>();
const MAX_COMPILED = 1000;

function compile(mjml: string): Promise<string> {
  let html = compiled.get(mjml);
  if (!html) {
    if (compiled.size >= MAX_COMPILED) compiled.clear();
    html = mjml2html(mjml, { validationLevel: 'strict' }).then((result) => result.html);
    compiled.set(mjml, html);
    html.catch(() => compiled.delete(mjml));
  }
  return html;
}

const HTML_ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
export const escapeHtml = (value: string) => value.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]!);

function fill(template: string, variables: MailVariables, escape: (value: string) => string): string {
  return template.replace(PLACEHOLDER, (_, name: string) => escape(variables[name] ?? ''));
}

export type RenderedMail = { subject: string; html: string; text: string };

/** The e-mail of `kind` (the shop's own template, or the built-in one) with its variables filled in (an unknown variable is empty). */
export async function renderMail(kind: MailKind, variables: MailVariables, own?: ShopTemplate): Promise<RenderedMail> {
  const template = templateOf(kind, own);
  const html = await compile(template.mjml);
  return {
    // A header: a line break in a value must not start another one.
    subject: fill(template.subject, variables, (v) => v.replace(/[\r\n]+/g, ' ')),
    html: fill(html, variables, escapeHtml),
    text: fill(template.text, variables, (v) => v),
  };
}

/** A date as the customer reads it: the day in the shop's time zone, in the customer's language. */
export function formatShopDate(at: Date, timeZone: string, locale = 'en'): string {
  return new Intl.DateTimeFormat(locale, { dateStyle: 'long', timeZone }).format(at);
}

/** A number of points as the customer reads it (1,000 in English, 1.000 in German). */
export function formatPoints(points: number, locale = 'en'): string {
  return new Intl.NumberFormat(locale, { maximumFractionDigits: 0 }).format(points);
}

/** Whether Intl writes dates and numbers in this language (else it would fall back silently to another). */
export function isSupportedLocale(locale: string): boolean {
  try {
    return Intl.DateTimeFormat.supportedLocalesOf([locale]).length > 0 && Intl.NumberFormat.supportedLocalesOf([locale]).length > 0;
  } catch {
    return false;
  }
}
