"""A rate_limit's Retry-After: read from a provider SDK error's HTTP headers
(retry-after-ms, retry-after in seconds or as an HTTP date; a bad one is
ignored), given by a ModelError or a demo script's error, and reported as
AttemptFailure.retry_after_ms (against a fake node)."""

from __future__ import annotations

import email.parser
import email.utils
import http.client
import time
import urllib.error

import pytest

import dex
from dex.demo.script import Model, ScriptError, parse_script
from dex.errors import retry_after_ms
from dex.v1 import types_pb2
from test_usage import _Ledger, _demo_input, _run_model, _user

RATE_LIMIT = types_pb2.ERROR_TYPE_RATE_LIMIT


class _Response:
    def __init__(self, status: int, headers: dict) -> None:
        self.status_code, self.headers = status, headers


class SDKError(Exception):
    """As the openai and anthropic SDKs raise: the HTTP answer in .response,
    its headers a mapping (httpx.Headers there, a plain dict here)."""

    def __init__(self, status: int, headers: dict, message: str = "provider error") -> None:
        super().__init__(message)
        self.response = _Response(status, headers)
        self.status_code = status


def _urllib_error(status: int, headers: str) -> urllib.error.HTTPError:
    msg = email.parser.Parser(_class=http.client.HTTPMessage).parsestr(headers + "\r\n\r\n")
    return urllib.error.HTTPError("https://provider.example/v1", status, "refused", msg, None)


def _http_date(unix: float) -> str:
    return email.utils.formatdate(unix, usegmt=True)


NOW = 1_700_000_000.0


@pytest.mark.parametrize("headers,want", [
    ({"retry-after-ms": "1500"}, 1.5),
    ({"retry-after-ms": "20.5"}, 0.0205),
    ({"retry-after": "7"}, 7.0),
    ({"retry-after": "0.25"}, 0.25),
    ({"Retry-After": "3"}, 3.0),  # a header's name in any case
    ({"retry-after": _http_date(NOW + 30)}, 30.0),
    ({"retry-after": "Tue, 14 Nov 2023 22:13:50 -0000"}, 30.0),  # a date without a zone is UTC
    ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),  # milliseconds first
    ({"retry-after-ms": "soon", "retry-after": "9"}, 9.0),  # a bad one falls back to the other
])
def test_retry_after_from_each_header_form(headers, want):
    assert dex.retry_after_from_headers(headers, now=NOW) == pytest.approx(want)


@pytest.mark.parametrize("headers", [
    {},
    {"retry-after": "soon"},
    {"retry-after": ""},
    {"retry-after": "-5"},
    {"retry-after": "0"},
    {"retry-after": "nan"},
    {"retry-after": "inf"},
    {"retry-after-ms": "-1"},
    {"retry-after": _http_date(NOW - 60)},  # a date gone by
    {"retry-after": "Tue, 99 Nov 2023 99:99:99 GMT"},
    {"x-ratelimit-reset": "5"},
])
def test_a_bad_or_missing_retry_after_is_ignored(headers):
    assert dex.retry_after_from_headers(headers, now=NOW) is None


def test_an_http_date_counts_from_the_clock():
    got = dex.retry_after_from_headers({"retry-after": _http_date(time.time() + 120)})
    assert got is not None and 100 < got <= 120


def test_retry_after_of_an_sdk_error_and_what_it_was_raised_from():
    assert dex.retry_after_of(SDKError(429, {"retry-after": "2"})) == 2.0
    # urllib's HTTPError holds its headers (an http.client.HTTPMessage) itself.
    assert dex.retry_after_of(_urllib_error(429, "Retry-After-Ms: 40")) == pytest.approx(0.04)
    # A handler's own error raised from the SDK's.
    try:
        try:
            raise SDKError(429, {"retry-after": "4"})
        except SDKError as e:
            raise RuntimeError("the provider refused") from e
    except RuntimeError as wrapped:
        assert dex.retry_after_of(wrapped) == 4.0
    # A ModelError's own retry_after comes first, else its cause's headers.
    try:
        raise dex.ModelError("rate_limit", "slow down", retry_after=1.5) from SDKError(429, {"retry-after": "9"})
    except dex.ModelError as e:
        assert dex.retry_after_of(e) == 1.5
    try:
        raise dex.ModelError("rate_limit", "slow down") from SDKError(429, {"retry-after": "9"})
    except dex.ModelError as e:
        assert dex.retry_after_of(e) == 9.0
    assert dex.retry_after_of(SDKError(429, {})) is None
    assert dex.retry_after_of(ValueError("?")) is None
    assert dex.retry_after_of(None) is None


def test_model_error_takes_a_retry_after_in_seconds():
    assert dex.ModelError("rate_limit").retry_after is None
    assert dex.ModelError("rate_limit", "slow", retry_after=2).retry_after == 2
    assert dex.ModelError("rate_limit", retry_after=10**400).retry_after == 10**400
    for bad in (-1, float("nan"), float("inf"), "5", True):
        with pytest.raises(dex.DexError, match="retry_after must be a number of seconds from 0"):
            dex.ModelError("rate_limit", retry_after=bad)


def test_http_model_error_reads_the_retry_after_of_a_rate_limit_only():
    e = dex.http_model_error(429, "too many requests", {"retry-after": "6"})
    assert e.error_type == RATE_LIMIT and e.retry_after == 6.0
    assert dex.http_model_error(429, "too many requests").retry_after is None
    e = dex.http_model_error(503, "unavailable", {"retry-after": "6"})
    assert e.error_type == types_pb2.ERROR_TYPE_SERVER_ERROR and e.retry_after is None


def test_retry_after_ms_rounds_to_the_millisecond():
    assert retry_after_ms(None) == 0
    assert retry_after_ms(0) == 0
    assert retry_after_ms(1.5) == 1500
    assert retry_after_ms(1.2344) == 1234
    assert retry_after_ms(0.0001) == 1  # a Retry-After is never sent as none
    assert retry_after_ms(1e300) == retry_after_ms(10**400) == 2**63 - 1  # the wire's int64


def test_the_failure_report_carries_the_retry_after_of_a_rate_limit():
    """Each way a model handler's error gives a Retry-After reaches
    AttemptFailure.retry_after_ms; a failure of another type, or a tool's,
    carries none."""
    errors = {
        "sdk-ms": lambda: SDKError(429, {"retry-after-ms": "1500"}),
        "sdk-seconds": lambda: SDKError(429, {"retry-after": "2.25"}),
        "sdk-date": lambda: SDKError(429, {"retry-after": _http_date(time.time() + 60)}),
        "sdk-bad": lambda: SDKError(429, {"retry-after": "later"}),
        "urllib": lambda: _urllib_error(429, "Retry-After: 4"),
        "model-error": lambda: dex.ModelError("rate_limit", "slow down", retry_after=3),
        "overloaded": lambda: SDKError(529, {"retry-after": "5"}),
        "typed-other": lambda: dex.ModelError("server_error", "oops", retry_after=5),
    }
    names = list(errors)

    def model(inp: dex.ModelInput):
        raise errors[inp.history[0].text]()

    reports = _run_model(model, [[_user(1, n)] for n in names])
    got = {n: reports[f"m{i}"].failure for i, n in enumerate(names)}
    assert all(f.error_type == RATE_LIMIT for n, f in got.items() if n.startswith(("sdk", "urllib", "model")))
    assert got["sdk-ms"].retry_after_ms == 1500
    assert got["sdk-seconds"].retry_after_ms == 2250
    assert 50_000 < got["sdk-date"].retry_after_ms <= 60_000
    assert got["sdk-bad"].retry_after_ms == 0
    assert got["urllib"].retry_after_ms == 4000
    assert got["model-error"].retry_after_ms == 3000 and got["model-error"].error == "slow down"
    assert got["overloaded"].error_type == types_pb2.ERROR_TYPE_OVERLOADED and got["overloaded"].retry_after_ms == 0
    assert got["typed-other"].error_type == types_pb2.ERROR_TYPE_SERVER_ERROR
    assert got["typed-other"].retry_after_ms == 0


SCRIPT = """{"turns": [
  {"match": "busy", "outputs": [{"error": {"type": "rate_limit", "retry_after_ms": 1234}}, {"text": "ok"}]},
  {"match": "plain", "outputs": [{"error": {"type": "rate_limit"}}, {"text": "ok"}]}
]}"""


def test_the_demo_scripts_error_takes_retry_after_ms():
    model = Model(parse_script(SCRIPT), _Ledger(), "w")
    _, out, err = model.output(_demo_input(_user(1, "busy")))
    assert out is None and err.error_type == RATE_LIMIT and err.message == "scripted rate_limit error"
    assert retry_after_ms(err.retry_after) == 1234
    _, _, err = model.output(_demo_input(_user(1, "plain")))
    assert err.retry_after is None
    _, out, err = model.output(_demo_input(_user(1, "busy"), attempt=2))
    assert err is None and out.text == "ok"


def test_the_demo_reports_a_scripted_retry_after():
    model = Model(parse_script(SCRIPT), _Ledger(), "w")
    reports = _run_model(model.run_model, [[_user(1, "busy")], [_user(1, "plain")]])
    assert (reports["m0"].failure.error_type, reports["m0"].failure.retry_after_ms) == (RATE_LIMIT, 1234)
    assert (reports["m1"].failure.error_type, reports["m1"].failure.retry_after_ms) == (RATE_LIMIT, 0)


@pytest.mark.parametrize("value,msg", [
    ("-1", "retry_after_ms must be from 0 to 2\\*\\*63-1, not -1"),
    ("9223372036854775808", "retry_after_ms must be from 0 to 2\\*\\*63-1"),
    ("1.5", "field 'retry_after_ms' has the wrong type"),
    ('"1000"', "field 'retry_after_ms' has the wrong type"),
])
def test_the_demo_refuses_a_bad_retry_after_ms(value, msg):
    with pytest.raises(ScriptError, match=msg):
        parse_script('{"default":[{"error":{"type":"rate_limit","retry_after_ms":%s}}]}' % value)
