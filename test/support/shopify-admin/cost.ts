// Shopify's calculated query cost and its leaky bucket, after
// https://shopify.dev/docs/apps/build/apis/graphql-admin/rate-limits: scalars and enums cost 0,
// objects 1, a connection 2 plus `first` (or `last`) times the cost of one node, every mutation 10;
// the requested cost must be in the bucket before a query runs, and the difference to the actual
// cost (what came back) is refunded after. Approximate on purpose: union and interface selections
// are summed rather than maxed, which only over-charges.
import {
  getNamedType,
  isLeafType,
  isObjectType,
  isInterfaceType,
  valueFromASTUntyped,
  Kind,
  type FieldNode,
  type FragmentDefinitionNode,
  type GraphQLCompositeType,
  type GraphQLNamedType,
  type GraphQLSchema,
  type OperationDefinitionNode,
  type SelectionSetNode,
} from 'graphql';

export const MUTATION_COST = 10;
export const SINGLE_QUERY_MAX_COST = 1000;

export interface ThrottleStatus {
  maximumAvailable: number;
  currentlyAvailable: number;
  restoreRate: number;
}

export interface CostExtension {
  requestedQueryCost: number;
  actualQueryCost: number | null;
  throttleStatus: ThrottleStatus;
}

/** A store's bucket: refills continuously at `restoreRate` points a second, on the stand-in's clock. */
export class CostBucket {
  private available: number;
  private at: number;

  constructor(
    public maximumAvailable: number,
    public restoreRate: number,
    private readonly now: () => number,
  ) {
    this.available = maximumAvailable;
    this.at = now();
  }

  private refill(): void {
    const now = this.now();
    // A clock moved backwards (a test resetting it) restores nothing rather than draining the bucket.
    const elapsed = Math.max(0, now - this.at) / 1000;
    this.available = Math.min(this.maximumAvailable, this.available + elapsed * this.restoreRate);
    this.at = now;
  }

  /** Takes `cost` points if they are there; false (and nothing taken) if not. */
  take(cost: number): boolean {
    this.refill();
    if (cost > this.available) return false;
    this.available -= cost;
    return true;
  }

  refund(points: number): void {
    this.refill();
    this.available = Math.min(this.maximumAvailable, this.available + points);
  }

  /** Empties or sets the bucket, for tests that start throttled. */
  set(points: number): void {
    this.refill();
    this.available = Math.max(0, Math.min(this.maximumAvailable, points));
  }

  status(): ThrottleStatus {
    this.refill();
    return {
      maximumAvailable: this.maximumAvailable,
      currentlyAvailable: Math.floor(this.available),
      restoreRate: this.restoreRate,
    };
  }
}

interface CostContext {
  schema: GraphQLSchema;
  fragments: Map<string, FragmentDefinitionNode>;
  variables: Record<string, unknown>;
}

/**
 * The operation's cost. Without `data` it is the requested cost (connections at their `first`);
 * with the response's `data` it is the actual cost (connections at what they returned, null objects free).
 */
export function operationCost(
  schema: GraphQLSchema,
  operation: OperationDefinitionNode,
  fragments: Map<string, FragmentDefinitionNode>,
  variables: Record<string, unknown>,
  data?: unknown,
): number {
  if (operation.operation === 'mutation') {
    return collectFields(operation.selectionSet, { schema, fragments, variables }).size * MUTATION_COST;
  }
  const root = operation.operation === 'query' ? schema.getQueryType() : schema.getSubscriptionType();
  if (!root) return 0;
  return selectionCost(operation.selectionSet, root, { schema, fragments, variables }, data);
}

function collectFields(selectionSet: SelectionSetNode, ctx: CostContext, into = new Map<string, FieldNode[]>()) {
  for (const selection of selectionSet.selections) {
    if (selection.kind === Kind.FIELD) {
      const key = selection.alias?.value ?? selection.name.value;
      into.set(key, [...(into.get(key) ?? []), selection]);
    } else if (selection.kind === Kind.INLINE_FRAGMENT) {
      collectFields(selection.selectionSet, ctx, into);
    } else {
      const fragment = ctx.fragments.get(selection.name.value);
      if (fragment) collectFields(fragment.selectionSet, ctx, into);
    }
  }
  return into;
}

function fieldDefinition(parent: GraphQLCompositeType, name: string, schema: GraphQLSchema) {
  if (isObjectType(parent) || isInterfaceType(parent)) return parent.getFields()[name];
  // A union has no fields of its own: find the field on whichever member has it.
  for (const member of schema.getPossibleTypes(parent)) {
    const field = member.getFields()[name];
    if (field) return field;
  }
  return undefined;
}

const isConnection = (type: GraphQLNamedType) =>
  isObjectType(type) && type.name.endsWith('Connection') && ('edges' in type.getFields() || 'nodes' in type.getFields());

function selectionCost(
  selectionSet: SelectionSetNode,
  parent: GraphQLCompositeType,
  ctx: CostContext,
  data: unknown,
): number {
  let total = 0;
  for (const [key, nodes] of collectFields(selectionSet, ctx)) {
    const name = nodes[0]!.name.value;
    if (name.startsWith('__')) continue;
    const definition = fieldDefinition(parent, name, ctx.schema);
    if (!definition) continue;
    const type = getNamedType(definition.type);
    if (isLeafType(type)) continue;
    const value = data === undefined ? undefined : (data as Record<string, unknown> | null)?.[key];
    if (data !== undefined && (value === null || value === undefined)) continue;
    const subSelections = mergeSelections(nodes);
    if (isConnection(type)) {
      total += connectionCost(nodes[0]!, subSelections, type as GraphQLCompositeType, ctx, value, data !== undefined);
    } else {
      const sample = Array.isArray(value) ? value[0] : value;
      if (data !== undefined && Array.isArray(value) && value.length === 0) continue;
      total += 1 + selectionCost(subSelections, type as GraphQLCompositeType, ctx, sample);
    }
  }
  return total;
}

function mergeSelections(nodes: FieldNode[]): SelectionSetNode {
  return { kind: Kind.SELECTION_SET, selections: nodes.flatMap((node) => node.selectionSet?.selections ?? []) };
}

function connectionCost(
  field: FieldNode,
  selections: SelectionSetNode,
  connection: GraphQLCompositeType,
  ctx: CostContext,
  value: unknown,
  actual: boolean,
): number {
  const argument = (name: string) => {
    const node = field.arguments?.find((arg) => arg.name.value === name);
    return node ? valueFromASTUntyped(node.value, ctx.variables) : undefined;
  };
  const pageSize = Number(argument('first') ?? argument('last') ?? 0) || 0;
  const connectionFields = (connection as { getFields(): Record<string, { type: Parameters<typeof getNamedType>[0] }> }).getFields();
  let perNode = 0;
  let returned = 0;
  for (const [key, nodes] of collectFields(selections, ctx)) {
    const name = nodes[0]!.name.value;
    const sub = mergeSelections(nodes);
    const items = actual ? ((value as Record<string, unknown[]> | null)?.[key] ?? []) : [undefined];
    if (name === 'nodes') {
      const nodeType = getNamedType(connectionFields.nodes!.type) as GraphQLCompositeType;
      returned = Math.max(returned, items.length);
      perNode = Math.max(perNode, ...items.map((item) => 1 + selectionCost(sub, nodeType, ctx, item)));
    } else if (name === 'edges') {
      // The edge itself is free; its `node` is the object that costs.
      const edgeType = getNamedType(connectionFields.edges!.type) as GraphQLCompositeType;
      returned = Math.max(returned, items.length);
      perNode = Math.max(perNode, ...items.map((item) => selectionCost(sub, edgeType, ctx, item)));
    }
  }
  return 2 + (actual ? returned : pageSize) * perNode;
}
