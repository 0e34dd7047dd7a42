import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/**
 * A self-signed certificate for the tests' HTTPS webhook receivers (localhost, 127.0.0.1). The
 * service trusts it the way an operator would trust a private CA: through NODE_EXTRA_CA_CERTS,
 * which Node reads at process start; set here, before vitest forks its workers, it reaches every
 * test process and every server or worker process they spawn.
 */
export default function setup(): () => void {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'loyalty-test-tls-'));
  const key = path.join(dir, 'receiver-key.pem');
  const cert = path.join(dir, 'receiver-cert.pem');
  execFileSync('openssl', [
    'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-sha256', '-days', '2',
    '-keyout', key, '-out', cert,
    '-subj', '/CN=localhost',
    '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1',
    '-addext', 'basicConstraints=critical,CA:TRUE',
  ], { stdio: 'ignore' });
  process.env.TEST_TLS_KEY = key;
  process.env.TEST_TLS_CERT = cert;
  process.env.NODE_EXTRA_CA_CERTS = cert;
  return () => rmSync(dir, { recursive: true, force: true });
}
