/**
 * When to restart a crashed server: 1 s, 2 s, 4 s ... capped at 30 s, and never more than
 * five crashes in a row (each within a minute of its start); then the extension stops trying
 * and says so once, until the user restarts it or changes the setting.
 */

export const FIRST_DELAY_MS = 1000;
export const MAX_DELAY_MS = 30_000;
export const MAX_ATTEMPTS = 5;
/** A server that ran this long before it crashed starts the count afresh. */
export const HEALTHY_AFTER_MS = 60_000;

export class Backoff {
  private attempts = 0;

  /** The delay before the next restart, or null to give up; ``uptimeMs`` is how long the server ran. */
  next(uptimeMs: number): number | null {
    if (uptimeMs >= HEALTHY_AFTER_MS) this.attempts = 0;
    if (this.attempts >= MAX_ATTEMPTS) return null;
    const delay = Math.min(FIRST_DELAY_MS * 2 ** this.attempts, MAX_DELAY_MS);
    this.attempts += 1;
    return delay;
  }

  reset(): void {
    this.attempts = 0;
  }
}
