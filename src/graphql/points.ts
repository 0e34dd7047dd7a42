import type { Customer as CustomerShape } from '../domain/customers/index.js';
import { type Activity as ActivityShape, changePoints, type PointsOperation } from '../domain/ledger/index.js';
import { ValidationError } from '../domain/kernel/index.js';
import { Activity } from './activity.js';
import { actorOf, builder } from './builder.js';
import { Customer } from './customer.js';
import { UserError, type UserErrorShape, withUserErrors } from './user-errors.js';

const PointsChangeInput = builder.inputType('PointsChangeInput', {
  fields: (t) => ({
    customerIdentifier: t.string({ description: 'Shop customer id or e-mail.' }),
    amount: t.int(),
    description: t.string({ required: false, description: 'What the customer sees of the change (on the storefront too).' }),
    note: t.string({ required: false, description: 'The shop\'s internal reason, never on the storefront; required when a person (a staff session) makes the change.' }),
  }),
});

type PointsPayloadShape = { activity?: ActivityShape; customer?: CustomerShape; userErrors: UserErrorShape[] };

function pointsPayload(name: string) {
  return builder.objectRef<PointsPayloadShape>(name).implement({
    fields: (t) => ({
      activity: t.field({ type: Activity, nullable: true, resolve: (p) => p.activity ?? null }),
      customer: t.field({ type: Customer, nullable: true, resolve: (p) => p.customer ?? null }),
      userErrors: t.field({ type: [UserError], resolve: (p) => p.userErrors }),
    }),
  });
}

// The GraphQL twins of POST /points/add, /points/substract and /points/update.
const MUTATIONS: Array<[field: string, payload: string, op: PointsOperation, description: string]> = [
  ['pointsAdd', 'PointsAddPayload', 'add', 'Adds `amount` (>= 1) points.'],
  ['pointsSubtract', 'PointsSubtractPayload', 'subtract', 'Subtracts `amount` (>= 1) points; refused with insufficient_points beyond the balance.'],
  ['pointsSet', 'PointsSetPayload', 'set', 'Sets the balance to `amount` (>= 0), like REST /points/update.'],
];

for (const [field, payloadName, op, description] of MUTATIONS) {
  const payload = pointsPayload(payloadName);
  builder.mutationField(field, (t) =>
    t.field({
      type: payload,
      description,
      args: { input: t.arg({ type: PointsChangeInput, required: true }) },
      resolve: (_root, { input }, ctx) =>
        withUserErrors(async () => {
          // A person adjusts a balance with a reason (docs/console.md); a machine's change may go without.
          if (ctx.staff && !input.note?.trim()) {
            throw new ValidationError('a person\'s points change needs an internal reason in note', [{ path: 'note', message: 'required: why the balance changes' }]);
          }
          return changePoints(ctx.db, ctx.shop.id, op, input, actorOf(ctx));
        }),
    }),
  );
}
