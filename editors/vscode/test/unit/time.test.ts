import { describe, expect, it } from "vitest";
import { duration, humaneTime, localTime, relativeTime } from "../../src/model/time";

const NOW = Date.parse("2026-01-15T10:05:00Z");

describe("durations", () => {
  it("are the two largest units that matter, never raw seconds", () => {
    expect(duration(38.286938)).toBe("38 s");
    expect(duration(0)).toBe("0 s");
    expect(duration(90)).toBe("1 min 30 s");
    expect(duration(720)).toBe("12 min");
    expect(duration(7200)).toBe("2 h");
    expect(duration(7140)).toBe("1 h 59 min");
    expect(duration(3 * 86400 + 4 * 3600 + 59)).toBe("3 d 4 h");
  });

  it("say what they cannot read", () => {
    expect(duration(undefined)).toBe("?");
    expect(duration(Number.NaN)).toBe("?");
    expect(duration(-5)).toBe("0 s");
  });
});

describe("times", () => {
  it("are relative to now, both ways", () => {
    expect(relativeTime("2026-01-15T10:15:00Z", NOW)).toBe("in 10 min");
    expect(relativeTime("2026-01-15T07:00:00Z", NOW)).toBe("3 h ago");
    expect(relativeTime("2026-01-13T10:00:00Z", NOW)).toBe("2 d ago");
    expect(relativeTime("2026-01-15T10:04:30Z", NOW)).toBe("just now");
  });

  it("are local: the clock alone today, with the date otherwise, the year when not this year's", () => {
    expect(localTime("2026-01-15T10:15:00Z", NOW, "UTC")).toBe("10:15");
    expect(localTime("2026-01-15T10:15:00Z", NOW, "Asia/Tokyo")).toBe("19:15");
    expect(localTime("2026-01-15T23:30:00Z", NOW, "Europe/Paris")).toBe("16 Jan 00:30");
    expect(localTime("2025-12-31T12:00:00Z", NOW, "UTC")).toBe("31 Dec 2025 12:00");
  });

  it("give both in one phrase, and the stamp itself when it is not a time", () => {
    expect(humaneTime("2026-01-15T10:15:00Z", NOW, "UTC")).toBe("in 10 min (10:15)");
    expect(humaneTime("not a time", NOW)).toBe("not a time");
    expect(humaneTime(undefined, NOW)).toBe("?");
  });
});
