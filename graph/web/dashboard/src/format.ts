// Small formatting helpers shared by the views.

/** 1234 → "1,234"; 1.5e6 → "1.5M". */
export function num(n: number): string {
  if (!Number.isFinite(n)) return '–';
  const a = Math.abs(n);
  if (a >= 1e9) return `${(n / 1e9).toFixed(1)}G`;
  if (a >= 1e6) return `${(n / 1e6).toFixed(1)}M`;
  if (a >= 1e4) return `${(n / 1e3).toFixed(1)}k`;
  if (Number.isInteger(n)) return n.toLocaleString('en');
  return n.toFixed(a < 10 ? 1 : 0);
}

/** Milliseconds as "850 µs", "12 ms", "3.4 s". */
export function ms(v: number | null | undefined): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return '–';
  if (v < 1) return `${Math.round(v * 1000)} µs`;
  if (v < 1000) return `${v < 10 ? v.toFixed(1) : Math.round(v)} ms`;
  return `${(v / 1000).toFixed(1)} s`;
}

/** An RFC 3339 instant as local hh:mm:ss.mmm. */
export function clock(iso: string | null | undefined): string {
  if (!iso) return '–';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  const p = (n: number, w = 2) => String(n).padStart(w, '0');
  return `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}.${p(d.getMilliseconds(), 3)}`;
}

/** The time between two instants ("–" when one is missing). */
export function span(from: string | null | undefined, to: string | null | undefined): string {
  if (!from || !to) return '–';
  return ms(Date.parse(to) - Date.parse(from));
}

/** The last characters of a long id, enough to tell tasks apart on screen. */
export function short(id: string, n = 10): string {
  return id.length > n ? `…${id.slice(-n)}` : id;
}

/** A JSON value for display, shortened. */
export function json(v: unknown, max = 4000): string {
  if (v === undefined || v === null) return '–';
  const s = typeof v === 'string' ? v : JSON.stringify(v, null, 2);
  return s.length > max ? `${s.slice(0, max)}…` : s;
}
