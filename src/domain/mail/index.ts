// E-mails to customers (issue 36): a shop's SMTP settings, the templates, the queue the outbox
// fills (one e-mail per event and customer), consent (signed unsubscribe links) and suppressions.
export { forgetMailRecipient } from './erasure.js';
export { readUnsubscribeToken, setMailConsent, unsubscribeByToken, unsubscribeToken } from './consent.js';
export { composeMail, type MailDeps, mailVariables, type MailTestResult, sendTestMail, testShopMail } from './messages.js';
export {
  claimMail, type ClaimedMail, listMailSuppressions, type MailSuppression, queueMail, recordMailFailed, recordMailsSent, recordMailSkipped,
  recordRecipientRefused, returnMail, type SentMail, shopsWithDueMail,
} from './queue.js';
export { getMailSettings, type MailSettings, type MailSettingsInput, mailSettingsInputSchema, type OpenMailSettings, openMailSettings, updateMailSettings } from './settings.js';
export { escapeHtml, MAIL_KINDS, type MailKind, renderMail } from './templates.js';
export { createMailTransport, type MailTransport, type OutgoingMail, type SendOutcome } from './transport.js';
