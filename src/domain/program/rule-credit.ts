import type { EarningRuleRow } from '../../db/schema.js';
import type { Trx } from '../../db/transaction.js';
import { RuleViolationError } from '../kernel/index.js';
import { writeBalanceChange } from '../ledger/index.js';

/** A rule's points credited to a customer (a sign-up, a custom action, a birthday): one ledger entry. */
export async function credit(trx: Trx, shopId: string, customerId: string, rule: EarningRuleRow, description: string) {
  const written = await writeBalanceChange(trx, shopId, { customerId }, {
    op: 'add',
    amount: rule.earn_point,
    type: 'earn_points',
    settingType: 'rule',
    description,
    note: null,
    topic: 'points/earned',
  });
  if (!written) throw new RuleViolationError('points_limit_exceeded', 'the balance is at its maximum', ['customerIdentifier']);
  return written;
}
