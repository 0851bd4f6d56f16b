// Generates src/prices/karpenter-static-prices.json from Karpenter's AWS provider module: the
// static on-demand tables Karpenter prices with when the Pricing API is out of reach or
// ISOLATED_VPC is set (pkg/providers/pricing/zz_generated.pricing_aws*.go, merged by pricing.go
// into initialOnDemandPrices). The watcher's static price source reads the JSON; nobody types it.
//
//   node scripts/generate-price-table.ts [MODULE_DIR]
//
// MODULE_DIR defaults to the module kit/karpenter-build/v1.14.3 requires (`go list -m`).
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseGoPriceTable } from '../kit/aws/prices.ts';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
export const TABLE_FILES = [
  'zz_generated.pricing_aws.go',
  'zz_generated.pricing_aws_us_gov.go',
  'zz_generated.pricing_aws_cn.go',
];
export const PROVIDER_MODULE = 'github.com/aws/karpenter-provider-aws';
const BUILD_MODULE = join(root, 'kit', 'karpenter-build', 'v1.14.3');

export interface StaticPriceTable {
  /** Where the tables come from (module@version and files). */
  source: string;
  /** Each file's own "generated at" line. */
  generated: string[];
  /** Region -> instance type -> on-demand USD an hour. */
  regions: Record<string, Record<string, number>>;
}

/** The tables of the module at `dir`, as pricing.go merges them. */
export function tableFromModule(dir: string, version: string): StaticPriceTable {
  const table: StaticPriceTable = {
    source: `${PROVIDER_MODULE}@${version} pkg/providers/pricing/{${TABLE_FILES.join(',')}}`,
    generated: [],
    regions: {},
  };
  for (const file of TABLE_FILES) {
    const text = readFileSync(join(dir, 'pkg', 'providers', 'pricing', file), 'utf8');
    const when = /^\/\/ (generated at .*)$/m.exec(text)?.[1];
    if (when) table.generated.push(`${file}: ${when}`);
    Object.assign(table.regions, parseGoPriceTable(text));
  }
  if (Object.keys(table.regions['us-east-1'] ?? {}).length === 0) throw new Error(`${dir}: no us-east-1 prices found`);
  return table;
}

export const TABLE_PATH = join(root, 'src', 'prices', 'karpenter-static-prices.json');

if (import.meta.url === `file://${process.argv[1]}`) {
  const listed =
    process.argv[2] ??
    execFileSync('go', ['list', '-m', '-f', '{{.Dir}} {{.Version}}', PROVIDER_MODULE], {
      cwd: BUILD_MODULE,
      env: { ...process.env, GOTOOLCHAIN: 'go1.27.3', GOFLAGS: '-mod=readonly' },
      encoding: 'utf8',
    }).trim();
  const [dir, version] = listed.includes(' ') ? listed.split(' ') : [listed, 'unknown'];
  const table = tableFromModule(dir!, version!);
  writeFileSync(TABLE_PATH, `${JSON.stringify(table, null, 1)}\n`);
  const counts = Object.entries(table.regions)
    .map(([r, t]) => `${r} ${Object.keys(t).length}`)
    .join(', ');
  console.log(`wrote ${TABLE_PATH}: ${counts}`);
}
