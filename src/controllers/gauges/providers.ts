// Karpenter's cloud provider as the NodeClaims show it (spec.nodeClassRef.group), so that a
// provider whose keys the watcher does not know, or a karpenterProvider setting the NodeClaims
// contradict, is never a silent guess: a warning logged once per provider, and
// veneer_nodewatcher_karpenter_provider_nodeclaims{provider, matches_setting} at every scrape.
// The nodes concerned are recorded with basis approximate by the engine (chooseProvider).
import type { Logger } from 'pino';
import {
  KNOWN_PROVIDERS,
  MAX_UNKNOWN_GROUPS,
  providerCensus,
  type EngineSettings,
  type NodeClaimView,
  type ProviderCensus,
} from '../../engine/index.ts';
import type { Metrics } from '../../metrics.ts';

interface ProviderWatchOptions {
  settings: EngineSettings;
  /** The NodeClaim cache's live count by group. */
  groups: ReadonlyMap<string, number>;
  metrics: Metrics;
  log: Logger;
}

export class ProviderWatch {
  private readonly o: ProviderWatchOptions;
  /** What has been logged already: `known:<provider>`, `unknown:<group>`, `more-unknown`. */
  private readonly said = new Set<string>();
  private unknownGroupsSaid = 0;

  constructor(o: ProviderWatchOptions) {
    this.o = o;
    o.metrics.atScrape.providers = () => {
      for (const c of this.census().nodeClaims)
        o.metrics.providerNodeClaims.set(
          { provider: c.provider, matches_setting: String(c.matchesSetting) },
          c.nodeClaims,
        );
    };
  }

  private get known() {
    return this.o.settings.knownProviders ?? KNOWN_PROVIDERS;
  }

  census(): ProviderCensus {
    return providerCensus(this.o.settings.provider, this.known, this.o.groups);
  }

  /** Every new or changed NodeClaim: says once per provider how its nodes are judged. */
  seen(claim: NodeClaimView): void {
    const group = claim.nodeClassGroup;
    if (group === undefined) return;
    const { log } = this.o;
    const setting = this.o.settings.provider;
    const settingName = setting === 'auto' ? 'auto' : setting.name;
    const provider = this.known.find((p) => p.group === group);
    if (provider === undefined) {
      if (this.said.has(`unknown:${group}`)) return;
      // Groups are whatever the cluster's NodeClaims name: a bounded number is named.
      if (this.unknownGroupsSaid >= MAX_UNKNOWN_GROUPS) {
        if (!this.said.has('more-unknown'))
          log.warn(
            { karpenterProvider: settingName },
            `more than ${MAX_UNKNOWN_GROUPS} unknown nodeClassRef groups; no more are logged (veneer_nodewatcher_karpenter_provider_nodeclaims{provider="unknown"} counts them all)`,
          );
        this.said.add('more-unknown');
        return;
      }
      this.said.add(`unknown:${group}`);
      this.unknownGroupsSaid++;
      log.warn(
        { karpenterProvider: settingName, group, known: this.known.map((p) => p.group) },
        `NodeClaims name spec.nodeClassRef.group ${group}, a cloud provider the watcher does not know: which keys Karpenter compares overlays with is unknown, so their nodes are recorded with basis approximate`,
      );
      return;
    }
    if (this.said.has(`known:${provider.name}`)) return;
    this.said.add(`known:${provider.name}`);
    if (setting === 'auto' || setting.name === provider.name) {
      log.info(
        { karpenterProvider: settingName, provider: provider.name, group },
        `NodeClaims of the ${provider.name} provider (${group}): their nodes are judged with its keys`,
      );
    } else {
      log.warn(
        { karpenterProvider: settingName, provider: provider.name, group },
        `karpenterProvider is ${setting.name}, but NodeClaims belong to ${provider.name} (spec.nodeClassRef.group ${group}): their nodes are judged with ${setting.name}'s keys and recorded with basis approximate; set karpenterProvider to auto or ${provider.name}`,
      );
    }
  }
}
