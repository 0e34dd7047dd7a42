// The audit log: who changed what, when, and the values before and after, written in the change's
// own transaction; listed with filters and keyset pages; purged after the shop's retention.

export {
  type Actor, apiKeyActor, type AuditEntry, type AuditFilter, auditPurge, type AuditRecord, changedFields, listAuditLog, recordAudit, redactAuditValues,
  staffActor,
} from './audit-log.js';
