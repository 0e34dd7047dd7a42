import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { apiKeyActor } from '../domain/audit/index.js';
import { createSubscription, deleteSubscription, enableSubscription, getDelivery, listDeliveries, listSubscriptions, listWebhookTopics, requestReplay, rotateSigningSecret, updateSubscription, type WebhookSubscriptionDeps } from '../domain/webhooks/index.js';
import { emptyBodyIsNoBody } from './optional-body.js';

type WithId = { Params: { id: string } };

/** Webhook subscriptions (contract "Webhook subscriptions"), the topic catalog and deliveries. */
export function registerWebhookRoutes(app: FastifyInstance, deps: WebhookSubscriptionDeps): void {
  const { db } = deps;

  app.get('/webhooks/topics', async () => ({
    success: true,
    message: 'Webhook topics; subscribe to one, or to <group>/* for every topic of a group',
    topics: listWebhookTopics(),
  }));

  const create = async (request: FastifyRequest, reply: FastifyReply) => {
    const subscription = await createSubscription(deps, request.shop!.id, request.body, apiKeyActor(request.apiKey!));
    return reply.code(201).header('cache-control', 'no-store').send({ success: true, message: 'Webhook subscription created; keep the signing secret, it is shown only now', subscription });
  };
  app.post('/webhooks/subscriptions', create);
  // The contract's reference heading spells the create path in the singular.
  app.post('/webhooks/subscription', create);

  app.get('/webhooks/subscriptions', async (request) => {
    const page = await listSubscriptions(db, request.shop!.id);
    return { success: true, message: 'Webhook subscriptions, newest first', subscriptions: page.items.map((item) => item.node) };
  });

  app.put<WithId>('/webhooks/subscriptions/:id', async (request) => {
    const subscription = await updateSubscription(deps, request.shop!.id, request.params.id, request.body, apiKeyActor(request.apiKey!));
    return { success: true, message: 'Webhook subscription updated', subscription };
  });

  app.post<WithId>('/webhooks/subscriptions/:id/rotate-secret', { onRequest: emptyBodyIsNoBody }, async (request, reply) => {
    const subscription = await rotateSigningSecret(deps, request.shop!.id, request.params.id, request.body, apiKeyActor(request.apiKey!));
    return reply.code(201).header('cache-control', 'no-store').send({ success: true, message: 'Signing secret rotated; keep the new secret, it is shown only now', subscription });
  });

  app.post<WithId>('/webhooks/subscriptions/:id/enable', { onRequest: emptyBodyIsNoBody }, async (request) => {
    const subscription = await enableSubscription(db, request.shop!.id, request.params.id, apiKeyActor(request.apiKey!));
    return { success: true, message: 'Webhook subscription enabled; held deliveries are being sent', subscription };
  });

  app.delete<WithId>('/webhooks/subscriptions/:id', { onRequest: emptyBodyIsNoBody }, async (request) => {
    await deleteSubscription(db, request.shop!.id, request.params.id, apiKeyActor(request.apiKey!));
    return { success: true, message: 'Webhook subscription deleted; its delivery records are kept' };
  });

  app.get('/webhooks/deliveries', async (request) => ({
    success: true,
    message: 'Webhook deliveries, newest first',
    ...(await listDeliveries(db, request.shop!.id, request.query)),
  }));

  app.get<WithId>('/webhooks/deliveries/:id', async (request) => {
    const { payload, ...delivery } = await getDelivery(db, request.shop!.id, request.params.id);
    return { success: true, message: 'Webhook delivery with its attempts and payload', delivery: { ...delivery, payload: payload ? JSON.parse(payload) : null } };
  });

  app.post<WithId>('/webhooks/deliveries/:id/replay', { onRequest: emptyBodyIsNoBody }, async (request, reply) => {
    const delivery = await requestReplay(db, request.shop!.id, request.params.id, new Date(), apiKeyActor(request.apiKey!));
    return reply.code(202).send({ success: true, message: 'Replay accepted: a manual attempt is being made with the same webhook-id', delivery });
  });
}
