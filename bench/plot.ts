// Latency distributions as an SVG of cumulative curves: dependency-free, readable in a browser
// and on GitHub, and diffable in review.

export interface Series {
  name: string;
  valuesMs: readonly number[];
}

export interface Panel {
  title: string;
  series: Series[];
}

const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#8c564b'];
const W = 460;
const H = 300;
const M = { left: 56, right: 16, top: 36, bottom: 96 };

function niceMax(x: number): number {
  const p = 10 ** Math.floor(Math.log10(Math.max(x, 1e-9)));
  return [1, 2, 2.5, 5, 10].map((f) => f * p).find((v) => v >= x) ?? 10 * p;
}

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

function panelSvg(panel: Panel, dx: number): string {
  const all = panel.series.flatMap((s) => s.valuesMs.filter(Number.isFinite));
  const xMax = niceMax(Math.max(...all, 1));
  // A record can be seen a few ms before the create call returns: keep those in the frame.
  const xMin = Math.min(0, ...all);
  const pw = W - M.left - M.right;
  const ph = H - M.top - M.bottom;
  const x = (v: number) => dx + M.left + ((v - xMin) / (xMax - xMin)) * pw;
  const y = (q: number) => M.top + (1 - q) * ph;
  const out: string[] = [
    `<text x="${dx + W / 2}" y="20" text-anchor="middle" font-weight="bold">${esc(panel.title)}</text>`,
  ];
  for (let i = 0; i <= 5; i++) {
    const v = xMin + ((xMax - xMin) / 5) * i;
    out.push(
      `<line x1="${x(v)}" y1="${y(0)}" x2="${x(v)}" y2="${y(1)}" stroke="#eee"/>`,
      `<text x="${x(v)}" y="${y(0) + 16}" text-anchor="middle">${Math.round(v * 10) / 10}</text>`,
    );
  }
  for (const q of [0, 0.25, 0.5, 0.75, 0.9, 1]) {
    out.push(
      `<line x1="${x(0)}" y1="${y(q)}" x2="${x(xMax)}" y2="${y(q)}" stroke="#eee"/>`,
      `<text x="${x(0) - 6}" y="${y(q) + 4}" text-anchor="end">p${Math.round(q * 100)}</text>`,
    );
  }
  out.push(`<text x="${dx + M.left + pw / 2}" y="${y(0) + 34}" text-anchor="middle">milliseconds</text>`);
  panel.series.forEach((s, i) => {
    const sorted = s.valuesMs
      .filter(Number.isFinite)
      .slice()
      .sort((a, b) => a - b);
    const points = sorted.map((v, j) => `${x(v).toFixed(1)},${y((j + 1) / sorted.length).toFixed(1)}`);
    const color = COLORS[i % COLORS.length]!;
    out.push(
      `<polyline fill="none" stroke="${color}" stroke-width="1.5" points="${x(sorted[0] ?? 0).toFixed(1)},${y(0)} ${points.join(' ')}"/>`,
    );
    const [lx, ly] = [dx + M.left, y(0) + 50 + i * 15];
    const p = (q: number) =>
      Math.round(sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] ?? Number.NaN);
    out.push(
      `<rect x="${lx}" y="${ly - 4}" width="10" height="3" fill="${color}"/>`,
      `<text x="${lx + 14}" y="${ly}">${esc(s.name)}: n=${sorted.length}, p50 ${p(0.5)} ms, p99 ${p(0.99)} ms</text>`,
    );
  });
  return out.join('\n');
}

/** Panels side by side, each a cumulative distribution of its series. */
export function cdfSvg(panels: Panel[]): string {
  const width = W * panels.length;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${H + 14}" font-family="sans-serif" font-size="11">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    ...panels.map((p, i) => panelSvg(p, i * W)),
    '</svg>',
    '',
  ].join('\n');
}
