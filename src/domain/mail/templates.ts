import mjml2html from 'mjml';

/**
 * What each kind of e-mail says (issue 36, item 2). A template is MJML with `{{variable}}`
 * placeholders: MJML is compiled once per kind (it takes milliseconds, too long per message),
 * and each message fills the placeholders of the compiled HTML with escaped values, of the
 * plain-text part and the subject with the values as they are.
 */
export const MAIL_KINDS = ['reward_issued', 'points_earned'] as const;
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

const TEMPLATES: Record<MailKind, Template> = {
  reward_issued: {
    subject: 'Your reward from {{shopName}}: {{code}}',
    mjml: layout(`
        <mj-text>Hi {{customerName}},</mj-text>
        <mj-text>You redeemed {{pointsSpent}} points for <strong>{{reward}}</strong>. Here is your code:</mj-text>
        <mj-text align="center" font-size="24px" line-height="32px" font-weight="bold" letter-spacing="1px" padding="16px"><span style="white-space:nowrap">{{code}}</span></mj-text>
        <mj-text>{{terms}}</mj-text>
        <mj-text>Your balance is now {{balance}} points.</mj-text>`),
    text: `Hi {{customerName}},\n\nYou redeemed {{pointsSpent}} points for {{reward}}. Here is your code:\n\n    {{code}}\n\n{{terms}}\n\nYour balance is now {{balance}} points.${footer}`,
  },
  points_earned: {
    subject: 'You earned {{points}} points at {{shopName}}',
    mjml: layout(`
        <mj-text>Hi {{customerName}},</mj-text>
        <mj-text>On {{date}} you earned <strong>{{points}} points</strong>.</mj-text>
        <mj-text>Your balance is now {{balance}} points.</mj-text>`),
    text: `Hi {{customerName}},\n\nOn {{date}} you earned {{points}} points.\n\nYour balance is now {{balance}} points.${footer}`,
  },
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
