// Frozen in time: a migration never imports from src/, so later code changes cannot rewrite history.
import { type Kysely, sql } from 'kysely';

/**
 * tier_upgrade (run by the tiers triggers on every write that moves a tier's metric) was planned
 * afresh at every call: its statements take the ids as an array, which a generic plan counts as
 * ten rows and a custom one as the one or few it holds, so PostgreSQL's plan cache judged the
 * generic plan dearer and kept planning. Planning its three statements cost about 1.7 ms a call,
 * more than the rest of a points/add's statement (pg_stat_statements on the scale bench's shops);
 * the generic plan probes the same indexes. The setting is the function's own: no other
 * statement's plans change. A later `create or replace` of the function drops it unless it says it
 * again; test/query-plans.test.ts checks the plans the trigger runs.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter function tier_upgrade(text[], timestamptz) set plan_cache_mode = force_generic_plan`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`alter function tier_upgrade(text[], timestamptz) reset plan_cache_mode`.execute(db);
}
