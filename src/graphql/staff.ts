import { RuleViolationError } from '../domain/kernel/index.js';
import {
  changeStaffPassword, createStaffInvite, createStaffPasswordReset, listStaff, removeStaff, STAFF_ROLES, type StaffLink, staffLinkUrl,
  type StaffMember as StaffMemberShape, updateStaffRole,
} from '../domain/staff/index.js';
import { actorOf, builder, type GraphQLContext } from './builder.js';
import { markResponseSecret } from './no-store.js';
import { deletePayload, UserError, type UserErrorShape, withUserErrors } from './user-errors.js';

const StaffRole = builder.enumType('StaffRole', {
  description: 'What a person may do in the shop (docs/console.md "Roles"): each role may do what the ones before it may.',
  values: STAFF_ROLES,
});

const StaffMember = builder.objectRef<StaffMemberShape>('StaffMember').implement({
  description: 'A person who works in the shop\'s console. Never their password nor its hash.',
  fields: (t) => ({
    id: t.exposeID('staffId'),
    email: t.exposeString('email'),
    name: t.exposeString('name'),
    role: t.field({ type: StaffRole, resolve: (m) => m.role }),
    createdAt: t.expose('createdAt', { type: 'DateTime', description: 'When they joined the shop.' }),
  }),
});

builder.queryFields((t) => ({
  staffMembers: t.field({
    type: [StaffMember],
    description: 'The shop\'s people, owners first.',
    resolve: (_root, _args, ctx) => listStaff(ctx.db, ctx.shop.id),
  }),
}));

const StaffLinkPayload = builder.objectRef<{ link?: StaffLink & { url: string }; userErrors: UserErrorShape[] }>('StaffLinkPayload').implement({
  description: 'A one-time link: whoever holds it can use it once, until it expires. Hand it over privately.',
  fields: (t) => ({
    link: t.string({ nullable: true, description: 'The page to open (the token rides in the fragment, never sent to a server in a URL).', resolve: (p) => p.link?.url ?? null }),
    expiresAt: t.field({ type: 'DateTime', nullable: true, resolve: (p) => p.link?.expiresAt ?? null }),
    userErrors: t.field({ type: [UserError], resolve: (p) => p.userErrors }),
  }),
});

/** A link payload; its answer is a secret (no-store, never kept for an Idempotency-Key replay). */
function linkOf(ctx: GraphQLContext, kind: 'invite' | 'reset', make: () => Promise<StaffLink>) {
  return withUserErrors(async () => {
    const link = await make();
    markResponseSecret(ctx);
    return { link: { ...link, url: staffLinkUrl(ctx.linkBase, kind, link) } };
  });
}

const StaffInviteInput = builder.inputType('StaffInviteInput', {
  fields: (t) => ({ email: t.string(), role: t.field({ type: StaffRole }) }),
});
const StaffMemberInput = builder.inputType('StaffMemberInput', { fields: (t) => ({ staffId: t.id() }) });
const StaffRoleUpdateInput = builder.inputType('StaffRoleUpdateInput', {
  fields: (t) => ({ staffId: t.id(), role: t.field({ type: StaffRole }) }),
});
const StaffPasswordChangeInput = builder.inputType('StaffPasswordChangeInput', {
  fields: (t) => ({ currentPassword: t.string(), newPassword: t.string({ description: '10 to 256 characters.' }) }),
});

const StaffRoleUpdatePayload = builder.objectRef<{ member?: StaffMemberShape; userErrors: UserErrorShape[] }>('StaffRoleUpdatePayload').implement({
  fields: (t) => ({
    member: t.field({ type: StaffMember, nullable: true, resolve: (p) => p.member ?? null }),
    userErrors: t.field({ type: [UserError], resolve: (p) => p.userErrors }),
  }),
});
const StaffPasswordChangePayload = builder.objectRef<{ changed?: boolean; userErrors: UserErrorShape[] }>('StaffPasswordChangePayload').implement({
  fields: (t) => ({
    changed: t.boolean({ resolve: (p) => p.changed ?? false }),
    userErrors: t.field({ type: [UserError], resolve: (p) => p.userErrors }),
  }),
});

builder.mutationFields((t) => ({
  staffInvite: t.field({
    type: StaffLinkPayload,
    description: 'A one-time link (72 h) that makes the e-mail a member with the role. Not mailed yet: hand it over yourself.',
    args: { input: t.arg({ type: StaffInviteInput, required: true }) },
    resolve: (_root, { input }, ctx) => linkOf(ctx, 'invite', () => createStaffInvite(ctx.db, ctx.shop.id, input, ctx.now(), actorOf(ctx))),
  }),
  staffPasswordResetLink: t.field({
    type: StaffLinkPayload,
    description: 'A one-time link (1 h) with which the member sets a new password; their sessions then end.',
    args: { input: t.arg({ type: StaffMemberInput, required: true }) },
    resolve: (_root, { input }, ctx) => linkOf(ctx, 'reset', () => createStaffPasswordReset(ctx.db, ctx.shop.id, input, ctx.now(), actorOf(ctx))),
  }),
  staffRoleUpdate: t.field({
    type: StaffRoleUpdatePayload,
    description: 'A member\'s new role, from their next request. The last owner cannot be demoted (last_owner).',
    args: { input: t.arg({ type: StaffRoleUpdateInput, required: true }) },
    resolve: (_root, { input }, ctx) => withUserErrors(async () => ({ member: await updateStaffRole(ctx.db, ctx.shop.id, input, actorOf(ctx)) })),
  }),
  staffRemove: t.field({
    type: deletePayload('StaffRemovePayload', 'deletedStaffId'),
    description: 'Removes a member from the shop; their open sessions in it end at once. The last owner cannot be removed (last_owner).',
    args: { input: t.arg({ type: StaffMemberInput, required: true }) },
    resolve: (_root, { input }, ctx) => withUserErrors(async () => ({ deletedId: await removeStaff(ctx.db, ctx.shop.id, input, actorOf(ctx)) })),
  }),
  staffPasswordChange: t.field({
    type: StaffPasswordChangePayload,
    description: 'Changes the signed-in person\'s own password (the current one required); their other sessions end.',
    args: { input: t.arg({ type: StaffPasswordChangeInput, required: true }) },
    resolve: (_root, { input }, ctx) =>
      withUserErrors(async () => {
        const staff = ctx.staff;
        if (!staff) throw new RuleViolationError('staff_session_required', 'a person changes their own password, signed in; an API key has none');
        await changeStaffPassword(ctx.db, staff, input, ctx.now());
        return { changed: true };
      }),
  }),
}));
