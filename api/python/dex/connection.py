"""A readiness-following connection to a Dex cluster.

A target is one ``host:port`` (a load balancer that checks /readyz: every
call goes there) or ``dex:///h1:p1,h2:p2,h3:p3`` (every node). With several
nodes the connection keeps a channel to each and sends a call to the node it
believes serves; when a call fails as if that node does not serve (it is
gone, frozen, or answers Unavailable) it follows the ``dex-leader`` trailer
the node sent, or asks every node's health service which one reports
``dex.v1.WorkerService`` SERVING (only the lease holder does). The caller
repeats the call; the next try goes to the new node.

A cluster of several partitions names its partition count and, when the
node forwarded a call to its partition's leader, that leader in the call's
trailers. A call that names its partition (a Worker's poll and attempt
calls) or its session (a client's session calls: dex.partitions) then goes
straight to the partition's leader, saving the forward.
"""

from __future__ import annotations

import asyncio
import os
import ssl
import weakref
from dataclasses import dataclass
from typing import Any, Optional, Sequence

import grpc
import grpc.aio

from dex.errors import DexError
from dex.partitions import partition_of

#: The resolver scheme of a list of nodes: dex:///h1:p1,h2:p2.
SCHEME = "dex"
#: The health service name SERVING only on the node that holds the lease.
HEALTH_SERVICE = "dex.v1.WorkerService"
#: The trailer in which a follower names the leader's gRPC address.
LEADER_METADATA_KEY = "dex-leader"
#: The metadata that names the partition a PollTask polls (absent: partition 0).
PARTITION_METADATA_KEY = "dex-partition"
#: The trailer in which a node of a partitioned cluster gives the partition
#: count, on every call it routed by session, Step or partition.
PARTITIONS_TRAILER = "dex-partitions"
#: The trailer in which a node names the gRPC address of the partition leader
#: it forwarded the call to. Unlike dex-leader it does not say that nothing
#: was applied: it only says where the partition's next call should go.
PARTITION_LEADER_TRAILER = "dex-partition-leader"
#: The environment variable a token is read from when none is given.
TOKEN_ENV = "DEX_TOKEN"
#: The largest answer accepted (a poll may carry several big tasks).
MAX_RECEIVE = 256 << 20
# A frozen node (SIGSTOP, a stalled host) keeps its connections open and
# never answers: every PROBE_INTERVAL the connection health-checks the node it
# uses, and one that does not answer within PROBE_TIMEOUT is dropped (its
# calls in flight fail as Unavailable and go again elsewhere), as the Go
# library's liveness probes do (api/client/liveness.go).
PROBE_INTERVAL = 0.5
PROBE_TIMEOUT = 1.0
# How often a channel replaced by a TLS reload checks whether the calls it
# still carries are done, to close it.
RETIRE_CHECK = 0.5

# Reconnect quickly after a takeover (gRPC's default starts at 1 s and grows
# to 2 minutes, sleeping past the moment the new leader is ready); keepalive
# pings find half-open connections.
CHANNEL_OPTIONS: list[tuple[str, Any]] = [
    ("grpc.initial_reconnect_backoff_ms", 50),
    ("grpc.min_reconnect_backoff_ms", 50),
    ("grpc.max_reconnect_backoff_ms", 250),
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 2_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.max_receive_message_length", MAX_RECEIVE),
    ("grpc.enable_retries", 0),
]

_SERVING = 1  # grpc.health.v1.HealthCheckResponse.SERVING
# The codes of a call that may not have reached a live node.
_LOST = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED,
         grpc.StatusCode.UNKNOWN)


@dataclass
class TLSFiles:
    """Mutual TLS: the client certificate and key and the CA bundle (PEM
    files), as dexworker's --tls-cert, --tls-key and --tls-ca."""

    cert: str = ""
    key: str = ""
    ca: str = ""

    def validate(self) -> None:
        given = [bool(self.cert), bool(self.key), bool(self.ca)]
        if any(given) and not all(given):
            raise DexError("TLS needs all three of the certificate, its key and the CA (--tls-cert, --tls-key, --tls-ca)")

    def credentials(self) -> Optional[grpc.ChannelCredentials]:
        """Channel credentials from the files as they are now (None: no TLS).
        The files are checked first, as the Go library checks them: a CA
        bundle without a certificate, or a certificate that is not its key's,
        raises DexError, so a bad rotation is refused here rather than
        failing every handshake later."""
        self.validate()
        if not self.cert:
            return None
        ca, cert, key = self._read_checked()
        return grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)

    def _read_checked(self) -> tuple[bytes, bytes, bytes]:
        ca, cert, key = _read(self.ca, "--tls-ca"), _read(self.cert, "--tls-cert"), _read(self.key, "--tls-key")
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        try:
            ctx.load_verify_locations(cadata=ca.decode("latin-1"))
        except (ssl.SSLError, ValueError) as e:
            raise DexError(f"TLS: --tls-ca {self.ca} holds no PEM certificate ({e})") from e
        try:
            # The password callback keeps OpenSSL from prompting for an
            # encrypted key (a SIGHUP has no terminal to prompt on).
            ctx.load_cert_chain(self.cert, self.key, password=lambda: b"")
        except (ssl.SSLError, OSError) as e:
            raise DexError(f"TLS: --tls-cert {self.cert} / --tls-key {self.key}: not a PEM certificate and "
                           f"its key ({e})") from e
        # What was checked is what was read: a file rewritten in between
        # (a rotation under way) is refused, to be tried again.
        if (_read(self.cert, "--tls-cert"), _read(self.key, "--tls-key")) != (cert, key):
            raise DexError("TLS: --tls-cert or --tls-key changed while being read; try again")
        return ca, cert, key


def _read(path: str, flag: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise DexError(f"TLS: {flag}: {e}") from e


def token_from(flag: str = "") -> str:
    """``flag`` when set, else $DEX_TOKEN, trimmed."""
    return (flag or os.environ.get(TOKEN_ENV, "")).strip()


def parse_target(target: str) -> tuple[list[str], bool]:
    """The addresses of a target and whether it lists nodes (dex:///)."""
    if target.startswith(SCHEME + ":"):
        rest = target[len(SCHEME) + 1:]
        if rest.startswith("//"):
            rest = rest[2:]
            rest = rest[rest.index("/") + 1:] if "/" in rest else ""
        addrs = [a.strip() for a in rest.split(",") if a.strip()]
        if not addrs:
            raise DexError(f"dex target {target!r} names no address")
        return addrs, True
    if not target.strip() or "," in target or ":" not in target:
        raise DexError(f"target {target!r}: want host:port or dex:///h1:p1,h2:p2,...")
    return [target.strip()], False


def _health_request(service: str) -> bytes:
    # grpc.health.v1.HealthCheckRequest{service}: field 1, length-delimited.
    b = service.encode()
    return b"\x0a" + bytes([len(b)]) + b


def _health_status(data: bytes) -> int:
    # grpc.health.v1.HealthCheckResponse{status}: field 1, a varint.
    return data[1] if len(data) >= 2 and data[0] == 0x08 else 0


class NodeDropped(grpc.RpcError):
    """A call cut off because its node stopped answering health checks."""

    def __init__(self, addr: str) -> None:
        super().__init__(f"node {addr} stopped answering; call dropped")
        self.addr = addr

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE

    def details(self) -> str:
        return f"node {self.addr} stopped answering its health checks"

    def trailing_metadata(self) -> tuple:
        return ()


def _trailers(err: grpc.RpcError) -> Any:
    try:
        return err.trailing_metadata() or ()  # type: ignore[attr-defined]
    except Exception:
        return ()


def _value(md: Any, key: str, last: bool = False) -> str:
    """The first (or last) value of key in md ("" when absent)."""
    found = ""
    for k, v in md or ():
        if k == key:
            found = v if isinstance(v, str) else v.decode()
            if not last:
                break
    return found


def trailer_value(err: grpc.RpcError, key: str) -> str:
    return _value(_trailers(err), key)


class Connection:
    """Channels to a cluster that follow the node that serves.

    ``token`` (default $DEX_TOKEN) is sent as ``authorization: Bearer``;
    ``tls`` makes every channel speak mutual TLS."""

    def __init__(self, target: str, *, token: Optional[str] = None, tls: Optional[TLSFiles] = None,
                 options: Sequence[tuple[str, Any]] = ()) -> None:
        self.target = target
        self.addrs, self.multi = parse_target(target)
        self._tls = tls if tls is not None and tls.cert else None
        self._creds = tls.credentials() if tls else None
        tok = token_from(token or "")
        self.metadata: tuple[tuple[str, str], ...] = (("authorization", "Bearer " + tok),) if tok else ()
        self._options = list(CHANNEL_OPTIONS) + list(options)
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._current = self.addrs[0]
        self._lost = False
        self._finding: Optional[asyncio.Task] = None
        self._stubs: dict[tuple[str, Any], Any] = {}
        self._inflight: dict[str, set] = {}
        self._dropped: set = set()
        self._prober: Optional[asyncio.Task] = None
        # The streams open on each node's channel, and the channels a TLS
        # reload replaced, each closed once the calls it carried are done.
        self._streams: dict[str, weakref.WeakSet] = {}
        self._retiring: set[asyncio.Task] = set()
        # The partition map the trailers taught (node lists only): the
        # count (0: none seen) and each partition's leader.
        self._partition_count = 0
        self._leaders: dict[int, str] = {}

    def _stub(self, addr: str, stub_cls: Any) -> Any:
        s = self._stubs.get((addr, stub_cls))
        if s is None:
            s = self._stubs[(addr, stub_cls)] = stub_cls(self._channel(addr))
        return s

    def _channel(self, addr: str) -> grpc.aio.Channel:
        ch = self._channels.get(addr)
        if ch is None:
            if self._creds is not None:
                ch = grpc.aio.secure_channel(addr, self._creds, options=self._options)
            else:
                ch = grpc.aio.insecure_channel(addr, options=self._options)
            self._channels[addr] = ch
        return ch

    async def close(self) -> None:
        if self._prober is not None:
            self._prober.cancel()
            self._prober = None
        for t in list(self._retiring):
            t.cancel()  # its finally closes the retired channel
        await asyncio.gather(*self._retiring, return_exceptions=True)
        chans, self._channels, self._stubs = list(self._channels.values()), {}, {}
        for ch in chans:
            await ch.close()

    @property
    def tls(self) -> Optional[TLSFiles]:
        """The TLS files the connection dials with (None: plaintext)."""
        return self._tls

    def reload_tls(self) -> None:
        """Reads the TLS files again (a SIGHUP's rotation): new connections
        use them. A gRPC channel keeps the credentials it was made with, so
        every node gets a new channel for its next call; a call already
        running finishes on its old channel, which closes when its calls are
        done (as the Go library's open connections keep their certificates).
        Raises DexError, and keeps the current files in use, when the new
        ones cannot be read or do not make a certificate, its key and a CA
        bundle; or when the connection has no TLS. Call it on the
        connection's event loop (a signal handler added with
        loop.add_signal_handler runs there)."""
        if self._tls is None:
            raise DexError("this connection does not use TLS: there are no files to reload")
        creds = self._tls.credentials()  # raises before anything changes
        self._creds = creds
        old, self._channels, self._stubs = self._channels, {}, {}
        for addr, ch in old.items():
            calls = weakref.WeakSet(self._inflight.get(addr, ()))
            for st in self._streams.pop(addr, ()):
                calls.add(st)
            t = asyncio.ensure_future(self._retire(ch, calls))
            self._retiring.add(t)
            t.add_done_callback(self._retiring.discard)

    @staticmethod
    async def _retire(ch: grpc.aio.Channel, calls: weakref.WeakSet) -> None:
        """Closes a replaced channel once the calls it carried are done."""
        try:
            while any(not c.done() for c in list(calls)):
                await asyncio.sleep(RETIRE_CHECK)
        finally:
            await ch.close()

    async def _probe(self) -> None:
        while True:
            await asyncio.sleep(PROBE_INTERVAL)
            # Every node calls go to: the current one and the partition leaders.
            await asyncio.gather(*(self._probe_node(a) for a in {self._current, *self._leaders.values()}))

    async def _probe_node(self, addr: str) -> None:
        if addr not in self._channels:
            return
        check = self._channels[addr].unary_unary("/grpc.health.v1.Health/Check")
        try:
            await check(_health_request(HEALTH_SERVICE), timeout=PROBE_TIMEOUT, metadata=self.metadata)
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                self._drop(addr)
        except asyncio.CancelledError:
            raise
        except Exception:
            pass

    def _drop(self, addr: str) -> None:
        """Forgets addr's channel and cuts off its calls in flight; the next
        call opens a new connection (a balancer then picks a live backend)."""
        ch = self._channels.pop(addr, None)
        self._stubs = {k: v for k, v in self._stubs.items() if k[0] != addr}
        for call in self._inflight.pop(addr, set()):
            self._dropped.add(call)
            call.cancel()
        if self.multi and addr == self._current:
            self._lost = True
        self._leaders = {k: a for k, a in self._leaders.items() if a != addr}
        if ch is not None:
            asyncio.ensure_future(ch.close())

    async def _serving(self, addr: str) -> bool:
        check = self._channel(addr).unary_unary("/grpc.health.v1.Health/Check",
                                                request_serializer=None, response_deserializer=None)
        try:
            data = await check(_health_request(HEALTH_SERVICE), timeout=PROBE_TIMEOUT)
        except grpc.RpcError:
            return False
        return _health_status(data) == _SERVING

    async def _find(self) -> None:
        """Point at the node that reports SERVING; if none does, at the next
        node after the lost one, which may name the leader in its answer."""
        lost = self._current
        results = await asyncio.gather(*(self._serving(a) for a in self.addrs))
        serving = [a for a, ok in zip(self.addrs, results) if ok]
        if serving:
            self._current = lost if lost in serving else serving[0]
        else:
            self._current = self.addrs[(self.addrs.index(lost) + 1) % len(self.addrs)] if lost in self.addrs else self.addrs[0]
        self._lost = False

    async def node(self) -> str:
        """The address the next call goes to."""
        if self.multi and self._lost:
            if self._finding is None or self._finding.done():
                self._finding = asyncio.ensure_future(self._find())
            await asyncio.shield(self._finding)
        return self._current

    def _failed(self, addr: str, err: grpc.RpcError) -> None:
        """Learn from a failed call on addr where the next should go."""
        if not self.multi or addr != self._current:
            return
        if err.code() not in _LOST:
            return
        leader = trailer_value(err, LEADER_METADATA_KEY)
        if leader and leader != addr:
            if leader not in self.addrs:
                self.addrs.append(leader)
            self._current = leader
            return
        self._lost = True

    def _partition(self, partition: Optional[int], session: str) -> Optional[int]:
        """The partition a call belongs to: the one it names, else its
        session's once the partition count is known (None: any node)."""
        if partition is None and session and self._partition_count > 1:
            return partition_of(session, self._partition_count)
        return partition

    def _leader_of(self, partition: Optional[int]) -> Optional[str]:
        """The known leader of partition, if a call may go there."""
        if partition is None:
            return None
        addr = self._leaders.get(partition)
        return addr if addr in self.addrs else None

    def partition_leader(self, partition: int) -> str:
        """The leader partition's calls go to ("" while none is known: they
        go to the node in use)."""
        return self._leader_of(partition) or ""

    def _learn(self, partition: Optional[int], session: str, addr: str, md: Any, ok: bool) -> None:
        """Learn the partition map from the trailers of a call to addr of
        partition or session (as unary's). A session's partition is found
        once the trailers gave the count, so that its first call teaches
        its leader too."""
        n = _value(md, PARTITIONS_TRAILER)
        if n.isdigit() and int(n) > 0 and int(n) != self._partition_count:
            self._partition_count, self._leaders = int(n), {}
        partition = self._partition(partition, session)
        if partition is None:
            return
        # The last value: a node that forwarded twice (its first leader
        # could not be dialled) names the one that took the call last.
        leader = _value(md, PARTITION_LEADER_TRAILER, last=True)
        if not leader and ok and n:
            leader = addr  # served without a forward: addr leads the partition
        if leader:
            self._leaders[partition] = leader

    def _forget(self, partition: Optional[int], leader: str) -> None:
        if partition is not None and self._leaders.get(partition) == leader:
            del self._leaders[partition]

    async def unary(self, stub_cls: Any, method: str, request: Any, timeout: float,
                    wait_for_ready: Optional[bool] = None, metadata: Sequence[tuple[str, str]] = (),
                    partition: Optional[int] = None, session: str = "") -> Any:
        """One try of a unary call of ``stub_cls``'s ``method``. It raises
        grpc.RpcError as the node answered; the connection has then moved
        to where a repeat should go. ``wait_for_ready=False`` fails at once
        when the node cannot be reached, with the reason. ``metadata`` goes
        with the call, beside the token. ``partition``: the partition the
        call belongs to (a Worker's poll and attempt calls of a partitioned
        cluster); ``session``, without it: the session whose partition
        serves the call (a client's session calls, by
        dex.partitions.session_of_request). With a node list such a call
        goes to its partition's leader once known."""
        if self._prober is None:
            self._prober = asyncio.ensure_future(self._probe())
        routed = self._partition(partition, session)
        leader = self._leader_of(routed)
        addr = leader or await self.node()
        fn = getattr(self._stub(addr, stub_cls), method)
        # A single address waits for its balancer to have a backend; a
        # node of a list fails fast so that the next try moves on.
        if wait_for_ready is None:
            wait_for_ready = not self.multi
        call = fn(request, timeout=timeout, metadata=self.metadata + tuple(metadata), wait_for_ready=wait_for_ready)
        calls = self._inflight.setdefault(addr, set())
        calls.add(call)
        try:
            resp = await call
            if self.multi:
                self._learn(partition, session, addr, await call.trailing_metadata(), True)
            return resp
        except grpc.RpcError as e:
            if leader and e.code() in _LOST:
                # The leader may be gone: the next try goes to the current
                # node, which forwards it and names the new leader.
                self._forget(routed, leader)
            self._failed(addr, e)
            if self.multi:
                self._learn(partition, session, addr, _trailers(e), False)
            raise
        except asyncio.CancelledError:
            if call in self._dropped:
                raise NodeDropped(addr) from None
            raise
        finally:
            calls.discard(call)
            self._dropped.discard(call)

    async def stream(self, stub_cls: Any, method: str, request: Any, session: str = "") -> tuple[str, Any]:
        """Opens a server stream on the serving node: the leader of
        ``session``'s partition when known (as unary's). Returns the node's
        address, for stream_failed, and the call."""
        addr = self._leader_of(self._partition(None, session)) or await self.node()
        fn = getattr(self._stub(addr, stub_cls), method)
        call = fn(request, metadata=self.metadata, wait_for_ready=not self.multi)
        # Known to a TLS reload, which keeps the stream's channel open until it ends.
        self._streams.setdefault(addr, weakref.WeakSet()).add(call)
        return addr, call

    def stream_failed(self, addr: str, err: grpc.RpcError, session: str = "") -> None:
        """Learns from a stream of ``session`` that failed on addr, as from
        a unary call: a partition leader that did not answer is forgotten."""
        if err.code() in _LOST:
            self._forget(self._partition(None, session), addr)
        self._failed(addr, err)
        if self.multi:
            self._learn(None, session, addr, _trailers(err), False)
