import mjml2html from 'mjml';

/**
 * What each kind of e-mail says (issue 36, item 2). A template is MJML with `{{variable}}`
 * placeholders: MJML is compiled once per kind (it takes milliseconds, too long per message),
 * and each message fills the placeholders of the compiled HTML with escaped values, of the
 * plain-text part and the subject with the values as they are.
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

/** A paragraph, or a discount code shown large and on one line (a code broken at its hyphen is easily copied wrong). */
type Part = string | { code: string };

/** A template from its subject and paragraphs: MJML for the HTML part, the same words (without markup) for the text part. */
function template(subject: string, parts: readonly Part[]): Template {
  const mjml = parts.map((part) =>
    typeof part === 'string'
      ? `<mj-text>${part}</mj-text>`
      : `<mj-text align="center" font-size="24px" line-height="32px" font-weight="bold" letter-spacing="1px" padding="16px"><span style="white-space:nowrap">${part.code}</span></mj-text>`,
  );
  const text = parts.map((part) => (typeof part === 'string' ? part.replace(/<\/?strong>/g, '') : `    ${part.code}`));
  return { subject, mjml: layout(mjml.join('\n        ')), text: `${text.join('\n\n')}${footer}` };
}

const hi = 'Hi {{customerName}},';
const balance = 'Your balance is now {{balance}} points.';

const TEMPLATES: Record<MailKind, Template> = {
  reward_issued: template('Your reward from {{shopName}}: {{code}}', [
    hi, 'You redeemed {{pointsSpent}} points for <strong>{{reward}}</strong>. Here is your code:', { code: '{{code}}' }, '{{terms}}', balance,
  ]),
  points_earned: template('You earned {{points}} points at {{shopName}}', [hi, 'On {{date}} you earned <strong>{{points}} points</strong>.', balance]),
  points_expiring: template('{{points}} of your points at {{shopName}} expire soon', [
    hi, '<strong>{{points}} points</strong> of your balance expire after {{date}}. Spend them by then, or they are gone.', balance,
  ]),
  points_expired: template('{{points}} of your points at {{shopName}} expired', [hi, 'On {{date}}, <strong>{{points}} points</strong> of your balance expired.', balance]),
  code_expiring: template('Your code {{code}} at {{shopName}} expires on {{expiresAt}}', [
    hi, 'Your code for <strong>{{reward}}</strong> has not been used yet:', { code: '{{code}}' }, 'Use it once at checkout, until {{expiresAt}}.', balance,
  ]),
  tier_reached: template('You reached {{tier}} at {{shopName}}', [hi, 'Congratulations: you are now a <strong>{{tier}}</strong> member.', balance]),
  tier_lost: template('Your {{previousTier}} membership at {{shopName}} has ended', [hi, 'You are no longer a <strong>{{previousTier}}</strong> member. {{tierNow}}', balance]),
  referral_reward: template('You earned {{points}} points at {{shopName}} with a referral', [hi, 'You earned <strong>{{points}} points</strong> {{referral}}.', balance]),
  birthday: template('Happy birthday from {{shopName}}: {{points}} points', [hi, 'Happy birthday! We gave you <strong>{{points}} points</strong> to celebrate.', balance]),
};

const compiled = new Map<MailKind, Promise<string>>();

async function compile(kind: MailKind): Promise<string> {
  const result = await mjml2html(TEMPLATES[kind].mjml, { validationLevel: 'strict' });
  return result.html;
}

const HTML_ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
export const escapeHtml = (value: string) => value.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]!);

function fill(template: string, variables: MailVariables, escape: (value: string) => string): string {
  return template.replace(/\{\{(\w+)\}\}/g, (_, name: string) => escape(variables[name] ?? ''));
}

export type RenderedMail = { subject: string; html: string; text: string };

/** The e-mail of `kind` with its variables filled in (an unknown variable is empty). */
export async function renderMail(kind: MailKind, variables: MailVariables): Promise<RenderedMail> {
  let html = compiled.get(kind);
  if (!html) {
    html = compile(kind);
    compiled.set(kind, html);
    html.catch(() => compiled.delete(kind));
  }
  const template = TEMPLATES[kind];
  return {
    // A header: a line break in a value must not start another one.
    subject: fill(template.subject, variables, (v) => v.replace(/[\r\n]+/g, ' ')),
    html: fill(await html, variables, escapeHtml),
    text: fill(template.text, variables, (v) => v),
  };
}

/** A date as the shop's customers read it: the day in the shop's time zone. */
export function formatShopDate(at: Date, timeZone: string, locale = 'en'): string {
  return new Intl.DateTimeFormat(locale, { dateStyle: 'long', timeZone }).format(at);
}
