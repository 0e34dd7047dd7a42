import type { DocumentNode } from 'graphql';

/**
 * `make`'s value for each document object and operation name, made once. The parser caches hand
 * out the same document object for the same query text, so this is once per operation clients send.
 */
export function perOperation<T>(make: (document: DocumentNode, operationName: string | undefined) => T) {
  const byDocument = new WeakMap<DocumentNode, Map<string, T>>();
  return (document: DocumentNode, operationName: string | null | undefined): T => {
    let byName = byDocument.get(document);
    if (!byName) byDocument.set(document, (byName = new Map()));
    const key = operationName ?? '';
    let value = byName.get(key);
    if (value === undefined) byName.set(key, (value = make(document, operationName ?? undefined)));
    return value;
  };
}
