/**
 * What the domain asks of the key that keeps secrets at rest (webhook signing secrets, a shop's
 * Shopify secret); the cipher and where its key comes from are src/webhooks/secret-box.ts's.
 */
export type SecretBox = {
  /** Encrypts `plaintext`, bound to `context` (the owning row's id) so it cannot be moved to another row. */
  seal(plaintext: string, context: string): string;
  open(sealed: string, context: string): string;
};
