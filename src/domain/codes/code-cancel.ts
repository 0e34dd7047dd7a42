import { z } from 'zod';
import type { DB } from '../../db/database.js';
import { inTransaction } from '../../db/transaction.js';
import { type Actor, recordAudit } from '../audit/index.js';
import { NotFoundError, parseInput } from '../kernel/index.js';
import type { Activity } from '../ledger/index.js';
import { codeNotIssued, endCode, lockCode, returnCodePoints } from './code-states.js';
import { type DiscountCode, toDiscountCode } from './discount-codes.js';

/** A code as a path or an input names it. */
export const discountCodeParamSchema = z.string().trim().min(1).max(255);
/** The body of a cancellation; it may be left out (no points back). */
export const codeCancelSchema = z.strictObject({
  returnPoints: z.boolean().default(false).meta({ description: 'Give the code\'s points back to its customer (a `refund_redemption` ledger entry)' }),
});
// Built once: zod compiles an object schema on its first parse.
const codeParams = z.object({ code: discountCodeParamSchema });

export type CodeCancelled = { discountCode: DiscountCode; activity: Activity | null };

/**
 * The shop cancels an issued code, and with `returnPoints` gives its points back: the new state,
 * the ledger entry and their events commit together, under the code's row lock, so a racing order,
 * expiry or second cancellation finds the code ended (409 code_not_issued) and returns nothing twice.
 */
export async function cancelDiscountCode(db: DB, shopId: string, code: unknown, input: unknown, actor?: Actor): Promise<CodeCancelled> {
  const { code: text } = parseInput(codeParams, { code });
  const { returnPoints } = parseInput(codeCancelSchema, input ?? {});
  return inTransaction(db, async (trx) => {
    const row = await lockCode(trx, shopId, { code: text });
    if (!row) throw new NotFoundError('code_not_found', `this shop has no discount code ${text}`, ['code']);
    const ended = await endCode(trx, row, { status: 'cancelled', at: new Date() });
    if (!ended.changed) throw codeNotIssued(row);
    const returned = returnPoints ? await returnCodePoints(trx, ended.row, `Code ${row.code} cancelled`) : undefined;
    const discountCode = returned?.code ?? toDiscountCode(ended.row);
    await recordAudit(trx, shopId, actor, {
      kind: 'discountCode.cancel',
      subject: { type: 'discountCode', id: row.id },
      before: { code: row.code, status: toDiscountCode(row).status },
      after: { code: row.code, status: discountCode.status, pointsReturned: returned?.activity ? returned.activity.newPoints - returned.activity.oldPoints : 0 },
    });
    return { discountCode, activity: returned?.activity ?? null };
  });
}
