// A STAND-IN for the AWS Price List API (GetProducts), on 127.0.0.1: moto, the local EC2, has no
// Pricing API, and the real one is out of reach by design. It speaks the real wire protocol
// (awsJson1_1, X-Amz-Target AWSPriceListService.GetProducts, PriceList as JSON strings, NextToken
// pages) and applies every TERM_MATCH filter to the products it holds, so a filter the watcher
// left out lets a decoy's price through. Its products are shaped like the Price List's own.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Product {
  instanceType: string;
  /** A price per hour, as the currency's string ("0.0960000000"). */
  price: string;
  currency?: 'USD' | 'CNY';
  productFamily?: string;
  /** Price List attributes over those of a Linux, shared-tenancy us-east-1 on-demand instance. */
  attributes?: Record<string, string>;
}

export interface GetProductsRequest {
  ServiceCode?: string;
  Filters?: { Field: string; Type: string; Value: string }[];
  MaxResults?: number;
  NextToken?: string;
}

export interface PricingStandIn {
  endpoint: string;
  requests: GetProductsRequest[];
  /** From now on: answer, fail every request with a 500, or never answer. */
  behave(mode: 'answer' | 'fail' | 'hang'): void;
  close(): Promise<void>;
}

const LINUX_SHARED = {
  operatingSystem: 'Linux',
  tenancy: 'Shared',
  preInstalledSw: 'NA',
  capacitystatus: 'Used',
  marketoption: 'OnDemand',
  regionCode: 'us-east-1',
  location: 'US East (N. Virginia)',
};

function priceListItem(p: Product, index: number): { json: string; fields: Record<string, string> } {
  const sku = `SKU${String(index).padStart(12, '0')}`;
  const productFamily = p.productFamily ?? 'Compute Instance';
  const attributes = {
    ...LINUX_SHARED,
    instanceType: p.instanceType,
    instanceFamily: 'General purpose',
    servicecode: 'AmazonEC2',
    usagetype: `BoxUsage:${p.instanceType}`,
    operation: 'RunInstances',
    ...p.attributes,
  };
  const offerTerm = `${sku}.JRTCKXETXF`;
  const item = {
    product: { productFamily, attributes, sku },
    serviceCode: 'AmazonEC2',
    terms: {
      OnDemand: {
        [offerTerm]: {
          priceDimensions: {
            [`${offerTerm}.6YS6EN2CT7`]: {
              unit: 'Hrs',
              endRange: 'Inf',
              description: `${p.price} per On Demand Linux ${p.instanceType} Instance Hour`,
              appliesTo: [],
              rateCode: `${offerTerm}.6YS6EN2CT7`,
              beginRange: '0',
              pricePerUnit: { [p.currency ?? 'USD']: p.price },
            },
          },
          sku,
          effectiveDate: '2026-11-01T00:00:00Z',
          offerTermCode: 'JRTCKXETXF',
          termAttributes: {},
        },
      },
    },
    version: '20261120000000',
    publicationDate: '2026-11-20T00:00:00Z',
  };
  return { json: JSON.stringify(item), fields: { ...attributes, productFamily, serviceCode: 'AmazonEC2' } };
}

/**
 * The Price List's products of an on-demand price table (type to USD per hour): metal types filed
 * as the Price List files them (dedicated, "Compute Instance (bare metal)"), the rest as Linux,
 * shared-tenancy instances of us-east-1.
 */
export function priceListOf(table: ReadonlyMap<string, number>): Product[] {
  return [...table].map(([instanceType, price]) => ({
    instanceType,
    price: price.toFixed(10),
    ...(instanceType.endsWith('.metal') || instanceType.includes('.metal-')
      ? { productFamily: 'Compute Instance (bare metal)', attributes: { tenancy: 'Dedicated' } }
      : {}),
  }));
}

export async function startPricingStandIn(products: readonly Product[]): Promise<PricingStandIn> {
  const items = products.map(priceListItem);
  const requests: GetProductsRequest[] = [];
  let mode: 'answer' | 'fail' | 'hang' = 'answer';
  const hanging = new Set<ServerResponse>();
  const reply = (res: ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/x-amz-json-1.1' });
    res.end(JSON.stringify(body));
  };
  const handle = (req: IncomingMessage, res: ServerResponse, body: string) => {
    // Not a signature check (the stand-in has no secret), but the scope a real endpoint would
    // check it against: signed for the Price List, in the region it has an endpoint in.
    if (
      !/^AWS4-HMAC-SHA256 Credential=[^/]+\/\d{8}\/[a-z0-9-]+\/pricing\/aws4_request, SignedHeaders=[^,]*x-amz-target[^,]*, Signature=[0-9a-f]{64}$/.test(
        req.headers.authorization ?? '',
      )
    ) {
      return reply(res, 403, {
        __type: 'MissingAuthenticationTokenException',
        message: `not signed for pricing: ${req.headers.authorization ?? 'no Authorization'}`,
      });
    }
    if (req.headers['x-amz-target'] !== 'AWSPriceListService.GetProducts')
      return reply(res, 400, {
        __type: 'UnknownOperationException',
        message: `${String(req.headers['x-amz-target'])} is not served here`,
      });
    const request = JSON.parse(body) as GetProductsRequest;
    requests.push(request);
    if (mode === 'hang') return void hanging.add(res);
    if (mode === 'fail')
      return reply(res, 500, { __type: 'InternalErrorException', Message: 'the stand-in was told to fail' });
    const matching = items.filter((i) =>
      (request.Filters ?? []).every((f) => f.Type !== 'TERM_MATCH' || i.fields[f.Field] === f.Value),
    );
    const from = Number(request.NextToken ?? 0);
    const size = request.MaxResults ?? 100;
    const page = matching.slice(from, from + size);
    reply(res, 200, {
      FormatVersion: 'aws_v1',
      PriceList: page.map((i) => i.json),
      ...(from + size < matching.length ? { NextToken: String(from + size) } : {}),
    });
  };
  const server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (body += c));
    req.on('end', () => handle(req, res, body));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    requests,
    behave: (m) => (mode = m),
    close: async () => {
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
