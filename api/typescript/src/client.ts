import { randomBytes } from "node:crypto";
import { Code, createClient, type Client as ConnectClient, type Transport } from "@connectrpc/connect";
import {
  SessionService, type CancelSessionResponse, type CreateSessionRequest, type EditHistoryResponse, type GetSessionResponse,
  type SessionSummary,
} from "../gen/dex/v1/sessions_pb.js";
import { Outcome, ResumeChoice, type Event, type HistoryEntry, type Session, type Step } from "../gen/dex/v1/types_pb.js";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { CreateSessionRequestSchema } from "../gen/dex/v1/sessions_pb.js";
import { codeOf } from "./errors.js";
import { Backoff, notApplied, sleep, transient } from "./retry.js";

export interface CallOptions {
  signal?: AbortSignal;
  /** Bounds one try (default 10 s); calls are repeated across a takeover until signal aborts. */
  timeoutMs?: number;
}

/** A fresh session id. */
export function newSessionId(): string {
  return "s-" + randomBytes(8).toString("hex");
}

/** A fresh idempotency key for sendMessage. */
export function newIdempotencyKey(): string {
  return "key-" + randomBytes(16).toString("hex");
}

/** A client of the SessionService: sessions, messages, approvals, questions, reconciles, history edits. */
export class Client {
  private readonly svc: ConnectClient<typeof SessionService>;

  constructor(transport: Transport) {
    this.svc = createClient(SessionService, transport);
  }

  /**
   * Runs one call: idempotent calls are repeated on every transient error, the
   * others only on a refusal that changed nothing (a follower's). tries counts.
   */
  private async call<T>(idempotent: boolean, o: CallOptions, f: (co: { signal?: AbortSignal; timeoutMs: number }) => Promise<T>,
    tries = { n: 0 }): Promise<T> {
    const b = new Backoff(50, 250);
    for (;;) {
      tries.n++;
      try {
        return await f({ signal: o.signal, timeoutMs: o.timeoutMs ?? 10_000 });
      } catch (e) {
        const retry = notApplied(e) || (idempotent && transient(e, o.signal));
        if (!retry || o.signal?.aborted) throw e;
        if (tries.n > 1 && !(await sleep(b.next(), o.signal))) throw e;
      }
    }
  }

  /**
   * Creates a session. With sessionId set the call is idempotent and retried
   * (a repeat that finds the session created by an earlier try returns it).
   */
  async createSession(req: MessageInitShape<typeof CreateSessionRequestSchema> = {}, o: CallOptions = {}): Promise<Session> {
    const idem = !!req.sessionId;
    const tries = { n: 0 };
    try {
      const resp = await this.call(idem, o, (co) => this.svc.createSession(req, co), tries);
      return resp.session!;
    } catch (e) {
      if (idem && tries.n > 1 && codeOf(e) === Code.AlreadyExists) {
        return (await this.getSession(req.sessionId!, o)).session!;
      }
      throw e;
    }
  }

  /**
   * Delivers text to a session, exactly once: the same idempotency key (given
   * or generated) goes with every retry. Resolves whether the cluster had
   * already seen the key.
   */
  async sendMessage(sessionId: string, text: string, idempotencyKey = "", o: CallOptions = {}): Promise<{ duplicate: boolean }> {
    const req = { sessionId, text, idempotencyKey: idempotencyKey || newIdempotencyKey() };
    const tries = { n: 0 };
    const resp = await this.call(true, o, (co) => this.svc.sendMessage(req, co), tries);
    // A duplicate on a retry is our own earlier try.
    return { duplicate: resp.duplicate && tries.n === 1 };
  }

  /** A session with its whole history and all its Steps, read page by page. */
  async getSession(sessionId: string, o: CallOptions = {}): Promise<GetSessionResponse> {
    let req = { sessionId, historyAfterSeq: 0n, stepsAfter: 0n };
    const history: HistoryEntry[] = [];
    const steps: Step[] = [];
    let historyDone = false;
    let stepsDone = false;
    for (;;) {
      const resp = await this.call(true, o, (co) => this.svc.getSession(req, co));
      if (!historyDone) history.push(...(resp.session?.history ?? []));
      if (!stepsDone) steps.push(...resp.steps);
      historyDone ||= resp.nextHistoryAfterSeq === 0n;
      stepsDone ||= resp.nextStepsAfter === 0n;
      if (historyDone && stepsDone) {
        if (resp.session) resp.session.history = history;
        resp.steps = steps;
        resp.nextHistoryAfterSeq = 0n;
        resp.nextStepsAfter = 0n;
        return resp;
      }
      // A part already read whole is asked for from its end.
      req = { sessionId, historyAfterSeq: resp.nextHistoryAfterSeq, stepsAfter: resp.nextStepsAfter };
      if (historyDone && history.length > 0) req.historyAfterSeq = history[history.length - 1].seq;
      if (stepsDone && steps.length > 0) req.stepsAfter = steps[steps.length - 1].number;
    }
  }

  /** Every session, reading every page. */
  async listSessions(o: CallOptions = {}): Promise<SessionSummary[]> {
    const out: SessionSummary[] = [];
    let pageToken = "";
    for (;;) {
      const resp = await this.call(true, o, (co) => this.svc.listSessions({ pageToken }, co));
      out.push(...resp.sessions);
      if (resp.nextPageToken === "") return out;
      pageToken = resp.nextPageToken;
    }
  }

  /**
   * Yields every event of the session after afterSeq, in order, until signal
   * aborts or the server ends the stream. After a takeover it reconnects and
   * resumes after the last event it yielded: none is missed or repeated.
   */
  async *watchSession(sessionId: string, afterSeq = 0n, o: { signal?: AbortSignal } = {}): AsyncGenerator<Event> {
    let last = afterSeq;
    const b = new Backoff(50, 250);
    for (;;) {
      try {
        for await (const ev of this.svc.watchSession({ sessionId, afterSeq: last }, { signal: o.signal })) {
          b.reset();
          if (ev.seq !== 0n && ev.seq <= last) continue; // already delivered
          yield ev;
          if (ev.seq > last) last = ev.seq;
        }
        return;
      } catch (e) {
        if (o.signal?.aborted || !transient(e, o.signal)) throw e;
        if (!(await sleep(b.next(), o.signal))) throw e;
      }
    }
  }

  /** Approves or denies the tool call waiting in step stepId. */
  async resolveApproval(stepId: string, approved: boolean, reason = "", o: CallOptions = {}): Promise<void> {
    await this.call(false, o, (co) => this.svc.resolveApproval({ stepId, approved, reason }, co));
  }

  /** Answers the ask_user question waiting in step stepId. */
  async answerQuestion(stepId: string, answer: string, o: CallOptions = {}): Promise<void> {
    await this.call(false, o, (co) => this.svc.answerQuestion({ stepId, answer }, co));
  }

  /** Resumes a paused or errored session: RETRY runs its kept turn once more, DROP drops it. */
  async resumeSession(sessionId: string, choice: ResumeChoice = ResumeChoice.RETRY, o: CallOptions = {}): Promise<void> {
    await this.call(false, o, (co) => this.svc.resumeSession({ sessionId, choice }, co));
  }

  /**
   * Settles an outcome_unknown call as Outcome.SUCCEEDED or Outcome.FAILED;
   * note is added to the history note the model reads.
   */
  async reconcileOutcome(stepId: string, outcome: Outcome, note = "", o: CallOptions = {}): Promise<void> {
    await this.call(false, o, (co) => this.svc.reconcileOutcome({ stepId, outcome, note }, co));
  }

  /**
   * Splices an idle, errored or paused session's history: drops the entries
   * from truncateFromSeq on (0n: none) and adds note (if any). It clears the
   * rejected-turn count. A retry after an ambiguous failure could add the
   * note twice, so it is not retried.
   */
  async editHistory(sessionId: string, truncateFromSeq = 0n, note = "", o: CallOptions = {}): Promise<EditHistoryResponse> {
    return this.call(false, o, (co) => this.svc.editHistory({ sessionId, truncateFromSeq, note }, co));
  }

  /** Cancels the session's running turn. */
  async cancelSession(sessionId: string, reason = "", by = "", o: CallOptions = {}): Promise<CancelSessionResponse> {
    return this.call(true, o, (co) => this.svc.cancelSession({ sessionId, reason, by }, co));
  }

  /**
   * Closes a session: it takes no more messages and can still be read. One in
   * a turn is closing until the turn ends (the session returned is still
   * running or waiting). A close of a closed session succeeds, so it is retried.
   */
  async closeSession(sessionId: string, o: CallOptions = {}): Promise<Session | undefined> {
    const resp = await this.call(true, o, (co) => this.svc.closeSession({ sessionId }, co));
    return resp.session;
  }

  /** Deletes an idle, paused, errored or closed session; NotFound on a retry counts as done. */
  async deleteSession(sessionId: string, o: CallOptions = {}): Promise<void> {
    const tries = { n: 0 };
    try {
      await this.call(true, o, (co) => this.svc.deleteSession({ sessionId }, co), tries);
    } catch (e) {
      if (tries.n > 1 && codeOf(e) === Code.NotFound) return;
      throw e;
    }
  }
}

export type { CreateSessionRequest };
