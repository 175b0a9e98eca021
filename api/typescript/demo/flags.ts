// Go-style flags (-name, --name, --name=value, --name value; booleans take
// no value unless --name=false) and Go durations, so the demo Worker takes
// the exact command lines of cmd/dexworker.

/** Thrown for --help: the caller prints usage and exits 0. */
export class HelpError extends Error {}

export type FlagKind = "string" | "bool" | "int" | "duration";
export interface FlagSpec {
  kind: FlagKind;
  def: string | boolean | number;
  usage: string;
}

const units: Record<string, number> = { ns: 1e-6, us: 1e-3, "µs": 1e-3, "μs": 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** A Go duration ("1h2m3.5s", "200ms", "0") in milliseconds. */
export function parseDuration(s: string): number {
  if (s === "0") return 0;
  let rest = s;
  let sign = 1;
  if (rest.startsWith("-") || rest.startsWith("+")) {
    sign = rest[0] === "-" ? -1 : 1;
    rest = rest.slice(1);
  }
  if (rest === "") throw new Error(`invalid duration ${JSON.stringify(s)}`);
  let total = 0;
  const re = /^(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)/;
  while (rest !== "") {
    const m = re.exec(rest);
    if (!m) throw new Error(`invalid duration ${JSON.stringify(s)}`);
    total += Number(m[1]) * units[m[2]];
    rest = rest.slice(m[0].length);
  }
  return sign * total;
}

/** Parses args against specs; throws a clear error on an unknown flag, a missing or bad value. */
export function parseFlags(args: string[], specs: Record<string, FlagSpec>): { values: Record<string, string | boolean | number>; rest: string[] } {
  const values: Record<string, string | boolean | number> = {};
  for (const [k, s] of Object.entries(specs)) values[k] = s.def;
  let i = 0;
  for (; i < args.length; i++) {
    const a = args[i];
    if (a === "--") {
      i++;
      break;
    }
    if (!a.startsWith("-") || a === "-") break;
    let name = a.replace(/^--?/, "");
    let value: string | undefined;
    const eq = name.indexOf("=");
    if (eq >= 0) {
      value = name.slice(eq + 1);
      name = name.slice(0, eq);
    }
    if (name === "h" || name === "help") throw new HelpError();
    const spec = specs[name];
    if (!spec) throw new Error(`flag provided but not defined: -${name}`);
    if (spec.kind === "bool") {
      if (value === undefined) values[name] = true;
      else if (["1", "t", "T", "true", "TRUE", "True"].includes(value)) values[name] = true;
      else if (["0", "f", "F", "false", "FALSE", "False"].includes(value)) values[name] = false;
      else throw new Error(`invalid boolean value ${JSON.stringify(value)} for -${name}`);
      continue;
    }
    if (value === undefined) {
      if (i + 1 >= args.length) throw new Error(`flag needs an argument: -${name}`);
      value = args[++i];
    }
    if (spec.kind === "string") values[name] = value;
    else if (spec.kind === "int") {
      if (!/^[+-]?\d+$/.test(value)) throw new Error(`invalid value ${JSON.stringify(value)} for flag -${name}: parse error`);
      values[name] = Number(value);
    } else {
      try {
        values[name] = parseDuration(value);
      } catch (e) {
        throw new Error(`invalid value ${JSON.stringify(value)} for flag -${name}: ${(e as Error).message}`);
      }
    }
  }
  return { values, rest: args.slice(i) };
}

/** Go's flag.PrintDefaults, roughly. */
export function flagUsage(specs: Record<string, FlagSpec>): string {
  return Object.entries(specs).map(([k, s]) => {
    const def = s.kind === "duration" ? formatMs(s.def as number) : String(s.def);
    const shown = s.def === "" || s.def === false || (s.kind === "duration" && s.def === 0) ? "" : ` (default ${def})`;
    return `  -${k}${s.kind === "bool" ? "" : " " + s.kind}\n    \t${s.usage}${shown}\n`;
  }).join("");
}

export function formatMs(ms: number): string {
  if (ms === 0) return "0s";
  if (ms < 1000) return `${ms}ms`;
  return `${ms / 1000}s`;
}

/** Splits a comma-separated flag value, dropping blanks. */
export function splitList(v: string): string[] {
  return v.split(",").map((s) => s.trim()).filter((s) => s !== "");
}
