// The few AWS calls the prices need, signed with Signature V4 and sent with fetch: EC2's Query
// protocol (XML answers) and the Price List's JSON protocol. Not the AWS SDK's service clients,
// whose EC2 client alone weighs more than the whole watcher's heap (docs/tuning.md); AWS's own
// signer, credential chain (environment, IRSA's web identity, EKS Pod Identity, instance
// metadata) and XML parser do the rest.
import { createHash, createHmac, type Hash, type Hmac } from 'node:crypto';
import { SignatureV4 } from '@smithy/signature-v4';
import { defaultProvider } from '@aws-sdk/credential-provider-node';
import { parseXML } from '@aws-sdk/xml-builder';
import type { AwsCredentialIdentityProvider, SourceData } from '@smithy/types';

/** SHA-256 and HMAC-SHA-256 as the signer wants them, from node:crypto. */
class Sha256 {
  private hash: Hash | Hmac;
  private readonly secret: string | Uint8Array | undefined;

  constructor(secret?: SourceData) {
    this.secret = secret === undefined ? undefined : bytes(secret);
    this.hash = this.secret === undefined ? createHash('sha256') : createHmac('sha256', this.secret);
  }

  update(data: SourceData): void {
    this.hash.update(bytes(data));
  }

  digest(): Promise<Uint8Array> {
    return Promise.resolve(new Uint8Array(this.hash.digest()));
  }

  reset(): void {
    this.hash = this.secret === undefined ? createHash('sha256') : createHmac('sha256', this.secret);
  }
}

function bytes(data: SourceData): string | Uint8Array {
  if (typeof data === 'string') return data;
  return ArrayBuffer.isView(data)
    ? new Uint8Array(data.buffer, data.byteOffset, data.byteLength)
    : new Uint8Array(data);
}

export class AwsError extends Error {
  readonly code: string;
  readonly status: number;
  constructor(service: string, status: number, code: string, message: string) {
    super(`${service}: ${code} (HTTP ${status}): ${message}`);
    this.code = code;
    this.status = status;
  }
}

/** The Pricing API has endpoints in a few regions only (Karpenter's pricing.go NewAPI). */
export function pricingRegion(region: string): string {
  if (region.startsWith('ap-')) return 'ap-south-1';
  if (region.startsWith('cn-')) return 'cn-northwest-1';
  if (region.startsWith('eu-')) return 'eu-central-1';
  return 'us-east-1';
}

const dnsSuffix = (region: string) => (region.startsWith('cn-') ? 'amazonaws.com.cn' : 'amazonaws.com');

export interface AwsClientOptions {
  region: string;
  /** AWS_ENDPOINT_URL_EC2, AWS_ENDPOINT_URL_PRICING and AWS_ENDPOINT_URL are read as the SDK reads them. */
  env?: Record<string, string | undefined>;
  credentials?: AwsCredentialIdentityProvider;
  maxAttempts?: number;
}

/** A parsed XML element: its children by name (a repeated child: an array), or its text. */
export type Xml = string | XmlElement;
export interface XmlElement {
  [name: string]: Xml | Xml[];
}

export interface AwsClient {
  /** One EC2 Query action; the answer's root element, parsed. */
  ec2(action: string, params: Record<string, string>, signal: AbortSignal): Promise<XmlElement>;
  /** One Price List action (AWSPriceListService.<action>); the JSON answer. */
  pricing(action: string, body: unknown, signal: AbortSignal): Promise<unknown>;
}

const RETRYABLE = new Set([
  'Throttling',
  'ThrottlingException',
  'RequestLimitExceeded',
  'InternalError',
  'InternalErrorException',
  'ServiceUnavailable',
  'Unavailable',
]);

/** One signed POST to an AWS API. */
interface SignedPost {
  readonly signer: SignatureV4;
  readonly url: URL;
  readonly headers: Record<string, string>;
  readonly body: string;
  readonly signal: AbortSignal;
  readonly maxAttempts: number;
  /** The error an answer that is not 2xx stands for. */
  readonly errorOf: (status: number, text: string) => AwsError;
}

/** Signs and sends one POST, retrying throttling, 5xx and network errors with back-off. */
async function signedPost(p: SignedPost): Promise<string> {
  const { url, body, signal } = p;
  for (let attempt = 1; ; attempt++) {
    const request = {
      method: 'POST',
      protocol: url.protocol,
      hostname: url.hostname,
      ...(url.port ? { port: Number(url.port) } : {}),
      path: url.pathname,
      query: {},
      headers: { host: url.host, ...p.headers },
      body,
    };
    const signed = await p.signer.sign(request);
    let failure: Error;
    try {
      const res = await fetch(url, { method: 'POST', headers: signed.headers as Record<string, string>, body, signal });
      const text = await res.text();
      if (res.ok) return text;
      const error = p.errorOf(res.status, text);
      if (res.status < 500 && !RETRYABLE.has(error.code)) throw error;
      failure = error;
    } catch (err) {
      if (signal.aborted || (err instanceof AwsError && err.status < 500 && !RETRYABLE.has(err.code))) throw err;
      failure = err as Error;
    }
    if (attempt >= p.maxAttempts) throw failure;
    await new Promise((resolve) => setTimeout(resolve, Math.min(100 * 2 ** attempt, 2000) * (0.5 + Math.random() / 2)));
  }
}

export function awsClient(o: AwsClientOptions): AwsClient {
  const env = o.env ?? process.env;
  const credentials = o.credentials ?? defaultProvider();
  const maxAttempts = o.maxAttempts ?? 3;
  const pricing = pricingRegion(o.region);
  const ec2Url = new URL(
    env.AWS_ENDPOINT_URL_EC2 ?? env.AWS_ENDPOINT_URL ?? `https://ec2.${o.region}.${dnsSuffix(o.region)}`,
  );
  const pricingUrl = new URL(
    env.AWS_ENDPOINT_URL_PRICING ?? env.AWS_ENDPOINT_URL ?? `https://api.pricing.${pricing}.${dnsSuffix(pricing)}`,
  );
  const signers = {
    ec2: new SignatureV4({ service: 'ec2', region: o.region, credentials, sha256: Sha256, applyChecksum: true }),
    pricing: new SignatureV4({ service: 'pricing', region: pricing, credentials, sha256: Sha256, applyChecksum: true }),
  };

  return {
    async ec2(action, params, signal) {
      const body = new URLSearchParams({ Action: action, Version: '2016-11-15', ...params }).toString();
      const text = await signedPost({
        signer: signers.ec2,
        url: ec2Url,
        headers: { 'content-type': 'application/x-www-form-urlencoded; charset=utf-8' },
        body,
        signal,
        maxAttempts,
        errorOf: (status, xml) => {
          const error = /<Code>([^<]*)<\/Code>[\s\S]*?<Message>([^<]*)<\/Message>/.exec(xml);
          return new AwsError('EC2', status, error?.[1] ?? 'Unknown', error?.[2] ?? xml.slice(0, 200));
        },
      });
      const parsed = parseXML(text) as Record<string, XmlElement>;
      const root = parsed[`${action}Response`];
      if (root === undefined) throw new AwsError('EC2', 200, 'UnexpectedAnswer', `no ${action}Response in the answer`);
      return root;
    },
    async pricing(action, request, signal) {
      const text = await signedPost({
        signer: signers.pricing,
        url: pricingUrl,
        headers: { 'content-type': 'application/x-amz-json-1.1', 'x-amz-target': `AWSPriceListService.${action}` },
        body: JSON.stringify(request),
        signal,
        maxAttempts,
        errorOf: (status, json) => {
          let answer: { __type?: string; message?: string; Message?: string } = {};
          try {
            answer = JSON.parse(json) as typeof answer;
          } catch {
            // not JSON: the status says enough
          }
          return new AwsError(
            'Pricing',
            status,
            answer.__type?.split('#').at(-1) ?? 'Unknown',
            answer.message ?? answer.Message ?? json.slice(0, 200),
          );
        },
      });
      return JSON.parse(text) as unknown;
    },
  };
}

/** The items of a parsed list element (`<set><item>..</item>...</set>`): none, one or many. */
export function items(list: Xml | Xml[] | undefined): XmlElement[] {
  if (list === undefined || typeof list === 'string' || Array.isArray(list)) return [];
  const item = list.item;
  const all = item === undefined ? [] : Array.isArray(item) ? item : [item];
  return all.filter((i): i is XmlElement => typeof i === 'object' && !Array.isArray(i));
}

/** A child element's text. */
export function text(node: XmlElement, name: string): string | undefined {
  const v = node[name];
  return typeof v === 'string' ? v : undefined;
}
