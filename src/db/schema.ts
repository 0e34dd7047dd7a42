import type { ColumnType, Generated, Insertable, Selectable } from 'kysely';

/** Columns the database fills in when a row is inserted. */
type Defaulted<T> = ColumnType<T, T | undefined, T>;

export interface ShopsTable {
  id: string;
  name: string;
  created_at: Defaulted<Date>;
}

export interface ApiKeysTable {
  id: string;
  shop_id: string;
  prefix: string;
  key_hash: string;
  created_at: Defaulted<Date>;
  revoked_at: Date | null;
}

export interface CustomersTable {
  id: string;
  shop_id: string;
  shopify_customer_id: string;
  email: string;
  birthday: string | null;
  points: Defaulted<number>;
  created_at: Defaulted<Date>;
  updated_at: Defaulted<Date>;
}

export interface ActivitiesTable {
  seq: Generated<number>;
  id: string;
  shop_id: string;
  customer_id: string;
  type: string;
  setting_type: string;
  description: string | null;
  note: string | null;
  old_points: number;
  new_points: number;
  created_at: Defaulted<Date>;
  updated_at: Defaulted<Date>;
}

export interface OutboxEventsTable {
  seq: Generated<number>;
  id: string;
  shop_id: string;
  type: string;
  data: ColumnType<unknown, string, string>;
  created_at: Defaulted<Date>;
}

export interface IdempotencyKeysTable {
  shop_id: string;
  key: string;
  request_hash: string;
  response_status: number | null;
  response_body: string | null;
  created_at: Defaulted<Date>;
  completed_at: Date | null;
}

export interface Database {
  shops: ShopsTable;
  api_keys: ApiKeysTable;
  customers: CustomersTable;
  activities: ActivitiesTable;
  outbox_events: OutboxEventsTable;
  idempotency_keys: IdempotencyKeysTable;
}

export type CustomerRow = Selectable<CustomersTable>;
export type ActivityRow = Selectable<ActivitiesTable>;
export type NewActivity = Insertable<ActivitiesTable>;
