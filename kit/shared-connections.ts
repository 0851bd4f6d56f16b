// The tests' and benchmarks' own @kubernetes/client-node clients, on one connection each.
//
// client-node 2.0.1 builds a new undici Agent for every request (its https.Agent path is cached,
// the undici one is not), so each call opens a fresh TLS connection, and the Agents with their
// sockets linger until GC: a profiling run counted 2,001 TLS sockets for 2,000 calls. A test that
// creates thousands of nodes would measure its own client's connection churn. Here a KubeConfig
// reuses one dispatcher, with the HTTP/2 settings of the watcher's own client (src/kube/client.ts).
import type * as k8s from '@kubernetes/client-node';
import { Agent } from 'undici';
import { H2_OPTIONS } from '../src/kube/client.ts';

const SHARED = Symbol('veneer.sharedConnections');

type Cluster = k8s.Cluster | null;
type AgentOptions = Parameters<k8s.KubeConfig['createDispatcherOptions']>[1];
interface DispatcherFactory {
  createDispatcher(cluster: Cluster, agentOptions: AgentOptions): unknown;
}

/** Makes `kc` reuse one dispatcher for all its calls (proxied clusters keep the client's own). Idempotent. */
export function shareConnections(kc: k8s.KubeConfig): k8s.KubeConfig {
  const factory = kc as unknown as DispatcherFactory & { [SHARED]?: true };
  if (factory[SHARED]) return kc;
  factory[SHARED] = true;
  const clientDispatcher = factory.createDispatcher.bind(kc);
  let shared: unknown;
  factory.createDispatcher = (cluster, agentOptions) => {
    const options = kc.createDispatcherOptions(cluster, agentOptions);
    if (options.type !== 'agent') return clientDispatcher(cluster, agentOptions);
    shared ??= new Agent({ connect: options.connect, h2Options: H2_OPTIONS });
    return shared;
  };
  return kc;
}
