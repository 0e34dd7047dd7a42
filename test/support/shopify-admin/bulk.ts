// Bulk query operations: the query is validated like any other, run over whole connections, and its
// result written as Shopify's JSONL: one line per node of the top connection, and each node of a
// nested connection on a line of its own with `__parentId` (the flat output, groupObjects: false).
import { getNamedType, isObjectType, Kind, type DocumentNode, type OperationDefinitionNode } from 'graphql';
import { adminSchema } from './schema.ts';
import { parseAndValidate } from './validate.ts';

export function parseBulkQuery(query: string): { document: DocumentNode } | { error: string } {
  const parsed = parseAndValidate(adminSchema(), query);
  if ('errors' in parsed) return { error: `Invalid bulk query: ${parsed.errors.map((error) => error.message).join('; ')}` };
  const operation = parsed.document.definitions.find((d): d is OperationDefinitionNode => d.kind === Kind.OPERATION_DEFINITION);
  if (operation?.operation !== 'query') return { error: 'Invalid bulk query: bulk operations run queries only' };
  const roots = operation.selectionSet.selections.filter((selection) => selection.kind === Kind.FIELD);
  const queryRoot = adminSchema().getQueryType()!.getFields();
  const rootType = roots.length === 1 && roots[0]!.kind === Kind.FIELD ? getNamedType(queryRoot[roots[0]!.name.value]!.type) : undefined;
  if (!rootType || !isObjectType(rootType) || !rootType.name.endsWith('Connection')) {
    return { error: 'Invalid bulk query: Bulk queries must contain exactly one top-level connection field.' };
  }
  return parsed;
}

type Node = Record<string, unknown>;

const isConnectionValue = (value: unknown): value is { edges?: { node: Node }[]; nodes?: Node[] } =>
  typeof value === 'object' &&
  value !== null &&
  (Array.isArray((value as Node).edges) || Array.isArray((value as Node).nodes));

const nodesOf = (connection: { edges?: { node: Node }[]; nodes?: Node[] }) =>
  connection.nodes ?? (connection.edges ?? []).map((edge) => edge.node);

export function flattenBulkResult(
  data: unknown,
): { jsonl: string; objectCount: number; rootObjectCount: number } | { error: string } {
  const [top] = Object.values((data ?? {}) as Node);
  if (!isConnectionValue(top)) return { error: 'Invalid bulk query: no connection in the result' };
  const lines: string[] = [];
  const emit = (node: Node, parentId?: string): string | undefined => {
    const line: Node = {};
    const children: Node[][] = [];
    for (const [key, value] of Object.entries(node)) {
      if (isConnectionValue(value)) children.push(nodesOf(value));
      else line[key] = value;
    }
    if (parentId) line.__parentId = parentId;
    lines.push(JSON.stringify(line));
    if (children.length && typeof node.id !== 'string') {
      return "Invalid bulk query: The parent 'node' field for a nested connection must select the 'id' field.";
    }
    for (const child of children.flat()) {
      const error = emit(child, node.id as string);
      if (error) return error;
    }
    return undefined;
  };
  const roots = nodesOf(top);
  for (const root of roots) {
    const error = emit(root);
    if (error) return { error };
  }
  return { jsonl: lines.map((line) => `${line}\n`).join(''), objectCount: lines.length, rootObjectCount: roots.length };
}
