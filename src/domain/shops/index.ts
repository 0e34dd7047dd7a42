// Shops: a tenant, its API keys and how a request is told which shop it is. Everything else is a
// shop's; nothing here knows what a shop's program holds.

export {
  API_KEY_CACHE_TTL_MS, type ApiKeyInfo, type ApiKeyRef, authenticateApiKey, createApiKey, createShop, findShop, forgetApiKey, getShop,
  type Identity, listApiKeys, listShops, revokeApiKey, revokeApiKeyOnRequest, revokedApiKeys, type Shop,
} from './shops.js';
