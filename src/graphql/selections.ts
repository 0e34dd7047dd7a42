import { type DocumentNode, type FragmentDefinitionNode, getOperationAST, type GraphQLResolveInfo, Kind, type SelectionSetNode } from 'graphql';

type Fragments = Readonly<Record<string, FragmentDefinitionNode>>;

/**
 * The names of the fields the selection sets select at their own level, fragments followed (each
 * once on a path, so a cycle ends); aliases do not hide a field, and one repeated under several
 * aliases is listed once per occurrence.
 */
function fieldNames(sets: readonly SelectionSetNode[], fragments: Fragments): string[] {
  const names: string[] = [];
  const visit = (set: SelectionSetNode, seen: Set<string>) => {
    for (const selection of set.selections) {
      if (selection.kind === Kind.FIELD) names.push(selection.name.value);
      else if (selection.kind === Kind.INLINE_FRAGMENT) visit(selection.selectionSet, seen);
      else if (!seen.has(selection.name.value)) {
        const fragment = fragments[selection.name.value];
        if (fragment) visit(fragment.selectionSet, new Set([...seen, selection.name.value]));
      }
    }
  };
  for (const set of sets) visit(set, new Set());
  return names;
}

/** Root field names of the operation that will run (rate limits and roles judge by them). */
export function rootFieldNames(document: DocumentNode, operationName?: string | null): string[] {
  const operation = getOperationAST(document, operationName);
  if (!operation) return [];
  const fragments = Object.fromEntries(
    document.definitions.filter((d): d is FragmentDefinitionNode => d.kind === Kind.FRAGMENT_DEFINITION).map((d) => [d.name.value, d]),
  );
  return fieldNames([operation.selectionSet], fragments);
}

/** Whether the resolving field's own selection asks for any of `names` (a parent may then start their reads). */
export function selectsAny(info: GraphQLResolveInfo, names: readonly string[]): boolean {
  const sets = info.fieldNodes.flatMap((node) => (node.selectionSet ? [node.selectionSet] : []));
  return fieldNames(sets, info.fragments).some((name) => names.includes(name));
}
