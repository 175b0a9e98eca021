/** A structured logger: the Worker logs through it. */
export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
}

export const nopLogger: Logger = { debug() {}, info() {}, warn() {}, error() {} };

const levels = { debug: 0, info: 1, warn: 2, error: 3 } as const;

/**
 * JSON lines like dexd's (level, ts in ISO 8601, msg, fields), so the two
 * logs read and sort alike. Writes to stderr at minLevel and above.
 */
export function jsonLogger(minLevel: keyof typeof levels = "info", base: Record<string, unknown> = {},
  write: (line: string) => void = (l) => process.stderr.write(l)): Logger {
  const at = (level: keyof typeof levels) => (msg: string, fields?: Record<string, unknown>) => {
    if (levels[level] < levels[minLevel]) return;
    const rec: Record<string, unknown> = { level, ts: new Date().toISOString(), msg, ...base };
    for (const [k, v] of Object.entries(fields ?? {})) {
      rec[k] = v instanceof Error ? v.message : typeof v === "bigint" ? Number(v) : v;
    }
    write(JSON.stringify(rec) + "\n");
  };
  return { debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") };
}
