import { TaskHandler, TaskRunner, type Task } from "../gen/dex/v1/workers_pb.js";

/**
 * A task's handler as the library and its ledger name it. The task says it
 * (Task.handler, from the cluster's table of Step kinds): the library keeps
 * no table of kinds.
 */
export type Handler = "model" | "compact" | "tool" | "poll";

const handlers: ReadonlyMap<TaskHandler, Handler> = new Map([
  [TaskHandler.MODEL, "model"],
  [TaskHandler.COMPACT, "compact"],
  [TaskHandler.TOOL, "tool"],
  [TaskHandler.POLL, "poll"],
]);

// The handlers of each runner: the model runs the model and compact
// handlers, a tool its run and poll handlers.
const runnerHandlers: ReadonlyMap<TaskRunner, readonly TaskHandler[]> = new Map([
  [TaskRunner.MODEL, [TaskHandler.MODEL, TaskHandler.COMPACT]],
  [TaskRunner.TOOL, [TaskHandler.TOOL, TaskHandler.POLL]],
]);

/** The handler a task names ("" when it names none this library knows). */
export function handlerOf(t: Task): Handler | "" {
  return handlers.get(t.handler) ?? "";
}

/** Whether a task runs on the model (else on its tool). */
export function runsOnModel(t: Task): boolean {
  return t.runner === TaskRunner.MODEL;
}

/**
 * What is wrong with how a task says it runs ("" when nothing). A cluster
 * older than the runner and handler fields sends neither.
 */
export function routeProblem(t: Task): string {
  if (t.runner === TaskRunner.UNSPECIFIED && t.handler === TaskHandler.UNSPECIFIED) {
    return "the task names no runner and no handler (a Dex server older than this Worker library sent it)";
  }
  if (!(runnerHandlers.get(t.runner) ?? []).includes(t.handler)) {
    return `runner ${enumName("TASK_RUNNER_", TaskRunner, t.runner)} has no handler ${enumName("TASK_HANDLER_", TaskHandler, t.handler)}`;
  }
  return "";
}

/** The name Go's String() gives an enum value ("TASK_RUNNER_MODEL"), or its number. */
function enumName(prefix: string, e: Record<number, string>, v: number): string {
  const n = e[v];
  return n === undefined ? String(v) : prefix + n;
}
