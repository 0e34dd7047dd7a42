// A storefront's "rewards" page over GraphQL: look up a customer, list the rewards they can
// redeem, redeem one, and print the discount code to apply at checkout.
//
//   LOYALTY_URL=http://127.0.0.1:3000 LOYALTY_API_KEY=lk_... \
//     node --import tsx examples/storefront.ts ada@example.com [rewardId]
//
// The customer is a shop customer id or an e-mail; without a rewardId the first redeemable reward
// is taken. The redemption carries an Idempotency-Key, so retrying it after a network error cannot
// spend the points twice.
import { randomUUID } from 'node:crypto';

const baseUrl = (process.env.LOYALTY_URL ?? 'http://127.0.0.1:3000').replace(/\/$/, '');
const apiKey = process.env.LOYALTY_API_KEY;
const [customerIdentifier, wantedReward] = process.argv.slice(2);
if (!apiKey || !customerIdentifier) {
  console.error('usage: LOYALTY_URL=… LOYALTY_API_KEY=lk_… node --import tsx examples/storefront.ts <customer id or e-mail> [rewardId]');
  process.exit(64);
}

type UserError = { code: string; field: string[] | null; message: string };

/** One GraphQL request; a transport or GraphQL error ends the program with its message. */
async function graphql<T>(query: string, variables: Record<string, unknown>, headers: Record<string, string> = {}): Promise<T> {
  const res = await fetch(`${baseUrl}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}`, ...headers },
    body: JSON.stringify({ query, variables }),
  });
  const body = (await res.json()) as { data?: T; errors?: Array<{ message: string; extensions?: { code?: string } }> };
  if (body.errors?.length) {
    const [error] = body.errors;
    throw new Error(`${res.status} ${error!.extensions?.code ?? 'error'}: ${error!.message}`);
  }
  return body.data!;
}

const CUSTOMER = `query Customer($identifier: String!) {
  customer(identifier: $identifier) { _id email points }
}`;

const REWARDS = `query Rewards($customer: String!, $after: String) {
  pointsRedemptions(customerIdentifier: $customer, first: 100, after: $after) {
    edges { node { _id name type exchangeType rewardValue discountValue applyVariants redeemable } }
    pageInfo { hasNextPage endCursor }
  }
}`;

const REDEEM = `mutation Redeem($input: PointsRedeemInput!) {
  pointsRedeem(input: $input) {
    discountCode { code type value expiresAt }
    customer { points }
    userErrors { code field message }
  }
}`;

type Reward = {
  _id: string;
  name: string;
  type: string;
  exchangeType: string;
  rewardValue: number;
  discountValue: number;
  applyVariants: string[];
  redeemable: boolean;
};

async function rewardsFor(customer: string): Promise<Reward[]> {
  const rewards: Reward[] = [];
  let after: string | null = null;
  do {
    const page: { pointsRedemptions: { edges: Array<{ node: Reward }>; pageInfo: { hasNextPage: boolean; endCursor: string | null } } } =
      await graphql(REWARDS, { customer, after });
    rewards.push(...page.pointsRedemptions.edges.map((e) => e.node));
    after = page.pointsRedemptions.pageInfo.hasNextPage ? page.pointsRedemptions.pageInfo.endCursor : null;
  } while (after);
  return rewards;
}

async function main(): Promise<number> {
  const { customer } = await graphql<{ customer: { _id: string; email: string; points: number } | null }>(CUSTOMER, {
    identifier: customerIdentifier,
  });
  if (!customer) {
    console.error(`No customer "${customerIdentifier}" in this shop.`);
    return 1;
  }
  console.log(`Customer ${customer.email}: ${customer.points} points`);

  const redeemable = (await rewardsFor(customerIdentifier!)).filter((r) => r.redeemable);
  if (redeemable.length === 0) {
    console.log('No reward is redeemable yet.');
    return 2;
  }
  console.log('Redeemable rewards:');
  for (const r of redeemable) console.log(`  ${r._id}  ${r.name} (${r.rewardValue} points, ${r.type} ${r.discountValue})`);

  const reward = wantedReward ? redeemable.find((r) => r._id === wantedReward) : redeemable[0];
  if (!reward) {
    console.error(`Reward ${wantedReward} is not among the redeemable ones.`);
    return 1;
  }
  // A fixed reward costs exactly rewardValue; a variable one takes multiples of it (we take one
  // step). A free product needs one of the variants on offer.
  const input = {
    customerIdentifier,
    rewardId: reward._id,
    pointsAmount: reward.rewardValue,
    ...(reward.type === 'free_product' ? { variantId: reward.applyVariants[0] } : {}),
  };
  const { pointsRedeem } = await graphql<{
    pointsRedeem: { discountCode: { code: string; type: string; value: number; expiresAt: string | null } | null; customer: { points: number } | null; userErrors: UserError[] };
  }>(REDEEM, { input }, { 'idempotency-key': randomUUID() });
  if (pointsRedeem.userErrors.length) {
    for (const e of pointsRedeem.userErrors) console.error(`Refused: ${e.code}: ${e.message}`);
    return 1;
  }
  const code = pointsRedeem.discountCode!;
  console.log(`Redeemed "${reward.name}"; ${pointsRedeem.customer!.points} points left.`);
  console.log(`Discount code: ${code.code}${code.expiresAt ? ` (expires ${code.expiresAt})` : ''}`);
  return 0;
}

main().then(
  (status) => process.exit(status),
  (err: Error) => {
    console.error(err.message);
    process.exit(1);
  },
);
