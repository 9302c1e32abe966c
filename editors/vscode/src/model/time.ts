/**
 * Times and durations in a person's words: the store keeps ISO 8601 UTC stamps and seconds
 * as floats (`2026-01-15T09:30:00Z`, `38.286938`), the views show "in 12 min (14:05)",
 * "3 h ago" and "38 s of 2 h". Pure, with the clock and the time zone passed in, so the
 * wording is tested without waiting or depending on the machine's zone.
 */

const MINUTE = 60;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

/** A number of seconds as the two largest units that matter: "38 s", "12 min", "1 h 59 min", "3 d 4 h". */
export function duration(seconds: number | null | undefined): string {
  if (typeof seconds !== "number" || !Number.isFinite(seconds)) return "?";
  const total = Math.max(0, Math.round(seconds));
  if (total < MINUTE) return `${total} s`;
  if (total < HOUR) {
    const minutes = Math.floor(total / MINUTE);
    const rest = total % MINUTE;
    return rest === 0 || minutes >= 10 ? `${minutes} min` : `${minutes} min ${rest} s`;
  }
  if (total < DAY) {
    const hours = Math.floor(total / HOUR);
    const minutes = Math.floor((total % HOUR) / MINUTE);
    return minutes === 0 ? `${hours} h` : `${hours} h ${minutes} min`;
  }
  const days = Math.floor(total / DAY);
  const hours = Math.floor((total % DAY) / HOUR);
  return hours === 0 ? `${days} d` : `${days} d ${hours} h`;
}

/** The largest unit of a span, rounded down: "12 min", "3 h", "2 d"; under a minute is "now". */
function span(seconds: number): string | null {
  if (seconds < MINUTE) return null;
  if (seconds < HOUR) return `${Math.floor(seconds / MINUTE)} min`;
  if (seconds < DAY) return `${Math.floor(seconds / HOUR)} h`;
  return `${Math.floor(seconds / DAY)} d`;
}

function parse(iso: string | null | undefined): number | null {
  if (typeof iso !== "string" || iso === "") return null;
  const ms = Date.parse(iso);
  return Number.isNaN(ms) ? null : ms;
}

/** "in 12 min", "3 h ago", "just now"; the stamp itself when it cannot be read. */
export function relativeTime(iso: string | null | undefined, now: number): string {
  const at = parse(iso);
  if (at === null) return iso ? String(iso) : "?";
  const seconds = (at - now) / 1000;
  const words = span(Math.abs(seconds));
  if (words === null) return "just now";
  return seconds > 0 ? `in ${words}` : `${words} ago`;
}

/**
 * The stamp in local time: the clock alone on the same local day as ``now`` ("14:05"), else
 * with the date ("15 Jan 14:05", and the year when it is not this year's).
 */
export function localTime(iso: string | null | undefined, now: number, timeZone?: string): string {
  const at = parse(iso);
  if (at === null) return iso ? String(iso) : "?";
  const day = new Intl.DateTimeFormat("en-GB", { timeZone, year: "numeric", month: "short", day: "numeric" });
  const clock = new Intl.DateTimeFormat("en-GB", { timeZone, hour: "2-digit", minute: "2-digit", hour12: false }).format(at);
  if (day.format(at) === day.format(now)) return clock;
  const sameYear =
    new Intl.DateTimeFormat("en-GB", { timeZone, year: "numeric" }).format(at) ===
    new Intl.DateTimeFormat("en-GB", { timeZone, year: "numeric" }).format(now);
  const date = new Intl.DateTimeFormat("en-GB", { timeZone, month: "short", day: "numeric", ...(sameYear ? {} : { year: "numeric" }) }).format(at);
  return `${date} ${clock}`;
}

/** Both: "in 12 min (14:05)", "3 h ago (11:02)". */
export function humaneTime(iso: string | null | undefined, now: number, timeZone?: string): string {
  if (parse(iso) === null) return iso ? String(iso) : "?";
  return `${relativeTime(iso, now)} (${localTime(iso, now, timeZone)})`;
}
