// Loaded with --import into a process under test: says on stderr when anything resolves
// @kubernetes/client-node, so a test can tell which code paths load it.
import { registerHooks } from 'node:module';

let said = false;
registerHooks({
  resolve(specifier, context, nextResolve) {
    const resolved = nextResolve(specifier, context);
    if (!said && resolved.url.includes('/@kubernetes/client-node/')) {
      said = true;
      process.stderr.write(`@kubernetes/client-node loaded (${specifier})\n`);
    }
    return resolved;
  },
});
