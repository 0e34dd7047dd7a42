import { type AuditRecord as AuditRecordShape, listAuditLog } from '../domain/audit/index.js';
import { builder } from './builder.js';
import { forwardPageArgs, PAGE_ARGS, toConnection } from './connections.js';

const AuditActorKind = builder.enumType('AuditActorKind', { values: ['staff', 'api_key'] as const });

const AuditRecord = builder.objectRef<AuditRecordShape>('AuditRecord').implement({
  description: 'One change by a person or an API key (docs/console.md "Audit log").',
  fields: (t) => ({
    _id: t.exposeID('_id'),
    at: t.expose('at', { type: 'DateTime' }),
    actorKind: t.field({ type: AuditActorKind, resolve: (r) => r.actorKind }),
    actorId: t.exposeString('actorId', { description: 'The staff member\'s or the API key\'s id: the `actor` filter.' }),
    actorLabel: t.exposeString('actorLabel', { description: 'The person\'s e-mail or the key\'s prefix when the change was made; kept after they are removed.' }),
    kind: t.exposeString('kind', { description: '`<object>.<verb>`: earningRule.update, points.add, discountCode.cancel, tierOverride.set, staff.invite, apiKey.create, shopSettings.update, …' }),
    subjectType: t.exposeString('subjectType', { nullable: true }),
    subjectId: t.exposeString('subjectId', { nullable: true }),
    before: t.field({ type: 'JSON', nullable: true, description: 'The changed fields before (null for a creation); secrets never.', resolve: (r) => r.before }),
    after: t.field({ type: 'JSON', nullable: true, description: 'The changed fields after (null for a deletion); secrets never.', resolve: (r) => r.after }),
  }),
});

builder.queryFields((t) => ({
  auditLog: t.field({
    type: builder.connectionObject({ type: AuditRecord, name: 'AuditRecordConnection' }, { name: 'AuditRecordEdge' }),
    description: 'The shop\'s audit log, newest first, kept for its auditRetentionDays.',
    args: {
      ...PAGE_ARGS,
      actor: t.arg.id({ required: false, description: 'Only the changes of this staff member or API key (its actorId).' }),
      kind: t.arg.string({ required: false, description: 'Only changes of this kind, e.g. points.add.' }),
      from: t.arg({ type: 'DateTime', required: false, description: 'Changes at or after this time.' }),
      to: t.arg({ type: 'DateTime', required: false, description: 'Changes before this time.' }),
    },
    resolve: async (_root, args, ctx) => {
      const filter = { actor: args.actor == null ? null : String(args.actor), kind: args.kind, from: args.from, to: args.to };
      return toConnection(await listAuditLog(ctx.db, ctx.shop.id, filter, forwardPageArgs(args)));
    },
  }),
}));
