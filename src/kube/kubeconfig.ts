// Where `serve` finds the apiserver and its credentials, in controller-runtime's order: the
// files in KUBECONFIG (merged, the first to set a name wins), else the pod's ServiceAccount,
// else ~/.kube/config. Tokens and certificates in files are read again as they rotate. `explain`
// and `report` find it here too: a CLI with an order of its own could read another cluster than
// the watcher beside it (a pod that also has a ~/.kube/config).
//
// Credentials from a plugin (`exec`, `auth-provider`: EKS' `aws eks get-token`, for example)
// are left to @kubernetes/client-node, imported only then: its plugin support is more than we
// want to own, and a pod never needs it.
import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { parse } from 'yaml';
import type { ClusterAccess, TlsMaterial } from './client.ts';

export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';
/** How often a rotating file is read again, as client-go re-reads a token file. */
export const REREAD_MS = 60_000;

type Fields = Record<string, unknown>;
interface Named {
  name?: string;
  [entry: string]: unknown;
}
interface KubeconfigDoc {
  clusters?: Named[];
  users?: Named[];
  contexts?: Named[];
  'current-context'?: string;
}

type Reader = () => Buffer;

/** A file read again at most every REREAD_MS; unchanged content keeps its Buffer, so identity says "unchanged". */
function fileReader(path: string, now: () => number): Reader {
  let value: Buffer | undefined;
  let readAt = -Infinity;
  return () => {
    if (now() - readAt >= REREAD_MS) {
      readAt = now();
      try {
        const fresh = readFileSync(path);
        if (!value?.equals(fresh)) value = fresh;
      } catch (err) {
        // Mid-rotation a file may be briefly missing: keep what was read before.
        if (!value) throw new Error(`cannot read ${path}: ${(err as Error).message}`, { cause: err });
      }
    }
    return value!;
  };
}

function tlsReader(
  parts: { ca?: Reader; cert?: Reader; key?: Reader },
  rejectUnauthorized: boolean,
  servername?: string,
): () => TlsMaterial {
  let current: TlsMaterial | undefined;
  return () => {
    const ca = parts.ca?.();
    const cert = parts.cert?.();
    const key = parts.key?.();
    if (!current || current.ca !== ca || current.cert !== cert || current.key !== key) {
      current = {
        rejectUnauthorized,
        ...(ca ? { ca } : {}),
        ...(cert ? { cert } : {}),
        ...(key ? { key } : {}),
        ...(servername ? { servername } : {}),
      };
    }
    return current;
  };
}

/** The pod's own ServiceAccount, as rest.InClusterConfig reads it. */
export function inClusterAccess(
  env: NodeJS.ProcessEnv,
  dir = SERVICE_ACCOUNT_DIR,
  now: () => number = Date.now,
): ClusterAccess {
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT;
  if (!host || !port)
    throw new Error('not in a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set');
  const token = fileReader(join(dir, 'token'), now);
  token();
  return {
    server: `https://${host.includes(':') ? `[${host}]` : host}:${port}`,
    tls: tlsReader({ ca: fileReader(join(dir, 'ca.crt'), now) }, true),
    authorization: async () => `Bearer ${token().toString('utf8').trim()}`,
  };
}

/** Merges kubeconfig files as kubectl does; relative paths are taken from the file that holds them. */
export function mergeKubeconfigs(files: { path: string; text: string }[]): KubeconfigDoc {
  const merged: Required<Pick<KubeconfigDoc, 'clusters' | 'users' | 'contexts'>> & KubeconfigDoc = {
    clusters: [],
    users: [],
    contexts: [],
  };
  for (const { path, text } of files) {
    const doc = (parse(text) ?? {}) as KubeconfigDoc;
    const base = dirname(resolve(path));
    merged['current-context'] ||= doc['current-context'];
    for (const list of ['clusters', 'users', 'contexts'] as const) {
      for (const entry of doc[list] ?? []) {
        if (merged[list].some((e) => e.name === entry.name)) continue;
        merged[list].push(list === 'contexts' ? entry : absolutePaths(entry, base));
      }
    }
  }
  return merged;
}

const PATH_FIELDS = ['certificate-authority', 'client-certificate', 'client-key', 'tokenFile'];

function absolutePaths(entry: Named, base: string): Named {
  const inner = (entry.cluster ?? entry.user ?? {}) as Fields;
  const fixed: Fields = { ...inner };
  for (const f of PATH_FIELDS)
    if (typeof inner[f] === 'string' && inner[f] && !isAbsolute(inner[f])) fixed[f] = join(base, inner[f]);
  return entry.cluster ? { ...entry, cluster: fixed } : { ...entry, user: fixed };
}

/** The access a merged kubeconfig's current context (or `context`) gives. */
export function kubeconfigAccess(doc: KubeconfigDoc, context?: string, now: () => number = Date.now): ClusterAccess {
  const contextName = context ?? doc['current-context'];
  if (!contextName) throw new Error('the kubeconfig has no current-context');
  const find = (list: 'clusters' | 'users' | 'contexts', name: unknown) => doc[list]?.find((e) => e.name === name);
  const ctx = find('contexts', contextName)?.context as Fields | undefined;
  if (!ctx) throw new Error(`the kubeconfig has no context ${JSON.stringify(contextName)}`);
  const cluster = find('clusters', ctx.cluster)?.cluster as Fields | undefined;
  if (!cluster || typeof cluster.server !== 'string')
    throw new Error(`the kubeconfig has no cluster ${JSON.stringify(ctx.cluster)} with a server`);
  const user = (ctx.user === undefined ? {} : (find('users', ctx.user)?.user as Fields | undefined)) ?? {};
  const proxyUrl = cluster['proxy-url'] as string | undefined;
  if (proxyUrl && !/^https?:/.test(proxyUrl))
    throw new Error(`proxy-url ${JSON.stringify(proxyUrl)}: only http and https proxies are supported`);
  if (user.as || user['as-groups'])
    throw new Error('impersonation (as, as-groups) in a kubeconfig is not supported by serve, explain or report');
  const source = (data: unknown, file: unknown): Reader | undefined => {
    if (typeof data === 'string' && data) {
      const bytes = Buffer.from(data, 'base64');
      return () => bytes;
    }
    return typeof file === 'string' && file ? fileReader(file, now) : undefined;
  };
  const tls = tlsReader(
    {
      ca: source(cluster['certificate-authority-data'], cluster['certificate-authority']),
      cert: source(user['client-certificate-data'], user['client-certificate']),
      key: source(user['client-key-data'], user['client-key']),
    },
    cluster['insecure-skip-tls-verify'] !== true,
    cluster['tls-server-name'] as string | undefined,
  );
  tls();
  return {
    server: cluster.server,
    ...(proxyUrl ? { proxyUrl } : {}),
    tls,
    authorization: authorization(user, doc, contextName, now),
  };
}

function authorization(
  user: Fields,
  doc: KubeconfigDoc,
  context: string,
  now: () => number,
): ClusterAccess['authorization'] {
  if (user.exec || user['auth-provider']) return pluginAuthorization(doc, context);
  if (typeof user.token === 'string' && user.token) {
    const header = `Bearer ${user.token}`;
    return async () => header;
  }
  if (typeof user.tokenFile === 'string' && user.tokenFile) {
    const token = fileReader(user.tokenFile, now);
    token();
    return async () => `Bearer ${token().toString('utf8').trim()}`;
  }
  if (typeof user.username === 'string' && typeof user.password === 'string') {
    const header = `Basic ${Buffer.from(`${user.username}:${user.password}`).toString('base64')}`;
    return async () => header;
  }
  return async () => undefined;
}

function pluginAuthorization(doc: KubeconfigDoc, context: string): ClusterAccess['authorization'] {
  const plugin = (async () => {
    const k8s = await import('@kubernetes/client-node');
    const kc = new k8s.KubeConfig();
    kc.loadFromString(JSON.stringify(doc));
    kc.setCurrentContext(context);
    return { k8s, kc };
  })();
  return async () => {
    const { k8s, kc } = await plugin;
    const ctx = new k8s.RequestContext(kc.getCurrentCluster()?.server ?? '', k8s.HttpMethod.GET);
    await kc.applySecurityAuthentication(ctx);
    const headers = ctx.getHeaders();
    return headers.Authorization ?? headers.authorization;
  };
}

/** What `serve` and the CLI's live reads connect with: KUBECONFIG's files, else the pod's ServiceAccount, else ~/.kube/config. */
export function loadClusterAccess(
  env: NodeJS.ProcessEnv = process.env,
  home = homedir(),
  serviceAccountDir = SERVICE_ACCOUNT_DIR,
): ClusterAccess {
  const fromFiles = (paths: string[]) =>
    kubeconfigAccess(mergeKubeconfigs(paths.map((path) => ({ path, text: readFileSync(path, 'utf8') }))));
  const listed = (env.KUBECONFIG ?? '').split(':').filter(Boolean);
  if (listed.length > 0) {
    const present = listed.filter((p) => existsSync(p));
    if (present.length === 0) throw new Error(`KUBECONFIG names no file that exists: ${env.KUBECONFIG}`);
    return fromFiles(present);
  }
  if (env.KUBERNETES_SERVICE_HOST) return inClusterAccess(env, serviceAccountDir);
  const homeConfig = join(home, '.kube', 'config');
  if (existsSync(homeConfig)) return fromFiles([homeConfig]);
  throw new Error('no cluster to talk to: set KUBECONFIG, run in a pod, or create ~/.kube/config');
}
