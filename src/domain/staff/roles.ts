import type { StaffRoleName } from '../../db/schema.js';

export type StaffRole = StaffRoleName;

/** From the least to the most trusted: each role may do what the ones before it may. */
export const STAFF_ROLES: readonly StaffRole[] = ['viewer', 'support', 'program_manager', 'owner'];

/** Whether `role` may do what needs at least `least`. */
export function roleAllows(role: StaffRole, least: StaffRole): boolean {
  return STAFF_ROLES.indexOf(role) >= STAFF_ROLES.indexOf(least);
}
