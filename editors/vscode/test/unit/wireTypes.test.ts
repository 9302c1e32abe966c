import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
// @ts-expect-error: an ES module script without type declarations
import { generate, OUTPUT_PATH } from "../../scripts/generate-wire-types.mjs";

describe("the wire types", () => {
  it("are what the protocol package's schema generates (run `npm run generate` when this fails)", async () => {
    const fresh: string = await generate();
    expect(readFileSync(OUTPUT_PATH, "utf8") === fresh, "src/generated/wire.ts is stale: run `npm run generate`").toBe(true);
    expect(fresh).toContain("export interface ChangedNotification");
    expect(fresh).toContain("export interface StreamErrorNotification");
  });
});
