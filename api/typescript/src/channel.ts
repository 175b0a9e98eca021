import { X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import { isIP } from "node:net";
import { createSecureContext } from "node:tls";
import type { SecureClientSessionOptions } from "node:http2";
import { Code, ConnectError, createClient, createContextKey, createContextValues } from "@connectrpc/connect";
import type { ContextValues, Interceptor, StreamResponse, Transport, UnaryResponse } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { Health, HealthCheckResponse_ServingStatus } from "../gen/grpc/health/v1/health_pb.js";
import { leaderOf, PartitionLeaderTrailer, PartitionsTrailer, transient } from "./retry.js";
import { nopLogger, type Logger } from "./log.js";
import { partitionOf, sessionOfRequest } from "./partitions.js";
import { tokenFrom } from "./token.js";

/** The scheme of a static list of Dex nodes: dex:///host1:port1,host2:port2,host3:port3. */
export const Scheme = "dex";

/** The health-checked service: the cluster reports it SERVING only on the node that holds the dispatch lease. */
export const HealthService = "dex.v1.WorkerService";

/**
 * How fast a channel leaves a node that stopped answering: it health-checks
 * the node it uses every ProbeIntervalMs, and one that does not answer within
 * ProbeTimeoutMs (frozen: its TCP connection stays open) has its connection
 * closed, failing the calls on it, and the next call picks the node that
 * reports SERVING.
 */
export const ProbeIntervalMs = 500;
export const ProbeTimeoutMs = 1000;

/** The partition a call belongs to (-1: none), read by a Channel that routes calls to partitions' leaders. */
const partitionKey = createContextKey(-1, { description: "dex partition" });

/**
 * Call options that mark a call as one of partition k: a Channel given
 * several nodes sends it to the partition's leader once it knows it. A hint
 * to the channel only: nothing is sent with the call.
 */
export function inPartition(k: number): { contextValues: ContextValues } {
  return { contextValues: createContextValues().set(partitionKey, k) };
}

/** The session a stream belongs to ("": none), read by a Channel that routes calls to partitions' leaders. */
const sessionKey = createContextKey("", { description: "dex session" });

/**
 * Call options that mark a stream as one of session id's partition (a
 * Client's watch): a Channel given several nodes opens it at the partition's
 * leader once it knows it. A unary call needs none: the channel reads the
 * session its request names by the route table (partitions.ts).
 */
export function inSession(id: string): { contextValues: ContextValues } {
  return { contextValues: createContextValues().set(sessionKey, id) };
}

/** What a call is routed by: the partition it was marked with (-1: none), else the session it names ("": none). */
interface CallRoute {
  partition: number;
  session: string;
}

/** PEM contents, or paths with *File, of mutual TLS. */
export interface TlsOptions {
  ca?: string | Buffer;
  cert?: string | Buffer;
  key?: string | Buffer;
  caFile?: string;
  certFile?: string;
  keyFile?: string;
}

export interface DialOptions {
  /** An ACL token sent as "authorization: Bearer <token>"; default $DEX_TOKEN. "" sends none. */
  token?: string;
  /** Mutual TLS: each node's certificate must name the address dialled. */
  tls?: TlsOptions;
  /** The service whose SERVING status marks the node to use (default HealthService). */
  healthService?: string;
  logger?: Logger;
  probeIntervalMs?: number;
  probeTimeoutMs?: number;
}

/** The addresses of a target: "dex:///a,b,c" or one "host:port" (a load balancer following /readyz). */
export function parseTarget(target: string): string[] {
  let s = target.trim();
  if (s === "") throw new Error("empty Dex target: want dex:///h1:p1,h2:p2 or host:port");
  if (s.startsWith(Scheme + ":")) {
    s = s.slice(Scheme.length + 1).replace(/^\/\//, "");
    const i = s.indexOf("/");
    if (i >= 0) s = s.slice(i + 1);
    const addrs = s.split(",").map((a) => a.trim()).filter((a) => a !== "");
    if (addrs.length === 0) throw new Error(`dex target ${JSON.stringify(target)} names no address`);
    for (const a of addrs) checkAddr(a, target);
    return addrs;
  }
  checkAddr(s, target);
  return [s];
}

function checkAddr(a: string, target: string): void {
  const m = /^(\[[^\]]+\]|[^:/\s]+):(\d{1,5})$/.exec(a);
  if (!m || Number(m[2]) > 65535) {
    throw new Error(`dex target ${JSON.stringify(target)}: ${JSON.stringify(a)} is not host:port`);
  }
}

/**
 * Reads the TLS options (the *File ones from disk, now) and checks them as
 * the Go library does: the CA bundle must hold a PEM certificate, and the
 * certificate must be its key's. What is checked is what is used: each file
 * is read once.
 */
export function loadTls(t: TlsOptions): SecureClientSessionOptions {
  const read = (v: string | Buffer | undefined, file: string | undefined, what: string) => {
    if (v !== undefined || !file) return v;
    try {
      return readFileSync(file);
    } catch (e) {
      throw new Error(`TLS: ${what} ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
    }
  };
  const out: SecureClientSessionOptions = {
    ca: read(t.ca, t.caFile, "CA bundle"), cert: read(t.cert, t.certFile, "certificate"), key: read(t.key, t.keyFile, "key"),
  };
  if ((out.cert === undefined) !== (out.key === undefined)) throw new Error("TLS: a client certificate needs its key, and a key its certificate");
  if (out.ca === undefined) throw new Error("TLS: the CA bundle the nodes' certificates chain to is required");
  const caName = t.caFile && t.ca === undefined ? `CA bundle ${t.caFile}` : "the CA bundle";
  const blocks = String(out.ca).match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? [];
  if (blocks.length === 0) throw new Error(`TLS: ${caName} holds no PEM certificate`);
  for (const b of blocks) {
    try {
      new X509Certificate(b);
    } catch (e) {
      throw new Error(`TLS: ${caName}: ${(e as Error).message}`);
    }
  }
  if (out.cert !== undefined) {
    try {
      createSecureContext({ cert: out.cert, key: out.key });
    } catch (e) {
      const names = t.certFile && t.cert === undefined ? `certificate ${t.certFile} / key ${t.keyFile}` : "the certificate and key";
      throw new Error(`TLS: ${names}: not a PEM certificate and its key (${(e as Error).message})`);
    }
  }
  return out;
}

/**
 * How often a connection a TLS reload replaced checks whether it still
 * carries a call: it closes once it carries none.
 */
const retireCheckMs = 500;

/** One node: its HTTP/2 connection and a transport on it. */
class Node {
  session!: Http2SessionManager;
  transport!: Transport;
  /** Connections a TLS reload replaced, each closed once it carries no call. */
  private readonly retiring = new Set<Http2SessionManager>();
  constructor(readonly addr: string, private readonly url: string, private nodeOptions: SecureClientSessionOptions | undefined,
    private readonly interceptors: Interceptor[]) {
    this.connect();
  }
  /**
   * Makes the next calls use new TLS options on a new connection. The calls
   * on the old one go on there (it keeps the certificates it was made with)
   * and it closes once it carries none.
   */
  retls(opts: SecureClientSessionOptions): void {
    const old = this.session;
    this.nodeOptions = opts;
    this.connect();
    this.retiring.add(old);
    const timer = setInterval(() => {
      const st = old.state();
      if (st === "open" || st === "connecting" || st === "verifying") return;
      clearInterval(timer);
      this.retiring.delete(old);
      old.abort();
    }, retireCheckMs);
    timer.unref();
  }
  /** Closes every connection, the retiring ones too. */
  close(why: Error): void {
    this.session.abort(why);
    for (const s of this.retiring) s.abort(why);
    this.retiring.clear();
  }
  private connect(): void {
    const host = this.addr.replace(/:\d+$/, "").replace(/^\[|\]$/g, "");
    const opts = this.nodeOptions && isIP(host) === 0 ? { ...this.nodeOptions, servername: host } : this.nodeOptions;
    this.session = new Http2SessionManager(this.url, { pingIntervalMs: 10_000, pingTimeoutMs: 2_000 }, opts);
    this.transport = createGrpcTransport({
      baseUrl: this.url, sessionManager: this.session, interceptors: this.interceptors, nodeOptions: opts,
    });
  }
  /** Closes the connection (failing the calls on it) and opens a fresh one at the next call. */
  reset(why: Error): void {
    this.session.abort(why);
    this.connect();
  }
}

/**
 * A channel to a Dex cluster: a connect Transport that sends each call to the
 * node that serves (the one whose health check says SERVING, or the leader a
 * refusal names) and moves to another after a takeover. It does not retry
 * calls itself: the Worker and the Client repeat a refused call with a short
 * backoff. Close it when done.
 *
 * With several partitions (each its own leader) any node serves any call
 * and forwards it to its partition's leader, at the cost of a second hop.
 * So a call marked with inPartition (a Worker's), or naming a session (a
 * Client's: its request by the route table of partitions.ts, a watch marked
 * with inSession), goes straight to its partition's leader when the channel
 * knows it: each call's trailers teach the partition count and, for a
 * forwarded call, the leader it went to; a call served where it landed
 * teaches that node. A wrong or stale leader costs one hop and the node's
 * answer corrects it. With one address (a load balancer) or one partition
 * nothing changes.
 */
export class Channel implements Transport {
  readonly addrs: string[];
  private readonly nodes: Node[];
  private cur = 0;
  private needPick: boolean;
  private picking: Promise<void> | undefined;
  private readonly log: Logger;
  private readonly healthService: string;
  private readonly probeTimeoutMs: number;
  private readonly prober: NodeJS.Timeout;
  private probing = false;
  private closed = false;
  /** The partition count the cluster's trailers gave (0: none yet), and each partition's leader among the nodes. */
  private partitions = 0;
  private readonly leaders = new Map<number, Node>();
  /** The TLS options the channel dials with (undefined: plaintext), read again by reloadTls. */
  private readonly tlsOptions: TlsOptions | undefined;

  constructor(target: string, opts: DialOptions = {}) {
    this.addrs = parseTarget(target);
    this.log = opts.logger ?? nopLogger;
    this.healthService = opts.healthService ?? HealthService;
    this.probeTimeoutMs = opts.probeTimeoutMs ?? ProbeTimeoutMs;
    const token = opts.token ?? tokenFrom("");
    const interceptors: Interceptor[] = token === "" ? [] : [(next) => (req) => {
      req.header.set("authorization", `Bearer ${token}`);
      return next(req);
    }];
    this.tlsOptions = opts.tls;
    const tls = opts.tls ? loadTls(opts.tls) : undefined;
    const scheme = tls ? "https" : "http";
    this.nodes = this.addrs.map((a) => new Node(a, `${scheme}://${a}`, tls, interceptors));
    this.needPick = this.nodes.length > 1;
    this.prober = setInterval(() => void this.probe(), opts.probeIntervalMs ?? ProbeIntervalMs);
    this.prober.unref();
  }

  /** The address calls go to now. */
  get current(): string {
    return this.nodes[this.cur].addr;
  }

  /** The leader partition k's calls go to ("" while the channel knows none: they go to current). */
  partitionLeader(k: number): string {
    return this.routed(k)?.addr ?? "";
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.prober);
    for (const n of this.nodes) n.close(new ConnectError("channel closed", Code.Canceled));
  }

  /** Whether the channel speaks TLS. */
  get usesTls(): boolean {
    return this.tlsOptions !== undefined;
  }

  /**
   * Reads the TLS files again (a SIGHUP's rotation: the *File options; PEM
   * given inline stays as it is), so that new connections use them: each
   * node gets a new connection for its next call, while the calls already
   * running finish on the old one, which closes once it carries none (as
   * the Go library's open connections keep their certificates). Throws,
   * and keeps the current files in use, when the new ones cannot be read or
   * are not a certificate, its key and a CA bundle; or when the channel
   * does not use TLS.
   */
  reloadTls(): void {
    if (this.tlsOptions === undefined) throw new Error("this channel does not use TLS: there are no files to reload");
    const opts = loadTls(this.tlsOptions); // throws before anything changes
    for (const n of this.nodes) n.retls(opts);
  }

  async unary(...args: Parameters<Transport["unary"]>): Promise<UnaryResponse<any, any>> {
    const [method, signal, , , input, values] = args;
    const route = { partition: values?.get(partitionKey) ?? -1, session: sessionOfRequest(method, input) };
    const routed = this.routed(this.partitionOfRoute(route));
    const node = routed !== undefined && !this.closed ? routed : await this.node();
    try {
      const res = await node.transport.unary(...args);
      this.learn(route, node, res.trailer, true);
      return res;
    } catch (e) {
      this.callFailed(route, routed, node, e, signal);
      this.failed(node, e);
      throw e;
    }
  }

  async stream(...args: Parameters<Transport["stream"]>): Promise<StreamResponse<any, any>> {
    const [, signal, , , , values] = args;
    const route = { partition: -1, session: values?.get(sessionKey) ?? "" };
    const routed = this.routed(this.partitionOfRoute(route));
    const node = routed !== undefined && !this.closed ? routed : await this.node();
    let res: StreamResponse<any, any>;
    try {
      res = await node.transport.stream(...args);
    } catch (e) {
      this.callFailed(route, routed, node, e, signal);
      this.failed(node, e);
      throw e;
    }
    if (route.session === "") return res;
    // A stream of a session teaches the map when it ends, and one that
    // fails forgets the leader it was opened at, as a unary call does.
    const messages = async function* (this: Channel) {
      try {
        yield* res.message;
      } catch (e) {
        this.callFailed(route, routed, node, e, signal);
        throw e;
      }
      this.learn(route, node, res.trailer, true);
    };
    return { ...res, message: messages.call(this) };
  }

  /** Tells the channel that a call on the node it used failed (streams' later errors come here too). */
  failed(node: Node | undefined, err: unknown): void {
    if (!transient(err)) return;
    node ??= this.nodes[this.cur];
    const leader = leaderOf(err);
    if (this.nodes.length === 1) {
      // A load balancer's connection stays on its backend: a refusal naming
      // the leader means that backend no longer serves, so reconnect.
      if (leader !== "") node.reset(new ConnectError("the node behind the load balancer stopped serving", Code.Unavailable));
      return;
    }
    const i = this.nodes.findIndex((n) => n.addr === leader);
    if (i >= 0) {
      if (i !== this.cur) this.log.info("following the leader the cluster named", { from: this.nodes[this.cur].addr, to: leader });
      this.cur = i;
      this.needPick = false;
      return;
    }
    this.needPick = true;
  }

  /** The known leader of partition k, when calls of k go there. */
  private routed(k: number): Node | undefined {
    return k >= 0 && k < this.partitions ? this.leaders.get(k) : undefined;
  }

  /** The partition of a call: the one it was marked with, else its session's once the count is known (-1: any node). */
  private partitionOfRoute(r: CallRoute): number {
    if (r.partition >= 0 || r.session === "" || this.partitions <= 1) return r.partition;
    return partitionOf(r.session, this.partitions);
  }

  /**
   * Learns from a call of route that failed on node, sent to routed when it
   * went to its partition's known leader: a leader that did not answer, or
   * no longer leads, is forgotten (the next call goes where the others go,
   * and the node there names the new one); the error's trailers teach the map.
   */
  private callFailed(route: CallRoute, routed: Node | undefined, node: Node, e: unknown, signal: AbortSignal | undefined): void {
    const down = e instanceof ConnectError && (transient(e) || e.code === Code.Unknown);
    const k = this.partitionOfRoute(route);
    if (routed !== undefined && down && !signal?.aborted && this.leaders.get(k) === routed) this.leaders.delete(k);
    if (e instanceof ConnectError) this.learn(route, node, e.metadata, false);
  }

  /**
   * Learns from the trailers of a call of route that node answered: the
   * partition count, and the leader of the call's partition, which the node
   * names when it forwarded the call, or is when it served it. A session's
   * partition is found once the trailers gave the count, so its first call
   * teaches its leader too. A follower's "dex-leader" is not a partition's
   * leader: it says that nothing was done.
   */
  private learn(route: CallRoute, node: Node, trailer: Headers, ok: boolean): void {
    if (this.nodes.length === 1) return;
    const count = Number(trailer.get(PartitionsTrailer) ?? "");
    if (!Number.isInteger(count) || count <= 0) return;
    if (count !== this.partitions) {
      this.partitions = count;
      this.leaders.clear();
    }
    const k = this.partitionOfRoute(route);
    if (k < 0 || k >= count) return;
    const named = trailer.get(PartitionLeaderTrailer);
    if (named === null && !ok) return;
    const leader = named === null ? node : this.nodes.find((n) => n.addr === named);
    if (leader === this.leaders.get(k)) return;
    if (leader === undefined) {
      this.leaders.delete(k); // a leader the channel was not given: calls go where the others go
      return;
    }
    this.log.info("calling a partition's leader directly", { partition: k, leader: leader.addr });
    this.leaders.set(k, leader);
  }

  /** Forgets the partitions led by a node that does not serve. */
  private forgetLeader(n: Node): void {
    for (const [k, l] of this.leaders) if (l === n) this.leaders.delete(k);
  }

  /** Notes a failed call (for Client streams). */
  noteFailure(err: unknown): void {
    this.failed(undefined, err);
  }

  private async node(): Promise<Node> {
    if (this.closed) throw new ConnectError("channel closed", Code.Canceled);
    if (this.needPick) {
      this.picking ??= this.pick().finally(() => (this.picking = undefined));
      await this.picking;
    }
    return this.nodes[this.cur];
  }

  private async check(n: Node): Promise<HealthCheckResponse_ServingStatus | "timeout" | "error"> {
    try {
      const c = createClient(Health, n.transport);
      const r = await c.check({ service: this.healthService }, { timeoutMs: this.probeTimeoutMs });
      return r.status;
    } catch (e) {
      return e instanceof ConnectError && e.code === Code.DeadlineExceeded ? "timeout" : "error";
    }
  }

  /** Health-checks every node at once and uses the first (current first) that serves. */
  private async pick(): Promise<void> {
    const order = this.nodes.map((_, k) => (this.cur + k) % this.nodes.length);
    const states = await Promise.all(order.map((i) => this.check(this.nodes[i])));
    for (const [k, i] of order.entries()) {
      if (states[k] === "timeout") this.nodes[i].reset(new ConnectError(`node ${this.nodes[i].addr} did not answer its health check`, Code.Unavailable));
      if (states[k] !== HealthCheckResponse_ServingStatus.SERVING) this.forgetLeader(this.nodes[i]);
    }
    const k = states.findIndex((s) => s === HealthCheckResponse_ServingStatus.SERVING);
    if (k >= 0) {
      if (order[k] !== this.cur) this.log.info("following the node that serves", { from: this.nodes[this.cur].addr, to: this.nodes[order[k]].addr });
      this.cur = order[k];
      this.needPick = false;
      return;
    }
    // None serves yet (an election): try the next node; the caller backs off.
    this.cur = (this.cur + 1) % this.nodes.length;
  }

  /** Checks the node in use: one that does not answer in time is left; one that no longer serves is replaced. */
  private async probe(): Promise<void> {
    if (this.probing || this.closed || this.picking) return;
    this.probing = true;
    try {
      const n = this.nodes[this.cur];
      const st = await this.check(n);
      if (this.closed) return;
      if (st === "timeout") {
        this.log.warn("node did not answer its health check in time; leaving it", { node: n.addr });
        n.reset(new ConnectError(`node ${n.addr} did not answer its health check`, Code.Unavailable));
        this.needPick = this.nodes.length > 1;
      } else if (st !== HealthCheckResponse_ServingStatus.SERVING && this.nodes.length > 1) {
        this.needPick = true;
      }
    } finally {
      this.probing = false;
    }
  }
}

/** Opens a channel to a Dex cluster (see Channel). */
export function dial(target: string, opts: DialOptions = {}): Channel {
  return new Channel(target, opts);
}
