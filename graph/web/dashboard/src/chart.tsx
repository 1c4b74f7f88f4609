// A small hand-rolled SVG line chart: a few series over the last couple of
// minutes, the y axis scaled to the largest value shown. No chart library.

import { num } from './format';

export interface Series {
  name: string;
  color: string;
  values: (number | null)[];
  format?: (v: number) => string;
}

interface Props {
  title: string;
  series: Series[];
  /** How many points the x axis holds (older ones scroll off). */
  capacity: number;
  unit?: string;
  id: string;
}

const W = 480;
const H = 140;
const PAD = { l: 44, r: 8, t: 8, b: 18 };

export function LineChart({ title, series, capacity, unit, id }: Props) {
  let max = 0;
  for (const s of series) for (const v of s.values) if (v !== null && v > max) max = v;
  const top = niceCeil(max);
  const x = (i: number, n: number) => PAD.l + ((W - PAD.l - PAD.r) * (capacity - n + i)) / Math.max(1, capacity - 1);
  const y = (v: number) => H - PAD.b - ((H - PAD.t - PAD.b) * v) / top;
  const fmt = series[0]?.format ?? num;
  return (
    <figure class="chart" id={id}>
      <figcaption>
        <span>{title}</span>
        {series.map((s) => {
          const last = lastValue(s.values);
          return (
            <span class="legend" key={s.name}>
              <i style={{ background: s.color }} />
              {s.name} {last === null ? '–' : (s.format ?? num)(last)}
              {unit ?? ''}
            </span>
          );
        })}
      </figcaption>
      <svg viewBox={`0 0 ${W} ${H}`} role="img" aria-label={title} preserveAspectRatio="none">
        {[0, 0.5, 1].map((f) => (
          <g key={f}>
            <line class="grid" x1={PAD.l} x2={W - PAD.r} y1={y(top * f)} y2={y(top * f)} />
            <text class="axis" x={PAD.l - 4} y={y(top * f) + 4} text-anchor="end">
              {fmt(top * f)}
            </text>
          </g>
        ))}
        <text class="axis" x={PAD.l} y={H - 4}>
          −{capacity}s
        </text>
        <text class="axis" x={W - PAD.r} y={H - 4} text-anchor="end">
          now
        </text>
        {series.map((s) => (
          <path key={s.name} d={path(s.values, x, y)} stroke={s.color} class="line" />
        ))}
        {series.map((s) => {
          // The newest point as a dot: visible even before there is a line.
          const i = s.values.length - 1;
          const v = s.values[i];
          return v === null || v === undefined ? null : (
            <circle key={`${s.name}-dot`} cx={x(i, s.values.length)} cy={y(v)} r={2.5} fill={s.color} />
          );
        })}
      </svg>
    </figure>
  );
}

/** An SVG path through the values; a null breaks the line. */
function path(values: (number | null)[], x: (i: number, n: number) => number, y: (v: number) => number): string {
  let d = '';
  let pen = false;
  values.forEach((v, i) => {
    if (v === null) {
      pen = false;
      return;
    }
    d += `${pen ? 'L' : 'M'}${x(i, values.length).toFixed(1)},${y(v).toFixed(1)}`;
    pen = true;
  });
  return d;
}

function lastValue(vs: (number | null)[]): number | null {
  for (let i = vs.length - 1; i >= 0; i--) if (vs[i] !== null) return vs[i]!;
  return null;
}

/** The smallest 1, 2 or 5 × 10^k at or above v (1 for nothing). */
export function niceCeil(v: number): number {
  if (!(v > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}
