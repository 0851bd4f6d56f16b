// Moved to kit/netns.ts (the demo's --aws mode and the aws bench suite run in a namespace too);
// this re-export keeps test files that still import it from here working.
export { assertInOwnNetworkNamespace, POD_IP, runInOwnNetworkNamespace } from '../../kit/netns.ts';
