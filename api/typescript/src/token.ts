/** The environment variable the Dex binaries read a token from when none is given. */
export const TokenEnv = "DEX_TOKEN";

/** flag when set, else $DEX_TOKEN, trimmed. */
export function tokenFrom(flag: string | undefined): string {
  if (flag) return flag.trim();
  return (process.env[TokenEnv] ?? "").trim();
}
