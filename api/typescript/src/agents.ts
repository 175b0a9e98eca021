// Agents: a session names the agent whose model runs it (NAME or
// NAME@VERSION); a Worker lists the agents whose model it runs, and each
// tool the agents it is served for. The checks are the cluster's
// (fsm.CheckAgent), so bad input fails in the constructor, not at register.

const maxAgentLength = 200;
const agentChars = /^[A-Za-z0-9\-_.:@]+$/;

/** Refuses an empty, invalid or repeated agent name in a list ("what" says whose). */
export function checkAgentList(what: string, agents: unknown): string[] {
  if (agents === undefined || agents === null) return [];
  if (!Array.isArray(agents)) throw new Error(`${what}: want a list of agent names`);
  const seen = new Set<string>();
  for (const a of agents) {
    if (typeof a !== "string" || a === "") throw new Error(`${what}: an empty agent name (list none for the default agent)`);
    if (Buffer.byteLength(a) > maxAgentLength) throw new Error(`${what}: agent is longer than ${maxAgentLength} bytes`);
    if (!agentChars.test(a)) throw new Error(`${what}: agent ${JSON.stringify(a)} holds a character other than letters, digits and "-_.:@"`);
    if (a === "." || a.includes("..")) throw new Error(`${what}: agent ${JSON.stringify(a)} must not be "." or hold ".."`);
    if (seen.has(a)) throw new Error(`${what}: agent ${JSON.stringify(a)} is listed twice`);
    seen.add(a);
  }
  return [...agents];
}
