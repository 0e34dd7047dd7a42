// Frozen in time: a migration never imports from src/, so later code changes cannot rewrite history.
import { type Kysely, sql } from 'kysely';

/**
 * insight_day_start (migration 041) was a SQL function that PostgreSQL cannot inline (it reads
 * tables), and such a function's body is planned again at every call: a 90-day insights query
 * calls it about fifteen times, 0.1 ms of planning each. In PL/pgSQL its statement is planned once
 * per connection. Same body, same answers.
 */
const BODY = `
      select case when s.timezone_days_from is null or at >= s.timezone_days_from
          then date_trunc('day', at at time zone s.timezone) at time zone s.timezone
          else (select case when at < p.carried_until then p.carried_from else date_trunc('day', at at time zone p.timezone) at time zone p.timezone end
            from shop_timezones p where p.shop_id = s.id and p.since <= at order by p.since desc limit 1)
        end
      from shops s where s.id = shop`;

export async function up(db: Kysely<any>): Promise<void> {
  await sql.raw(`
    create or replace function insight_day_start(shop text, at timestamptz) returns timestamptz language plpgsql stable as $$
    begin
      return (${BODY});
    end $$`).execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql.raw(`create or replace function insight_day_start(shop text, at timestamptz) returns timestamptz language sql stable as $$${BODY}$$`).execute(db);
}
