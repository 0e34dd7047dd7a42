import os from 'node:os';
import { connect } from './postgres.js';

/** One paragraph naming the date, machine and versions, printed above every run's figures. */
export async function describeMachine(databaseUrl: string): Promise<string> {
  const client = await connect(databaseUrl);
  let postgres: string;
  try {
    const { rows } = await client.query<{ server_version: string }>('show server_version');
    postgres = rows[0]!.server_version;
  } finally {
    await client.end();
  }
  const cpus = os.cpus();
  const load = os.loadavg().map((l) => l.toFixed(2)).join(' ');
  return [
    `Date:       ${new Date().toISOString()}`,
    `Machine:    ${cpus.length} cores (${cpus[0]?.model.trim() ?? 'unknown CPU'}), ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, ${os.platform()} ${os.release()}`,
    `Software:   Node ${process.version}, PostgreSQL ${postgres}`,
    `Load avg:   ${load} at start`,
    `Note:       the load generator (this process), the server (a child process) and PostgreSQL`,
    `            all share these ${cpus.length} cores, so every figure includes the others' CPU use.`,
  ].join('\n');
}
