import { describe, expect, it } from "vitest";
import { Backoff, HEALTHY_AFTER_MS, MAX_ATTEMPTS } from "../../src/backoff";

describe("the restart backoff", () => {
  it("doubles from one second, caps at thirty, and gives up after five quick crashes", () => {
    const backoff = new Backoff();
    const delays = Array.from({ length: MAX_ATTEMPTS + 1 }, () => backoff.next(10));
    expect(delays).toEqual([1000, 2000, 4000, 8000, 16000, null]);
  });

  it("starts afresh after a server that ran long enough, and after reset", () => {
    const backoff = new Backoff();
    for (let i = 0; i < MAX_ATTEMPTS; i++) backoff.next(10);
    expect(backoff.next(HEALTHY_AFTER_MS)).toBe(1000);
    backoff.reset();
    expect(backoff.next(0)).toBe(1000);
  });
});
