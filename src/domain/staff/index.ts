// Staff: the people who run a shop's program (accounts, their roles in shops, cookie sessions,
// one-time invite and reset links). API keys, for machines, stay in shops/.

export {
  changeStaffPassword, listStaff, removeStaff, signIn, signInEmail, type SignInResult, type StaffMember, updateStaffRole,
} from './accounts.js';
export {
  acceptStaffInvite, createStaffInvite, createStaffPasswordReset, INVITE_TTL_MS, RESET_TTL_MS, resetStaffPassword, type StaffLink,
  staffLinkUrl,
} from './links.js';
export { roleAllows, STAFF_ROLES, type StaffRole } from './roles.js';
export {
  csrfTokenMatches, csrfTokenOf, endedStaffSessions, endSession, type NewSession, purgeExpiredStaffRecords, SESSION_IDLE_MS, SESSION_MAX_MS, staffSession, type StaffSession,
} from './sessions.js';
