// The configuration files of the real node's parts, all under the node's own directory: containerd
// (its CRI plugin), the CNI bridge and the kubelet. The comments say what a setting works around.
import { join } from 'node:path';

export const POD_SUBNET = '10.88.0.0/16';
const POD_GATEWAY = '10.88.0.1';
/** A ULA range: pods' IPv6 addresses never leave the test's network namespace. */
export const POD_SUBNET_V6 = 'fd00:77::/64';
const POD_GATEWAY_V6 = 'fd00:77::1';

export function containerdConfig(dir: string, sandboxImage: string): string {
  return `version = 2
root = "${join(dir, 'containerd', 'root')}"
state = "${join(dir, 'containerd', 'state')}"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "${containerdSocket(dir)}"
[ttrpc]
  address = "${containerdSocket(dir)}.ttrpc"
[debug]
  address = "${join(dir, 'run', 'containerd-debug.sock')}"
[plugins."io.containerd.internal.v1.opt"]
  path = "${join(dir, 'containerd', 'opt')}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "${sandboxImage}"
  enable_selinux = false
  # The sandbox asks for oom_score_adj -998, which root without CAP_SYS_RESOURCE cannot set.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "${join(dir, 'cni', 'net.d')}"
`;
}

export const containerdSocket = (dir: string) => join(dir, 'run', 'containerd.sock');

/** `ipv6`: each pod gets an address of both families (host-local, one range set per family). */
export function cniConfig(dir: string, opts: { ipv6?: boolean } = {}): string {
  const v6 = opts.ipv6 === true;
  return JSON.stringify({
    cniVersion: '0.4.0',
    name: 'kit',
    plugins: [
      {
        type: 'bridge',
        bridge: 'cni0',
        isGateway: true,
        ipMasq: false,
        hairpinMode: true,
        ipam: {
          type: 'host-local',
          ranges: [
            [{ subnet: POD_SUBNET, gateway: POD_GATEWAY }],
            ...(v6 ? [[{ subnet: POD_SUBNET_V6, gateway: POD_GATEWAY_V6 }]] : []),
          ],
          routes: [{ dst: '0.0.0.0/0' }, ...(v6 ? [{ dst: '::/0' }] : [])],
          dataDir: join(dir, 'cni', 'ipam'),
        },
      },
    ],
  });
}

// cgroup v1 (this machine's) is allowed; the kubelet's own health port and read-only port are off;
// no resolv.conf of the host is handed to pods; the pod logs and plugins stay in the node's
// directory (the field is podLogsDir: a wrong name is only logged).
export function kubeletConfig(dir: string, address: string): string {
  return `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
failSwapOn: false
containerRuntimeEndpoint: unix://${containerdSocket(dir)}
address: ${address}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 0
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
podLogsDir: ${join(dir, 'pod-logs')}
volumePluginDir: ${join(dir, 'kubelet-plugins')}
resolvConf: ""
clusterDomain: cluster.local
# The images were imported, never pulled: nothing may collect them.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "50Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
maxPods: 30
nodeStatusUpdateFrequency: 5s
`;
}
