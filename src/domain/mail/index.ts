// E-mails to customers (issue 36): a shop's SMTP settings, the templates, the queue the outbox
// fills (one e-mail per event and customer), consent (signed unsubscribe links) and suppressions.
export { forgetMailRecipient } from './erasure.js';
export { readUnsubscribeToken, setMailConsent, unsubscribeByToken, unsubscribeToken, unsubscribeUrl } from './consent.js';
export { composeMail, type MailDeps, type MailPreview, mailVariables, type MailTestResult, previewMail, sendTestMail, testShopMail } from './messages.js';
export { listCustomerMail, type MailRecord, purgeOldMail } from './history.js';
export { getMailPreferences, liftMailSuppression, type MailPreferences, updateMailPreferences } from './preferences.js';
export { listMailTemplates, type MailTemplate, resetMailTemplate, setMailTemplate } from './shop-templates.js';
export {
  claimMail, type ClaimedMail, listMailSuppressions, type MailSuppression, queueMail, recordMailFailed, recordMailsSent, recordMailSkipped,
  recordRecipientRefused, returnMail, type SentMail, shopsWithDueMail,
} from './queue.js';
export { mailQueueStats } from './queue-stats.js';
export { getMailSettings, type MailSettings, type MailSettingsInput, mailSettingsInputSchema, type OpenMailSettings, openMailSettings, updateMailSettings } from './settings.js';
export { escapeHtml, formatPoints, formatShopDate, MAIL_KINDS, type MailKind, renderMail } from './templates.js';
export { createMailTransport, type MailTransport, type OutgoingMail, type SendOutcome } from './transport.js';
