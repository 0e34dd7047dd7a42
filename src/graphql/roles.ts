import { getOperationAST, GraphQLError } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import { roleAllows, type StaffRole } from '../domain/staff/index.js';
import type { GraphQLContext } from './builder.js';
import { rootFieldNames } from './selections.js';

/**
 * The least staff role each root field of the admin schema needs (docs/console.md "Roles" is this
 * table; test/staff-roles.test.ts fails when a root field has no entry, or the docs differ). API
 * keys are machines' and keep every right. viewer: every read but keys and people; support: the
 * customer's side (points with a reason, codes, tokens, redemptions, referrals); program_manager:
 * the program (rules, rewards, tiers, settings, webhooks, the Shopify connection); owner: people and keys.
 */
export const LEAST_ROLE: Readonly<Record<string, StaffRole>> = {
  'Query.activities': 'viewer',
  'Query.apiKeys': 'owner',
  // Its before and after values hold people's e-mails and keys' prefixes, which only owners read.
  'Query.auditLog': 'owner',
  'Query.customer': 'viewer',
  'Query.customers': 'viewer',
  // Everything held on a customer: support answers their requests.
  'Query.customerDataExport': 'support',
  'Query.customerSearch': 'viewer',
  'Query.discountCodeCheck': 'viewer',
  'Query.earningRules': 'viewer',
  'Query.order': 'viewer',
  'Query.pointsRedemptions': 'viewer',
  'Query.shop': 'viewer',
  'Query.shopMailSettings': 'viewer',
  'Query.mailTemplates': 'viewer',
  // Renders what a viewer may read already (the customer's address and balance, the templates).
  'Query.mailPreview': 'viewer',
  'Query.shopReferralSettings': 'viewer',
  'Query.staffMembers': 'owner',
  'Query.tiers': 'viewer',
  'Query.webhookDeliveries': 'viewer',
  'Query.webhookDelivery': 'viewer',
  'Query.webhookSubscriptions': 'viewer',
  'Query.webhookTopics': 'viewer',
  'Mutation.actionReport': 'support',
  'Mutation.apiKeyCreate': 'owner',
  'Mutation.apiKeyRevoke': 'owner',
  'Mutation.customerAccessTokenCreate': 'support',
  'Mutation.customerAccessTokensRevoke': 'support',
  // Cannot be undone.
  'Mutation.customerErase': 'owner',
  'Mutation.customerTierOverride': 'support',
  'Mutation.customerTierOverrideClear': 'support',
  'Mutation.customerUpsert': 'support',
  // The customer's side: support acts on a customer's request.
  'Mutation.customerMailPreferencesUpdate': 'support',
  'Mutation.discountCodeCancel': 'support',
  'Mutation.earningRuleCreate': 'program_manager',
  'Mutation.earningRuleDelete': 'program_manager',
  'Mutation.earningRuleUpdate': 'program_manager',
  'Mutation.orderUpsert': 'program_manager',
  'Mutation.pointsAdd': 'support',
  'Mutation.pointsRedeem': 'support',
  'Mutation.pointsRedemptionCreate': 'program_manager',
  'Mutation.pointsRedemptionDelete': 'program_manager',
  'Mutation.pointsRedemptionUpdate': 'program_manager',
  'Mutation.pointsSet': 'support',
  'Mutation.pointsSubtract': 'support',
  'Mutation.referralCodeCreate': 'support',
  'Mutation.referralRegister': 'support',
  // The whole shop goes (after a grace period): people and keys are the owner's, and so is this.
  'Mutation.shopDeletionCancel': 'owner',
  'Mutation.shopDeletionRequest': 'owner',
  'Mutation.shopMailSettingsUpdate': 'program_manager',
  'Mutation.shopMailTest': 'program_manager',
  'Mutation.mailTemplateUpdate': 'program_manager',
  'Mutation.mailTemplateReset': 'program_manager',
  'Mutation.mailSuppressionLift': 'program_manager',
  'Mutation.shopReferralSettingsUpdate': 'program_manager',
  'Mutation.shopSettingsUpdate': 'program_manager',
  'Mutation.shopifyAdminConnect': 'program_manager',
  'Mutation.shopifyAdminDisconnect': 'program_manager',
  'Mutation.shopifySettingsUpdate': 'program_manager',
  'Mutation.shopifyWebhookRetry': 'program_manager',
  'Mutation.staffInvite': 'owner',
  'Mutation.staffPasswordChange': 'viewer',
  'Mutation.staffPasswordResetLink': 'owner',
  'Mutation.staffRemove': 'owner',
  'Mutation.staffRoleUpdate': 'owner',
  'Mutation.tierCreate': 'program_manager',
  'Mutation.tierDelete': 'program_manager',
  'Mutation.tierUpdate': 'program_manager',
  'Mutation.webhookDeliveryReplay': 'program_manager',
  'Mutation.webhookSubscriptionCreate': 'program_manager',
  'Mutation.webhookSubscriptionDelete': 'program_manager',
  'Mutation.webhookSubscriptionEnable': 'program_manager',
  'Mutation.webhookSubscriptionRotateSecret': 'program_manager',
  'Mutation.webhookSubscriptionUpdate': 'program_manager',
  'Subscription.customerPointsChanged': 'viewer',
  'Subscription.events': 'viewer',
};

const ROOT_TYPES = { query: 'Query', mutation: 'Mutation', subscription: 'Subscription' } as const;

/**
 * A staff session's operation runs only when its role reaches every root field it names (aliases
 * and fragments followed); otherwise nothing runs and it is answered 403, code `forbidden`. A
 * field missing from the table is refused to every person: a new field stays closed until listed.
 */
export function useStaffRoles(): Plugin<GraphQLContext> {
  const check = (payload: {
    args: { document: Parameters<typeof getOperationAST>[0]; operationName?: string | null | undefined; contextValue: GraphQLContext };
    setResultAndStopExecution(result: { errors: GraphQLError[] }): void;
  }) => {
    const { document, operationName, contextValue } = payload.args;
    const staff = contextValue.staff;
    if (!staff) return;
    const operation = getOperationAST(document, operationName);
    if (!operation) return;
    const root = ROOT_TYPES[operation.operation];
    for (const field of rootFieldNames(document, operationName)) {
      if (field.startsWith('__')) continue;
      const least = LEAST_ROLE[`${root}.${field}`];
      if (least && roleAllows(staff.role, least)) continue;
      const needs = least ? `it needs ${least}` : 'it is open to API keys only';
      payload.setResultAndStopExecution({
        errors: [new GraphQLError(`your role (${staff.role}) may not run ${field}: ${needs}`, { extensions: { code: 'forbidden', http: { status: 403 } } })],
      });
      return;
    }
  };
  return { onExecute: check, onSubscribe: check };
}
