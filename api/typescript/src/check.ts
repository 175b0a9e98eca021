// Checks of a call's arguments, made before any call so that a bad one
// fails with a message naming it.

/** v as a whole number from lo to hi; a RangeError naming what otherwise. */
export function whole(what: string, v: unknown, lo: bigint, hi: bigint): bigint {
  const ok = typeof v === "bigint" || (typeof v === "number" && Number.isSafeInteger(v));
  if (!ok || BigInt(v as number | bigint) < lo || BigInt(v as number | bigint) > hi) {
    const shown = typeof v === "string" ? JSON.stringify(v) : typeof v === "bigint" ? `${v}n` : String(v);
    throw new RangeError(`${what} must be a whole number from ${lo} to ${hi}, not ${shown}`);
  }
  return BigInt(v as number | bigint);
}

/** Whether v is a plain object of fields (not null, an array or a Map). */
export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v) && !(v instanceof Map);
}

/** A string field of what: a TypeError naming it otherwise. */
export function str(what: string, v: unknown): string {
  if (typeof v !== "string") throw new TypeError(`${what} must be a string, not ${v === null ? "null" : typeof v}`);
  return v;
}
