// Lists as the apiserver serves them: a page at a time, each page's continue token asking for the
// next, so that a list of thousands of nodes never has to be one response.
import type { KubeClient } from './client.ts';

export interface ListPage {
  items: unknown[];
  resourceVersion: string;
  continueToken: string | undefined;
}

/** Items per list page: a page of 500 real-size nodes is ~10 MB, of metadata ~3.5 MB. */
const LIST_PAGE_SIZE = 500;

/** A list response as the apiserver sends it. */
interface ListBody {
  metadata?: { resourceVersion?: string; continue?: string };
  items?: unknown[];
}

/** Pages of `path`'s list, as the apiserver serves them (`accept` may ask for metadata only). */
export function lister(
  client: KubeClient,
  path: string,
  o: { accept?: string; labelSelector?: string; fieldSelector?: string } = {},
): (continueToken: string | undefined) => Promise<ListPage> {
  return async (token) => {
    const body = await client.call<ListBody>('GET', path, {
      query: { limit: LIST_PAGE_SIZE, continue: token, labelSelector: o.labelSelector, fieldSelector: o.fieldSelector },
      ...(o.accept ? { accept: o.accept } : {}),
    });
    return {
      items: body.items ?? [],
      resourceVersion: body.metadata?.resourceVersion ?? '',
      continueToken: body.metadata?.continue || undefined,
    };
  };
}

/** Every item of `path`, page after page (a one-off read: caches list through a Reflector). */
export async function listAll(
  client: KubeClient,
  path: string,
  o: { fieldSelector?: string } = {},
): Promise<unknown[]> {
  const page = lister(client, path, o);
  const items: unknown[] = [];
  let token: string | undefined;
  do {
    const p = await page(token);
    items.push(...p.items);
    token = p.continueToken;
  } while (token);
  return items;
}
