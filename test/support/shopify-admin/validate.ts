// Parse, validate and coerce as Shopify does before running anything, in Shopify's error shape:
// HTTP 200 with `{ errors: [{ message, locations, path, extensions: { code } }] }`. Messages are
// graphql-js's except for an unknown field, which reads as Shopify's (graphql-ruby) does, since
// that is the error a renamed field produces; codes follow graphql-ruby's names.
import {
  BREAK,
  getVariableValues,
  GraphQLError,
  parse,
  print,
  specifiedRules,
  validate,
  visit,
  Kind,
  type ASTNode,
  type DocumentNode,
  type GraphQLFormattedError,
  type GraphQLSchema,
  type OperationDefinitionNode,
  type ValidationRule,
} from 'graphql';

const RUBY_CODES: Record<string, string> = {
  FieldsOnCorrectTypeRule: 'undefinedField',
  KnownArgumentNamesRule: 'argumentNotAccepted',
  ProvidedRequiredArgumentsRule: 'missingRequiredArguments',
  ValuesOfCorrectTypeRule: 'argumentLiteralsIncompatible',
  VariablesInAllowedPositionRule: 'variableMismatch',
  KnownTypeNamesRule: 'undefinedType',
  NoUndefinedVariablesRule: 'variableNotDefined',
  NoUnusedVariablesRule: 'variableNotUsed',
  ScalarLeafsRule: 'selectionMismatch',
  KnownFragmentNamesRule: 'undefinedFragment',
  NoUnusedFragmentsRule: 'useAndDefineFragment',
  UniqueArgumentNamesRule: 'argumentNotUnique',
  UniqueVariableNamesRule: 'variableNotUnique',
  VariablesAreInputTypesRule: 'variableRequiresValidType',
  KnownDirectivesRule: 'undefinedDirective',
  FragmentsOnCompositeTypesRule: 'fragmentOnNonCompositeType',
  PossibleFragmentSpreadsRule: 'fragmentSpreadOnImpossibleType',
  OverlappingFieldsCanBeMergedRule: 'fieldConflict',
  LoneAnonymousOperationRule: 'anonymousOperationNotAlone',
  UniqueOperationNamesRule: 'operationNotUnique',
};

/** graphql-ruby's path: the operation ("mutation Name"), then fields by alias, arguments, input fields. */
function pathTo(document: DocumentNode, target: ASTNode | undefined): string[] | undefined {
  if (!target) return undefined;
  let path: string[] | undefined;
  visit(document, {
    enter(node, _key, _parent, _path, ancestors) {
      if (node !== target) return undefined;
      path = [...ancestors, node]
        .filter((entry): entry is ASTNode => !Array.isArray(entry) && typeof (entry as ASTNode).kind === 'string')
        .flatMap((entry) => {
          switch (entry.kind) {
            case Kind.OPERATION_DEFINITION:
              return [entry.name ? `${entry.operation} ${entry.name.value}` : entry.operation];
            case Kind.FRAGMENT_DEFINITION:
              return [`fragment ${entry.name.value}`];
            case Kind.FIELD:
              return [entry.alias?.value ?? entry.name.value];
            case Kind.INLINE_FRAGMENT:
              return [entry.typeCondition ? `... on ${entry.typeCondition.name.value}` : '...'];
            case Kind.ARGUMENT:
            case Kind.OBJECT_FIELD:
              return [entry.name.value];
            default:
              return [];
          }
        });
      return BREAK;
    },
  });
  return path;
}

function shape(error: GraphQLError, code: string, document: DocumentNode): GraphQLFormattedError {
  const extensions: Record<string, unknown> = { code };
  let message = error.message;
  const unknownField = /^Cannot query field "(\w+)" on type "(\w+)"/.exec(message);
  if (code === 'undefinedField' && unknownField) {
    message = `Field '${unknownField[1]}' doesn't exist on type '${unknownField[2]}'`;
    Object.assign(extensions, { typeName: unknownField[2], fieldName: unknownField[1] });
  }
  return {
    message,
    ...(error.locations ? { locations: error.locations } : {}),
    ...(pathTo(document, error.nodes?.[0]) ? { path: pathTo(document, error.nodes?.[0]) } : {}),
    extensions,
  };
}

export type Checked =
  | { ok: true; document: DocumentNode; operation: OperationDefinitionNode; variables: Record<string, unknown> }
  | { ok: false; errors: GraphQLFormattedError[] };

type Parsed = { document: DocumentNode } | { errors: GraphQLFormattedError[] };

// A service sends the same few documents thousands of times (the benchmark: 10,000 creations);
// validating each text once keeps the stand-in from being what limits the rate.
const parsedCache = new Map<string, Parsed>();

export function parseAndValidate(schema: GraphQLSchema, query: string): Parsed {
  let parsed = parsedCache.get(query);
  if (!parsed) {
    parsed = parseAndValidateUncached(schema, query);
    if (parsedCache.size >= 1000) parsedCache.clear();
    parsedCache.set(query, parsed);
  }
  return parsed;
}

function parseAndValidateUncached(schema: GraphQLSchema, query: string): Parsed {
  let document: DocumentNode;
  try {
    document = parse(query);
  } catch (error) {
    const syntax = error as GraphQLError;
    return { errors: [{ message: syntax.message, ...(syntax.locations ? { locations: syntax.locations } : {}), extensions: { code: 'parseError' } }] };
  }
  if (validate(schema, document).length === 0) return { document };
  // Rule by rule only on failure, to name each error's rule (graphql-js does not say which fired).
  const errors = (specifiedRules as readonly ValidationRule[]).flatMap((rule) =>
    validate(schema, document, [rule]).map((error) => shape(error, RUBY_CODES[rule.name] ?? 'validationError', document)),
  );
  return { errors };
}

/** Validates the document, picks the operation and coerces the variables. */
export function check(schema: GraphQLSchema, query: string, variables: unknown, operationName: string | null | undefined): Checked {
  const parsed = parseAndValidate(schema, query);
  if ('errors' in parsed) return { ok: false, errors: parsed.errors };
  const operations = parsed.document.definitions.filter((d): d is OperationDefinitionNode => d.kind === Kind.OPERATION_DEFINITION);
  const operation = operationName ? operations.find((op) => op.name?.value === operationName) : operations.length === 1 ? operations[0] : undefined;
  if (!operation) {
    const message = operationName ? `No operation named "${operationName}"` : 'An operation name is required';
    return { ok: false, errors: [{ message, extensions: { code: 'operationNotFound' } }] };
  }
  if (variables != null && (typeof variables !== 'object' || Array.isArray(variables))) {
    return { ok: false, errors: [{ message: 'Variables must be an object', extensions: { code: 'INVALID_VARIABLE' } }] };
  }
  const inputs = (variables ?? {}) as Record<string, unknown>;
  const coerced = getVariableValues(schema, operation.variableDefinitions ?? [], inputs, { maxErrors: 50 });
  if (coerced.errors) {
    return {
      ok: false,
      errors: coerced.errors.map((error) => {
        const definition = error.nodes?.find((node) => node.kind === Kind.VARIABLE_DEFINITION);
        const name = definition?.kind === Kind.VARIABLE_DEFINITION ? definition.variable.name.value : '?';
        const type = definition?.kind === Kind.VARIABLE_DEFINITION ? print(definition.type) : '?';
        const at = /got invalid value .*? at "[^".]+\.?([^"]*)"; /s.exec(error.message)?.[1];
        const explanation = error.message.replace(/^Variable "\$\w+" (got invalid value .*?; )?/s, '');
        return {
          message: `Variable $${name} of type ${type} was provided invalid value${at ? ` for ${at}` : ''}`,
          locations: error.locations ?? [],
          extensions: {
            code: 'INVALID_VARIABLE',
            value: inputs[name] ?? null,
            problems: [{ path: at ? at.split(/[.[\]]+/).filter(Boolean) : [], explanation }],
          },
        };
      }),
    };
  }
  return { ok: true, document: parsed.document, operation, variables: coerced.coerced };
}
