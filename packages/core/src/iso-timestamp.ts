/**
 * ISO 8601 timestamps as clients send them: with or without a zone (none means UTC), with up to
 * microseconds. Parsed by hand and kept as text, because a JS Date would drop the microseconds that
 * events carry; Postgres receives the normalised text with an explicit zone.
 */
const ISO =
  /^(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,6}))?)?)?(?:([Zz])|([+-])(\d{2}):?(\d{2}))?$/;

export interface IsoTimestamp {
  /** Normalised, e.g. "2026-11-22T21:11:34.123456+00:00": exact, for Postgres. */
  text: string;
  /** Milliseconds since the epoch (microseconds truncated): for comparisons in JS only. */
  epochMs: number;
}

const pad = (n: number, width = 2) => String(n).padStart(width, "0");

export const parseIsoTimestamp = (raw: string): IsoTimestamp | null => {
  // An unencoded "+02:00" in a query string arrives as " 02:00": read it as the offset it was.
  const m = ISO.exec(raw.trim().replace(/(\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?) (\d{2}:?\d{2})$/, "$1+$2"));
  if (!m) return null;
  const [, y, mo, d, h = "00", mi = "00", s = "00", frac = "", , sign, oh, om] = m;
  const year = Number(y);
  const month = Number(mo);
  const day = Number(d);
  const hour = Number(h);
  const minute = Number(mi);
  const second = Number(s);
  const offsetMinutes = sign ? (sign === "-" ? -1 : 1) * (Number(oh) * 60 + Number(om)) : 0;
  if (year < 1 || month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || second > 59) return null;
  if (Math.abs(offsetMinutes) > 18 * 60 || Number(om ?? 0) > 59) return null;
  const daysInMonth = new Date(Date.UTC(year, month, 0)).getUTCDate();
  if (day > daysInMonth) return null;
  const micros = frac.padEnd(6, "0");
  const utcMs = Date.UTC(year, month - 1, day, hour, minute, second) - offsetMinutes * 60_000;
  const abs = Math.abs(offsetMinutes);
  const zone = `${offsetMinutes < 0 ? "-" : "+"}${pad(Math.floor(abs / 60))}:${pad(abs % 60)}`;
  return {
    text: `${pad(year, 4)}-${pad(month)}-${pad(day)}T${pad(hour)}:${pad(minute)}:${pad(second)}.${micros}${zone}`,
    epochMs: utcMs + Math.floor(Number(micros) / 1000),
  };
};
