#!/usr/bin/env node
// veneer-node-watcher [serve|check-config|explain|report] [--config FILE] [--<setting> VALUE ...]
// From the command line to a command (src/commands/): the arguments, the configuration, the exit code.
//
// Modules load when a command needs them: the Kubernetes client alone takes over a second and
// some 50 MB, which `--help`, `check-config` and an offline `explain` or `report` have no use for.
import { readFileSync } from 'node:fs';
import type { LoadedConfig } from './config/load.ts';
import { flagName, SETTINGS, type SettingPath } from './config/schema.ts';
import type { ExplainArgs } from './commands/explain.ts';

const EXIT_USAGE = 2;

const COMMANDS = ['serve', 'check-config', 'explain', 'report'] as const;
/** Options of the commands that read nodes and overlays; `--at` is explain's alone. */
const INPUT_OPTIONS: Record<string, keyof ExplainArgs> = {
  '--nodes': 'nodesFile',
  '--overlays': 'overlaysFile',
  '--nodeclaims': 'nodeClaimsFile',
  '--nodepools': 'nodePoolsFile',
  '--ec2nodeclasses': 'nodeClassesFile',
  '--at': 'at',
  '-o': 'output',
  '--output': 'output',
};
const OUTPUTS = ['table', 'json', 'yaml'];
type Command = (typeof COMMANDS)[number];

interface Parsed {
  command: Command;
  configFile: string | undefined;
  flags: Record<string, string>;
  help: boolean;
  version: boolean;
  /** The explain and report options. */
  input: ExplainArgs;
}

class UsageError extends Error {}

function version(): string {
  const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}

function usage(): string {
  const settings = (Object.keys(SETTINGS) as SettingPath[]).map(
    (p) => `  ${flagName(p).padEnd(40)} ${SETTINGS[p].description}`,
  );
  return [
    'Usage: veneer-node-watcher [command] [--config FILE] [--<setting> VALUE ...]',
    '',
    'Commands:',
    '  serve          run the webhooks, the caches and the reconciler (default)',
    '  check-config   validate the configuration and print each value with its source',
    '  explain        why a node got (or would get) its record:',
    '                   explain NODE_NAME                        live, with KUBECONFIG',
    '                   explain --nodes FILE --overlays FILE [--nodepools FILE] [--nodeclaims FILE] [--ec2nodeclasses FILE] [--at TIME] [-o table|json|yaml]',
    '                 with its effect: what the selected overlays changed, both launches side by side (prices per --prices-source)',
    '  report         every overlay: nodes won, nodes matched but lost, verdict (steering, outranked, idle):',
    '                   report [-o table|json|yaml]                live, with KUBECONFIG (read-only)',
    '                   report --nodes FILE --overlays FILE [--nodepools FILE] [--nodeclaims FILE] [-o table|json|yaml]',
    '                 files are JSON or YAML (an object, a List, or several documents: kubectl get -o yaml works)',
    '',
    'Options:',
    '  --config FILE  YAML file with a nodeWatcher: block',
    '  --help         this text',
    '  --version      the version',
    '',
    'Settings (flags > VENEER_NODE_WATCHER_* variables > file > defaults):',
    ...settings,
  ].join('\n');
}

function parseArgs(argv: string[]): Parsed {
  const parsed: Parsed = {
    command: 'serve',
    configFile: undefined,
    flags: {},
    help: false,
    version: false,
    input: { output: 'table' },
  };
  let commandSeen = false;
  const inputGiven: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? '';
    if (arg === '--help' || arg === '-h') parsed.help = true;
    else if (arg === '--version') parsed.version = true;
    else if (arg.split('=')[0]! in INPUT_OPTIONS) {
      const eq = arg.indexOf('=');
      const name = eq > 0 ? arg.slice(0, eq) : arg;
      const value = eq > 0 ? arg.slice(eq + 1) : argv[++i];
      if (value === undefined) throw new UsageError(`option ${name} needs a value`);
      if (INPUT_OPTIONS[name] === 'output' && !OUTPUTS.includes(value))
        throw new UsageError(`${name} must be table, json or yaml, not ${JSON.stringify(value)}`);
      (parsed.input as unknown as Record<string, string>)[INPUT_OPTIONS[name]!] = value;
      inputGiven.push(name);
    } else if (arg.startsWith('--')) {
      const eq = arg.indexOf('=');
      const name = eq > 0 ? arg.slice(0, eq) : arg;
      const value = eq > 0 ? arg.slice(eq + 1) : argv[++i];
      if (value === undefined) throw new UsageError(`flag ${name} needs a value`);
      if (name === '--config') parsed.configFile = value;
      else parsed.flags[name] = value;
    } else if (!commandSeen && (COMMANDS as readonly string[]).includes(arg)) {
      parsed.command = arg as Command;
      commandSeen = true;
    } else if (parsed.command === 'explain' && parsed.input.nodeName === undefined) {
      parsed.input.nodeName = arg;
    } else {
      throw new UsageError(
        commandSeen
          ? `unexpected argument ${JSON.stringify(arg)}`
          : `unknown command ${JSON.stringify(arg)} (commands: ${COMMANDS.join(', ')})`,
      );
    }
  }
  const foreign =
    parsed.command === 'report'
      ? inputGiven.find((o) => o === '--at')
      : parsed.command === 'explain'
        ? undefined
        : inputGiven[0];
  if (foreign !== undefined)
    throw new UsageError(
      `${foreign} belongs to the ${foreign === '--at' ? 'explain command' : 'explain and report commands'}`,
    );
  return parsed;
}

async function main(argv: string[]): Promise<number | undefined> {
  let parsed: Parsed;
  try {
    parsed = parseArgs(argv);
  } catch (err) {
    console.error(`veneer-node-watcher: ${(err as Error).message}\nRun with --help for usage.`);
    return EXIT_USAGE;
  }
  if (parsed.help) {
    console.log(usage());
    return 0;
  }
  if (parsed.version) {
    console.log(version());
    return 0;
  }
  const { ConfigError, loadConfig } = await import('./config/load.ts');
  let loaded: LoadedConfig;
  try {
    loaded = loadConfig({ file: parsed.configFile, env: process.env, flags: parsed.flags });
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(`veneer-node-watcher: ${err.message}`);
      return EXIT_USAGE;
    }
    throw err;
  }
  if (parsed.command === 'check-config') {
    const { checkConfig } = await import('./commands/check-config.ts');
    console.log(checkConfig(loaded));
    return 0;
  }
  if (parsed.command === 'explain') {
    const e = parsed.input;
    if (!e.nodeName && (!e.nodesFile || !e.overlaysFile)) {
      console.error(
        'veneer-node-watcher: explain needs NODE_NAME (live) or --nodes FILE and --overlays FILE\nRun with --help for usage.',
      );
      return EXIT_USAGE;
    }
    const { runExplain } = await import('./commands/explain.ts');
    return printed('explain', () => runExplain(e, loaded.config));
  }
  if (parsed.command === 'report') {
    const e = parsed.input;
    if (
      e.nodesFile === undefined
        ? e.overlaysFile !== undefined || e.nodeClaimsFile !== undefined || e.nodePoolsFile !== undefined
        : e.overlaysFile === undefined
    ) {
      console.error(
        'veneer-node-watcher: report reads the cluster (KUBECONFIG), or --nodes FILE and --overlays FILE\nRun with --help for usage.',
      );
      return EXIT_USAGE;
    }
    const { runReport } = await import('./commands/report.ts');
    return printed('report', () => runReport(e, loaded.config));
  }
  const { serve } = await import('./commands/serve.ts');
  await serve(loaded.config, loaded.warnings);
  return undefined;
}

/** Runs a command that prints one result: input the user can fix exits 2, any other failure 1. */
async function printed(command: string, run: () => Promise<string>): Promise<number> {
  try {
    // One large write, the newline apart: console.log of tens of megabytes (200 nodes) cost a
    // third of the run, and a template adding the newline copied them once more (about 45 ms of 26 MB).
    process.stdout.write(await run());
    process.stdout.write('\n');
    return 0;
  } catch (err) {
    console.error(`veneer-node-watcher ${command}: ${(err as Error).message}`);
    const { InputError } = await import('./commands/inputs.ts');
    return err instanceof InputError ? EXIT_USAGE : 1;
  }
}

const code = await main(process.argv.slice(2)).catch((err: unknown) => {
  console.error(`veneer-node-watcher: ${(err as Error).message}`);
  return 1;
});
if (code !== undefined) process.exitCode = code;
