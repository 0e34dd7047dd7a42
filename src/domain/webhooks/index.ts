// Webhooks: a shop's subscriptions and the record of every delivery and attempt; sending them is
// src/webhooks's, which takes due deliveries from here.

export {
  DELIVERY_STATUSES, deliveryListQuerySchema, fanOutEvents, getDelivery, listAttemptsOfDeliveries, listDeliveries,
  listDeliveriesPage, onDeliveriesDue, payloadsOfDeliveries, purgeDeliveriesCarrying, requestReplay, type WebhookDelivery,
  type WebhookDeliveryAttempt,
} from './webhook-deliveries.js';
export {
  createSubscription, deleteSubscription, enableSubscription, isSubscribableTopic, listSubscriptions,
  listWebhookTopics, rotateSigningSecret, secretRotationSchema, toWebhookSubscription, updateSubscription,
  type UrlVerdict, validSigningSecrets, type WebhookSubscription, webhookSubscriptionCreateSchema,
  type WebhookSubscriptionDeps, webhookSubscriptionUpdateSchema, type WebhookSubscriptionWithSecret,
} from './webhook-subscriptions.js';
