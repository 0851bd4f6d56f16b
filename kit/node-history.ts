// Every version of every Node (and the first sight of every NodeClaim) as a watch delivers them,
// with the time this process saw each: what shows a record was written once and never changed by
// the writes that came after it (Karpenter's registration), and how long each launch took.
import * as k8s from '@kubernetes/client-node';
import { readStory } from '../src/engine/index.ts';
import type { DecisionStory } from '../src/engine/record.ts';

export interface NodeVersion {
  type: string;
  resourceVersion: string;
  seenAt: number;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  taints: string[];
  owners: string[];
  finalizers: string[];
  providerID?: string;
}

/** The record's story in a node version (or a Node's metadata), when it has one. */
export const storyOf = (v: { annotations?: Record<string, string> } | undefined): DecisionStory | undefined =>
  readStory(v?.annotations?.['veneer.io/overlay-decision']);

interface Watched {
  metadata?: {
    name?: string;
    resourceVersion?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    ownerReferences?: { kind: string; name: string }[];
    finalizers?: string[];
  };
  spec?: { taints?: { key: string; effect: string }[]; providerID?: string };
  status?: { providerID?: string };
}

export interface ClaimSeen {
  name: string;
  seenAt: number;
  launchedAt?: number;
}

export class History {
  readonly nodes = new Map<string, NodeVersion[]>();
  /** NodeClaim name -> when first seen, and when first seen with status.providerID. */
  readonly claims = new Map<string, ClaimSeen>();
  private readonly claimByProvider = new Map<string, string>();
  private readonly stops: (() => void)[] = [];
  private stopped = false;

  private readonly kc: k8s.KubeConfig;

  constructor(kc: k8s.KubeConfig) {
    this.kc = kc;
  }

  async start(): Promise<void> {
    await this.follow('/api/v1/nodes', (type, o) => {
      const m = o.metadata ?? {};
      const versions = this.nodes.get(m.name ?? '') ?? [];
      versions.push({
        type,
        resourceVersion: m.resourceVersion ?? '',
        seenAt: Date.now(),
        labels: m.labels ?? {},
        annotations: m.annotations ?? {},
        taints: (o.spec?.taints ?? []).map((t) => `${t.key}:${t.effect}`),
        owners: (m.ownerReferences ?? []).map((r) => `${r.kind}/${r.name}`),
        finalizers: m.finalizers ?? [],
        ...(o.spec?.providerID ? { providerID: o.spec.providerID } : {}),
      });
      this.nodes.set(m.name ?? '', versions);
    });
    await this.follow('/apis/karpenter.sh/v1/nodeclaims', (_type, o) => {
      const name = o.metadata?.name ?? '';
      const c = this.claims.get(name) ?? { name, seenAt: Date.now() };
      if (c.launchedAt === undefined && o.status?.providerID) {
        c.launchedAt = Date.now();
        this.claimByProvider.set(o.status.providerID, name);
      }
      this.claims.set(name, c);
    });
  }

  /** When this process first saw the node. */
  firstSeenAt(node: string): number | undefined {
    return this.nodes.get(node)?.[0]?.seenAt;
  }

  /**
   * When this process first saw the node with a record (the label `influenced`), and whether a
   * later version carried another record: other `veneer.io/*` labels or another decision annotation.
   */
  recordOf(node: string, influenced = 'veneer.io/overlay-influenced'): { at: number; changed: boolean } | undefined {
    const versions = this.nodes.get(node) ?? [];
    const first = versions.findIndex((v) => v.labels[influenced] !== undefined);
    if (first < 0) return undefined;
    const recordIn = (v: NodeVersion) =>
      JSON.stringify([
        Object.entries(v.labels)
          .filter(([k]) => k.startsWith('veneer.io/'))
          .sort(),
        v.annotations['veneer.io/overlay-decision'] ?? null,
      ]);
    const record = recordIn(versions[first]!);
    return {
      at: versions[first]!.seenAt,
      changed: versions.slice(first + 1).some((v) => v.type !== 'DELETED' && recordIn(v) !== record),
    };
  }

  /**
   * The NodeClaim of a node: named by the node's hostname label where the provider does so (KWOK),
   * else the one whose providerID the node carries (AWS, where nodes are named by their private DNS).
   */
  claimOf(node: NodeVersion): ClaimSeen | undefined {
    const byName = this.claims.get(node.labels['kubernetes.io/hostname'] ?? '');
    if (byName) return byName;
    const name = node.providerID === undefined ? undefined : this.claimByProvider.get(node.providerID);
    return name === undefined ? undefined : this.claims.get(name);
  }

  /** A watch from now on, resumed from the last resourceVersion if the apiserver ends it. */
  private async follow(path: string, onEvent: (type: string, o: Watched) => void): Promise<void> {
    let rv: string | undefined;
    const open = async (): Promise<void> => {
      const req = await new k8s.Watch(this.kc).watch(
        path,
        { allowWatchBookmarks: true, ...(rv ? { resourceVersion: rv } : {}) },
        (type: string, o: Watched) => {
          rv = o.metadata?.resourceVersion ?? rv;
          if (type !== 'BOOKMARK') onEvent(type, o);
        },
        () => {
          if (!this.stopped) setTimeout(() => void open(), 100);
        },
      );
      this.stops.push(() => req.abort());
    };
    await open();
  }

  stop(): void {
    this.stopped = true;
    for (const s of this.stops.splice(0)) s();
  }
}

export function quantiles(values: number[]): string {
  if (values.length === 0) return 'n/a';
  const sorted = [...values].sort((a, b) => a - b);
  const q = (p: number) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;
  return `p50 ${q(0.5)} ms, p95 ${q(0.95)} ms, max ${sorted.at(-1)} ms (n=${sorted.length})`;
}
