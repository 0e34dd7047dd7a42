import type { LookupAddress, LookupOptions } from 'node:dns';
import { lookup as dnsLookup } from 'node:dns/promises';
import ipaddr from 'ipaddr.js';
import type { UrlVerdict } from '../domain/webhooks/index.js';

/**
 * Where webhooks may be sent (DESIGN.md "Webhooks", SSRF). One policy serves both moments that
 * matter: a subscription's callback URL is checked when it is saved (this issue), and every
 * address actually dialled is checked again at connect time (`lookup`, for the delivery worker),
 * because DNS may answer differently by then (rebinding).
 */

/** dns.lookup(host, { all: true })-like: every address a name resolves to. Injectable for tests. */
export type Resolver = (hostname: string) => Promise<Array<{ address: string; family: number }>>;

export type UrlPolicyOptions = {
  /** WEBHOOK_ALLOWED_HOSTS entries: host names, IP addresses or CIDR ranges. Empty in production. */
  allowedHosts?: readonly string[];
  resolve?: Resolver;
  /** A resolution slower than this counts as "does not resolve" when saving a URL. */
  resolveTimeoutMs?: number;
};

const systemResolver: Resolver = (hostname) => dnsLookup(hostname, { all: true, verbatim: true });

// Names that only ever mean "this machine" or "this private network".
const INTERNAL_NAME = /(^|\.)(localhost|internal)$/;

const REFUSED = {
  scheme: 'callbackUrl must use https',
  internalName:
    'callbackUrl must not point at localhost or an internal host name (a server run for tests or a local demo can allow such hosts with its WEBHOOK_ALLOWED_HOSTS setting)',
  credentials: 'callbackUrl must not carry a user name or password',
  // The resolved address is deliberately not named: it would disclose internal DNS to the caller.
  privateAddress: 'callbackUrl must not point at a private, loopback, link-local or reserved address',
};

type Cidr = [ipaddr.IPv4 | ipaddr.IPv6, number];

/** Splits WEBHOOK_ALLOWED_HOSTS entries into names and address ranges; throws on a malformed one. */
export function parseAllowedHosts(entries: readonly string[]): { names: Set<string>; ranges: Cidr[] } {
  const names = new Set<string>();
  const ranges: Cidr[] = [];
  for (const raw of entries) {
    const entry = raw.trim().toLowerCase().replace(/^\[(.*)\]$/, '$1');
    if (!entry) continue;
    if (ipaddr.isValidCIDR(entry)) {
      ranges.push(ipaddr.parseCIDR(entry));
    } else if (ipaddr.isValid(entry)) {
      const address = unwrap(ipaddr.parse(entry));
      ranges.push([address, address.kind() === 'ipv4' ? 32 : 128]);
    } else if (/^[a-z0-9_-]+(\.[a-z0-9_-]+)*\.?$/.test(entry)) {
      names.add(entry.replace(/\.$/, ''));
    } else {
      throw new Error(`not a host name, IP address or CIDR range: "${raw}"`);
    }
  }
  return { names, ranges };
}

/**
 * ::/96, the deprecated IPv4-compatible form (RFC 4291): `::127.0.0.1` is `::7f00:1`, which ipaddr.js
 * calls unicast although a stack may route it to the IPv4 inside. Never a real public endpoint, so
 * refused whatever IPv4 it embeds (NAT64's 64:ff9b::/96 and 64:ff9b:1::/48 are refused as rfc6052).
 */
function isIpv4Compatible(address: ipaddr.IPv4 | ipaddr.IPv6): boolean {
  return address.kind() === 'ipv6' && (address as ipaddr.IPv6).parts.slice(0, 6).every((part) => part === 0);
}

function unwrap(address: ipaddr.IPv4 | ipaddr.IPv6): ipaddr.IPv4 | ipaddr.IPv6 {
  return address.kind() === 'ipv6' && (address as ipaddr.IPv6).isIPv4MappedAddress()
    ? (address as ipaddr.IPv6).toIPv4Address()
    : address;
}

export class UrlPolicy {
  private readonly allowed: ReturnType<typeof parseAllowedHosts>;
  private readonly resolve: Resolver;
  private readonly resolveTimeoutMs: number;

  constructor(options: UrlPolicyOptions = {}) {
    this.allowed = parseAllowedHosts(options.allowedHosts ?? []);
    this.resolve = options.resolve ?? systemResolver;
    this.resolveTimeoutMs = options.resolveTimeoutMs ?? 3_000;
  }

  /**
   * Whether `address` may be dialled: public unicast (IPv4-mapped IPv6 judged as the IPv4 inside),
   * or inside an allowed range. Anything else (loopback, RFC 1918, CGNAT, link-local and so cloud
   * metadata, unique-local, IPv4-compatible, NAT64, 6to4, multicast, reserved) is refused.
   */
  isAllowedAddress(address: string): boolean {
    if (!ipaddr.isValid(address)) return false;
    const parsed = ipaddr.parse(address);
    if (isIpv4Compatible(parsed)) return false;
    const ip = unwrap(parsed);
    // Same-kind guard first: ipaddr.js only matches an IPv4 against IPv4 ranges (IPv6 likewise).
    if (this.allowed.ranges.some(([net, bits]) => net.kind() === ip.kind() && (ip as ipaddr.IPv4).match(net as ipaddr.IPv4, bits))) {
      return true;
    }
    return ip.range() === 'unicast';
  }

  /**
   * Checks a callback URL before it is saved: https only, no internal names, no non-public IP
   * literal, no name resolving to a non-public address. A name that does not resolve (yet) is
   * accepted; the connect-time check (`lookup`) is the one that guards the actual request.
   */
  async checkCallbackUrl(raw: string): Promise<UrlVerdict> {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      return { ok: false, reason: 'callbackUrl is not a valid absolute URL' };
    }
    if (url.protocol !== 'https:') return { ok: false, reason: REFUSED.scheme };
    // Credentials in the URL would be sent to the receiver and shown back in every listing.
    if (url.username || url.password) return { ok: false, reason: REFUSED.credentials };
    const host = hostOf(url);
    if (!host) return { ok: false, reason: 'callbackUrl has no host' };
    if (this.allowed.names.has(host)) return { ok: true, url };
    if (ipaddr.isValid(host)) {
      return this.isAllowedAddress(host) ? { ok: true, url } : { ok: false, reason: REFUSED.privateAddress };
    }
    if (INTERNAL_NAME.test(host)) return { ok: false, reason: REFUSED.internalName };
    const addresses = await this.resolveWithin(host);
    if (addresses.some((a) => !this.isAllowedAddress(a.address))) return { ok: false, reason: REFUSED.privateAddress };
    return { ok: true, url };
  }

  /**
   * A `lookup` for net/tls/http(s) `request` options: resolves like dns.lookup, then refuses the
   * connection when any address is not allowed, so the socket only ever reaches a checked address.
   * Node never calls `lookup` for an IP-literal host: run checkCallbackUrl before each attempt too.
   */
  readonly lookup = (
    hostname: string,
    options: LookupOptions,
    callback: (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void,
  ): void => {
    const all = options.all === true;
    const host = hostname.toLowerCase().replace(/\.$/, '');
    this.resolve(host).then(
      (addresses) => {
        const byName = this.allowed.names.has(host);
        if (addresses.length === 0 || (!byName && addresses.some((a) => !this.isAllowedAddress(a.address)))) {
          const err: NodeJS.ErrnoException = new Error(
            addresses.length ? `${REFUSED.privateAddress} (${hostname})` : `${hostname} did not resolve`,
          );
          err.code = addresses.length ? 'EWEBHOOKBLOCKED' : 'ENOTFOUND';
          callback(err, all ? [] : '', undefined);
          return;
        }
        if (all) callback(null, addresses);
        else callback(null, addresses[0]!.address, addresses[0]!.family);
      },
      (err: NodeJS.ErrnoException) => callback(err, all ? [] : '', undefined),
    );
  };

  private async resolveWithin(host: string): Promise<Array<{ address: string }>> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<[]>((resolve) => {
      timer = setTimeout(() => resolve([]), this.resolveTimeoutMs);
    });
    try {
      return await Promise.race([this.resolve(host).catch(() => []), timeout]);
    } finally {
      clearTimeout(timer);
    }
  }
}

/** The URL's host in the form the checks compare: lowercase, no IPv6 brackets, no trailing dot. */
function hostOf(url: URL): string {
  return url.hostname.toLowerCase().replace(/^\[(.*)\]$/, '$1').replace(/\.+$/, '');
}
