// A timestamp as the tables show it — the local time of day to the
// millisecond — in a <time> element whose title gives it whole: the local
// date and time with the offset from UTC, and the instant in UTC as the
// server sent it.

import { clock } from './format';

/** The whole of an instant, for a title: "2026-11-26 10:31:14.817 UTC+01:00 · 2026-11-26T09:31:14.817Z". */
export function whole(iso: string): string {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  const p = (n: number, w = 2) => String(n).padStart(w, '0');
  const off = -d.getTimezoneOffset();
  const zone = `UTC${off < 0 ? '-' : '+'}${p(Math.floor(Math.abs(off) / 60))}:${p(Math.abs(off) % 60)}`;
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${clock(iso)} ${zone} · ${d.toISOString()}`;
}

/** An instant shown as its time of day, whole in its title; "–" when missing. */
export function Time({ at, class: cls }: { at: string | null | undefined; class?: string }) {
  if (!at) return <span class={cls}>–</span>;
  return (
    <time class={cls} dateTime={at} title={whole(at)}>
      {clock(at)}
    </time>
  );
}
