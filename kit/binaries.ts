// Where the programs the kit runs are: scripts/control-plane.sh builds and caches them, and says
// where with --print-env.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..');

/** Each program scripts/control-plane.sh builds (scripts/builds/), by the variable its --print-env names it with. */
const BINARIES = {
  apiserver: 'VENEER_KUBE_APISERVER',
  /** kube-scheduler of the same release: it marks pending pods Unschedulable, which Karpenter provisions for. */
  kubeScheduler: 'VENEER_KUBE_SCHEDULER',
  etcd: 'VENEER_ETCD',
  /** The real node (kit/node/): a kubelet and kube-controller-manager of the apiserver's release, and the sandbox's pause. */
  kubelet: 'VENEER_KUBELET',
  kubeControllerManager: 'VENEER_KUBE_CONTROLLER_MANAGER',
  pause: 'VENEER_PAUSE',
  helm: 'VENEER_HELM',
  certManager: 'VENEER_CERT_MANAGER',
  /** cert-manager's CRDs, from the module version its controllers were built from. */
  certManagerCrds: 'VENEER_CERT_MANAGER_CRDS',
  promtool: 'VENEER_PROMTOOL',
  /** A real Prometheus of promtool's module, and prometheus-operator (its controller, config reloader and CRDs): test/_real-node/prometheus.test.ts. */
  prometheus: 'VENEER_PROMETHEUS',
  prometheusOperator: 'VENEER_PROMETHEUS_OPERATOR',
  prometheusConfigReloader: 'VENEER_PROMETHEUS_CONFIG_RELOADER',
  prometheusOperatorCrds: 'VENEER_PROMETHEUS_OPERATOR_CRDS',
  /** Lints the GitHub Actions workflows (.github/workflows/release.yml): test/packaging/release.test.ts. */
  actionlint: 'VENEER_ACTIONLINT',
  /** test/judges/aws-instance-keys: the label keys karpenter-provider-aws's own code defines. */
  awsInstanceKeys: 'VENEER_AWS_INSTANCE_KEYS',
  /** test/judges/oracle built on sigs.k8s.io/karpenter v1.14.3: Karpenter's own NodeOverlay controller and store, the decision engine's judge. */
  karpenterOracleV1_14_3: 'VENEER_KARPENTER_ORACLE_V1_14_3',
  /** The same judge built on sigs.k8s.io/karpenter v1.15.0. */
  karpenterOracleV1_15_0: 'VENEER_KARPENTER_ORACLE_V1_15_0',
  /** Real Karpenter with its KWOK cloud provider (sigs.k8s.io/karpenter/kwok), run by kit/karpenter.ts. */
  karpenterKwok: 'VENEER_KARPENTER_KWOK',
  /** Its CRDs, from the module version it was built from (kwok/charts/crds and the KWOKNodeClass). */
  karpenterKwokCrds: 'VENEER_KARPENTER_KWOK_CRDS',
  /** Real Karpenter with its AWS cloud provider (github.com/aws/karpenter-provider-aws/cmd/controller), run by kit/aws. */
  karpenterAws: 'VENEER_KARPENTER_AWS',
  /** Its CRDs (pkg/apis/crds of the same module version: EC2NodeClass, NodeClaim, NodePool, NodeOverlay, ...). */
  karpenterAwsCrds: 'VENEER_KARPENTER_AWS_CRDS',
  /** Its static on-demand price table (pkg/providers/pricing/zz_generated.pricing_aws.go), which it prices with under ISOLATED_VPC. */
  karpenterAwsPrices: 'VENEER_KARPENTER_AWS_PRICES',
  /** The python of the virtualenv that holds moto and boto3 (kit/aws/moto/requirements.txt). */
  motoPython: 'VENEER_MOTO_PYTHON',
} as const;

/** The cached path of one of the programs scripts/control-plane.sh builds; each is checked when asked for, as the demo builds only two. */
export function binary(name: keyof typeof BINARIES): string {
  const out = execFileSync('bash', [join(repoRoot, 'scripts', 'control-plane.sh'), '--print-env'], {
    encoding: 'utf8',
  });
  const env = new Map(
    out
      .trim()
      .split('\n')
      .map((l) => l.split('=', 2) as [string, string]),
  );
  const path = env.get(BINARIES[name]) ?? '';
  if (!existsSync(path))
    throw new Error(
      `${path || BINARIES[name]} is missing: run \`npm run control-plane\` to build the local control plane`,
    );
  return path;
}
