"""The hostile cases: what a broken, buggy or malicious engine sends, and what the sidecar must make
of it. `docs/hardening.md` has this table in prose; keep the two in step."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from typing import Any

from exporter.labels import MISS_REASONS
from tests.hostile.stub import (
    SANE_METRICS,
    Behaviour,
    Case,
    drip,
    each_time,
    flood,
    hang_up,
    head,
    json_body,
    raw,
    respond,
    sane_snapshot,
    stall,
)

MARK = "ZQXJ"  # planted in every hostile string; must never appear in /metrics
# Quotes, a newline, a closing brace and a fake sample: what would break the exposition if it
# reached a label value unescaped.
INJECT = f'{MARK}"}} 1\nhelios_fake{{a="{MARK}'
MiB = 1024 * 1024
SIDECAR_MAX_BYTES = 8 * MiB  # the sidecar's default --max-response-bytes


def mutated(mutate: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
    snap = sane_snapshot()
    mutate(snap)
    return snap


def snap_case(name: str, mutate: Callable[[dict[str, Any]], Any], reason: str | None,
              doc: str, **kw: Any) -> Case:
    return Case(name, snapshot=json_body(mutated(mutate)), snapshot_reason=reason, doc=doc, **kw)


def body_case(name: str, body: bytes, reason: str | None, doc: str, **kw: Any) -> Case:
    return Case(name, snapshot=respond(200, body, {"Content-Type": "application/json"}),
                snapshot_reason=reason, doc=doc, **kw)


def both(name: str, behaviour: Behaviour, reason: str, doc: str) -> Case:
    """A transport-level failure on both engine paths at once."""
    return Case(name, snapshot=behaviour, metrics=behaviour, snapshot_reason=reason,
                metrics_reason=reason, doc=doc)


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(snap: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = snap
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value

    return mutate


# -- extra checks on the parsed /metrics of a case -------------------------------------------------
Families = dict[str, Any]


def _miss_reasons_closed(fams: Families) -> None:
    samples = fams["helios_offload_lookup_misses"].samples
    reasons = {s.labels["reason"] for s in samples}
    assert reasons == set(MISS_REASONS), reasons


def _many_misses_folded(fams: Families) -> None:
    _miss_reasons_closed(fams)
    total = sum(s.value for s in fams["helios_offload_lookup_misses"].samples)
    assert total == sum(range(5000)) + 5000, total


def _request_ids_capped(fams: Families) -> None:
    requests = fams["helios_engine_native_requests"]
    assert [(s.labels, s.value) for s in requests.samples] == [
        ({"generation": "g-sane-0001"}, 30000.0)]
    dropped = {s.labels["family"]: s.value
               for s in fams["helios_exporter_engine_labels_dropped"].samples}
    assert dropped["requests"] >= 60000  # model_name and request_id of every series


def _le_capped(fams: Families) -> None:
    # 5000 distinct buckets against a guard of 200 series: the histogram cannot stay cumulative
    # and complete, so the family is dropped and the loss counted, rather than cut silently.
    assert "helios_engine_native_time_to_first_token_seconds" not in fams
    dropped = {s.labels["family"]: s.value
               for s in fams["helios_exporter_engine_labels_dropped"].samples}
    assert dropped["time_to_first_token_seconds"] > 0
    # The sane families on the same page still pass.
    assert "helios_engine_native_prompt_tokens" in fams


def _gauge_capped(fams: Families) -> None:
    assert len(fams["helios_engine_native_num_running_reqs"].samples) == 1


def _one_generation(fams: Families) -> None:
    (info,) = fams["helios_monitoring_generation_info"].samples
    assert info.labels["generation"].startswith("g-flap-")
    gens = {s.labels.get("generation") for f in fams.values() for s in f.samples} - {None}
    assert len(gens) == 1, gens  # the pass-through is tagged with the same poll's generation


def _regression_counted(fams: Families) -> None:
    assert fams["helios_exporter_snapshot_regressions"].samples[0].value >= 1


def _sane_metrics_plus(extra: str) -> str:
    return SANE_METRICS + extra


# -- metrics payloads ------------------------------------------------------------------------------
REQUEST_IDS = "# TYPE helios:requests_total counter\n" + "".join(
    f'helios:requests_total{{model_name="{MARK}",request_id="{MARK}-{i:05d}"}} 1\n'
    for i in range(30000))
LE_EXPLOSION = "".join(
    f'helios:time_to_first_token_seconds_bucket{{le="{i / 1000}"}} {i}\n' for i in range(5000)
) + ('helios:time_to_first_token_seconds_bucket{le="+Inf"} 5000\n'
     "helios:time_to_first_token_seconds_sum 1\n"
     "helios:time_to_first_token_seconds_count 5000\n")
METRICS_INJECTION = (
    f"# HELP helios:num_running_reqs {INJECT}\n"
    f'helios:num_running_reqs{{model_name="{MARK}\\"}} 1\\n",x="{MARK}\\\\"}} 7\n'
    f'helios:num_running_reqs{{{MARK}="a"}} 7\n'
    f'helios:prompt_tokens_total{{le="{MARK}"}} 5\n'
    f'{MARK}:num_running_reqs{{a="b"}} 1\n'
    f'sglang:num_queue_reqs{{model_name="{INJECT.replace(chr(10), " ")}"}} 2\n'
)
METRICS_MALFORMED = "\n".join([
    'helios:num_running_reqs{model_name="m} 3',
    "helios:token_usage not-a-number",
    "helios:prompt_tokens_total 1 2 3 4",
    'helios:e2e_request_latency_seconds_bucket{model_name="m"} 3',
    "helios:num_queue_reqs{",
    "helios:generation_tokens_total -5",
])
METRICS_WEIRD_VALUES = "\n".join([
    "helios:num_running_reqs NaN",
    "helios:token_usage +Inf",
    "helios:gen_throughput -Inf",
    "helios:prompt_tokens_total 1e400",
    "helios:generation_tokens_total 1e308",
    "helios:num_used_tokens 1_000",
    "helios:cache_hit_rate -0.0 1764389520000",
]) + "\n"

GZIP_BOMB = gzip.compress(b" " * (SIDECAR_MAX_BYTES + MiB), compresslevel=9)


def _deep(depth: int) -> bytes:
    return b'{"schema_version": 1, "generation": "g-deep", "x": ' + b"[" * depth + b"]" * depth + b"}"


SANE_JSON = json.dumps(sane_snapshot()).encode()


CASES: list[Case] = [
    # --- transport and framing --------------------------------------------------------------------
    both("hang_up_without_response", hang_up(), "connect",
         "accepts the request, closes without a byte"),
    both("not_http", raw(b"SSH-2.0-OpenSSH_9.6\r\n" + MARK.encode() + b"\r\n"), "connect",
         "something else listens on the port"),
    both("garbage_status_line", raw(b"HTTP/1.1 OK 200 " + MARK.encode() + b"\r\n\r\n{}"),
         "connect", "a status line that is not HTTP"),
    Case("truncated_body_content_length",
         snapshot=raw(head(200, length=len(SANE_JSON)) + SANE_JSON[: len(SANE_JSON) // 2]),
         metrics=raw(head(200, length=5000) + SANE_METRICS.encode()[:100]),
         snapshot_reason="connect", metrics_reason="connect",
         doc="Content-Length larger than the body; the connection closes"),
    both("bad_content_length", raw(b"HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\n{}"),
         "connect", "a negative Content-Length"),
    body_case("truncated_json", SANE_JSON[:-40], "decode",
              "well framed, but the JSON stops half-way"),
    both("invalid_chunked_encoding",
         raw(head(200, {"Transfer-Encoding": "chunked"}) + b"zz\r\n" + SANE_JSON + b"\r\n0\r\n\r\n"),
         "connect", "a chunk size that is not hex"),
    Case("chunked_without_last_chunk",
         snapshot=raw(head(200, {"Transfer-Encoding": "chunked"})
                      + f"{len(SANE_JSON):x}\r\n".encode() + SANE_JSON + b"\r\n"),
         snapshot_reason="connect", doc="chunked body cut before the terminating 0-chunk"),
    Case("informational_100_then_200",
         snapshot=raw(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 102 Processing\r\n\r\n"
                      + head(200, length=len(SANE_JSON)) + SANE_JSON),
         doc="1xx interim responses before a good 200 are skipped: the source stays up"),
    both("switching_protocols_101",
         raw(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"),
         "connect", "an unasked-for protocol switch"),
    both("bogus_1xx_then_close", raw(b"HTTP/1.1 199 Odd\r\n\r\n"), "connect",
         "an interim response and nothing after it"),
    both("redirect_loop_302", respond(302, "", {"Location": "/debug/offload/snapshot"}),
         "http_status", "redirects to itself: not followed"),
    both("redirect_301_elsewhere", respond(301, "", {"Location": "http://169.254.169.254/"}),
         "http_status", "redirects off the engine: not followed"),
    Case("http_400", snapshot=respond(400, "bad request"), snapshot_reason="http_status",
         doc="4xx"),
    both("http_401_html", respond(401, f"<html><body>{MARK} login</body></html>",
                                  {"Content-Type": "text/html"}), "http_status", "4xx with HTML"),
    Case("http_404", snapshot=respond(404, "not found"), snapshot_reason="http_status",
         doc="an engine build without the debug endpoint"),
    Case("http_429", snapshot=respond(429, "slow down", {"Retry-After": "3600"}),
         snapshot_reason="http_status", doc="rate limited"),
    both("http_500_html", respond(500, f"<html><h1>Internal Server Error</h1>{MARK}</html>",
                                  {"Content-Type": "text/html"}), "http_status",
         "5xx HTML error page"),
    both("http_503", respond(503, "unavailable"), "http_status", "5xx"),
    both("http_999", respond(999, "odd"), "http_status", "a status code outside every class"),
    body_case("html_error_page_200", f"<!doctype html><title>{MARK}</title>".encode(), "decode",
              "a proxy's HTML error page with status 200"),
    body_case("empty_200", b"", "decode", "200 with an empty body"),
    Case("no_content_204", snapshot=raw(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n"),
         snapshot_reason="decode", doc="204: no body to parse"),
    body_case("not_json", f"generation={MARK}".encode(), "decode", "plain text"),
    body_case("invalid_utf8", SANE_JSON[:40] + b"\xff\xfe\xc3\x28" + SANE_JSON[40:], "decode",
              "bytes that are not UTF-8"),
    body_case("utf8_bom", "\ufeff".encode() + SANE_JSON, "decode", "a byte-order mark"),
    Case("bad_gzip", snapshot=respond(200, b"\x1f\x8b" + MARK.encode() * 10,
                                      {"Content-Encoding": "gzip"}),
         snapshot_reason="decode", doc="Content-Encoding gzip over bytes that are not gzip"),
    Case("gzip_bomb", snapshot=respond(200, GZIP_BOMB, {"Content-Encoding": "gzip"}),
         snapshot_reason="too_large", doc="9 KiB of gzip that inflates past the size limit"),
    Case("oversized_with_content_length",
         snapshot=flood(head(200, length=64 * SIDECAR_MAX_BYTES), b" " * 65536,
                        2 * SIDECAR_MAX_BYTES),
         snapshot_reason="too_large", doc="declares 512 MiB: refused before reading"),
    Case("oversized_without_content_length",
         snapshot=flood(head(200, {"Content-Type": "application/json"}), b" " * 65536,
                        4 * SIDECAR_MAX_BYTES),
         snapshot_reason="too_large",
         doc="no Content-Length, 32 MiB until the connection closes: cut at the limit"),
    Case("oversized_chunked",
         snapshot=flood(head(200, {"Transfer-Encoding": "chunked"}),
                        b"10000\r\n" + b" " * 65536 + b"\r\n", 4 * SIDECAR_MAX_BYTES),
         snapshot_reason="too_large", doc="chunked, far over the limit"),
    both("stall_before_headers", stall(), "timeout", "reads the request, never answers"),
    both("stall_after_headers", stall(head(200, length=len(SANE_JSON)) + SANE_JSON[:10]),
         "timeout", "headers and ten bytes, then silence"),
    both("slow_drip_body", drip(head(200, length=len(SANE_JSON)), SANE_JSON, interval=0.1),
         "timeout", "one byte every 0.1 s: no read ever times out, the whole request must"),
    both("slow_drip_headers", drip(b"", b"HTTP/1.1 200 OK\r\nX-Pad: " + b"a" * 4096, interval=0.05),
         "timeout", "the status line and headers one byte at a time"),
    # --- JSON and schema ---------------------------------------------------------------------------
    body_case("deep_nesting", _deep(100_000), "decode", "100000 nested arrays"),
    body_case("deep_nesting_in_known_field",
              b'{"schema_version": 1, "offload": {"slabs": ' + b'{"row": ' * 300 + b"1"
              + b"}" * 300 + b"}}", "decode", "300 levels where a slab belongs: past the JSON "
              "depth limit (32), refused before parsing"),
    body_case("nesting_within_limit_in_known_field",
              b'{"schema_version": 1, "offload": {"slabs": ' + b'{"row": ' * 25 + b"1"
              + b"}" * 25 + b"}}", "schema", "25 levels where a slab belongs: parsed, and the "
              "schema refuses it"),
    body_case("top_level_array", b"[1, 2, 3]", "schema", "JSON, but not an object"),
    snap_case("unknown_schema_version", _set("schema_version", 2), "unsupported_version",
              "schema_version 2"),
    snap_case("schema_version_string", _set("schema_version", "1"), "unsupported_version",
              'schema_version "1"'),
    snap_case("schema_version_true", _set("schema_version", True), "schema",
              "schema_version true (equal to 1 in Python, not in JSON)"),
    snap_case("no_schema_version", lambda s: s.pop("schema_version"), "schema",
              "schema_version missing"),
    snap_case("wrong_type_string_count", _set("offload.slabs.row.free", "0"), "schema",
              'a count sent as "0"'),
    snap_case("wrong_type_bool_count", _set("admission.inflight_requests", True), "schema",
              "a count sent as true"),
    snap_case("wrong_type_section", _set("offload.slabs", [1, 2]), "schema",
              "a section that is a list"),
    snap_case("fractional_count", _set("offload.resident.records", 1.5), "schema",
              "a count with a fraction"),
    body_case("nan", SANE_JSON.replace(b'"started_at": 1764389520.25', b'"started_at": NaN'),
              "decode", "NaN is not JSON"),
    body_case("infinity", SANE_JSON.replace(b'"budget_bytes": 34359738368',
                                            b'"budget_bytes": Infinity'),
              "decode", "Infinity is not JSON"),
    body_case("overflow_1e400", SANE_JSON.replace(b'"budget_bytes": 34359738368',
                                                  b'"budget_bytes": 1e400'),
              "schema", "1e400 parses to inf: not a count"),
    body_case("huge_integer", SANE_JSON.replace(b'"budget_bytes": 34359738368',
                                                b'"budget_bytes": ' + b"9" * 5000),
              "decode", "a 5000-digit integer (over Python's int-string limit)"),
    snap_case("beyond_2_53", _set("offload.host.stores", 2**53 + 1), "schema",
              "a count beyond 2^53: not exact in a float sample"),
    snap_case("negative_count", _set("offload.evictions.row.attempts", -1), "schema",
              "a negative counter"),
    snap_case("free_above_capacity", _set("offload.slabs.page.free", 24577), "schema",
              "free above capacity"),
    snap_case("generation_too_long", _set("generation", "g" * 65), "schema",
              "a 65-character generation"),
    snap_case("generation_huge", _set("generation", MARK * 250_000), "schema",
              "a 1 MB generation"),
    snap_case("generation_non_ascii", _set("generation", f"g-{MARK}-\u00e9\u202e"), "schema",
              "non-ASCII and a right-to-left override"),
    snap_case("generation_trailing_newline", _set("generation", f"g-{MARK}\n"), "schema",
              "passes the pattern under re.search ($ before a final newline)"),
    # Every string field gets both injections in test_string_fields.py (in-process, fast);
    # through the real process, one field of each section.
    *[
        snap_case(f"injection_{field.replace('.', '_')}", _set(field, INJECT), "schema",
                  f"quotes, newline and braces in {field}")
        for field in ("generation", "ranks.0.gpu_uuid", "admission.state")
    ],
    # Identity strings are descriptive: an unusable one is left out (counted), not fatal.
    snap_case("injection_identity_package", _set("identity.package", INJECT), None,
              "quotes, newline and braces in identity.package: field dropped, snapshot used",
              markers=(MARK,)),
    snap_case("trailing_newline_identity", _set("identity.container_id", f"{MARK}\n"), None,
              "a trailing newline in identity.container_id: field dropped, snapshot used",
              markers=(MARK,)),
    snap_case("injection_miss_keys",
              _set("offload.lookups.misses", {INJECT: 1, f"no_prefix:{INJECT}": 2,
                                              f" evicted {MARK}": 3, "": 4, ":": 5,
                                              "key_mismatch\n:x": 6}),
              None, "miss keys are free text: mapped onto the closed set", markers=(MARK,),
              check=_miss_reasons_closed),
    snap_case("many_miss_reasons", _set("offload.lookups.misses",
                                        {f"{MARK}-{i}:{INJECT}": i for i in range(5000)}
                                        | {"no_prefix": 5000}),
              None, "5000 distinct miss keys: folded onto the 7 reasons", markers=(MARK,),
              check=_many_misses_folded),
    snap_case("too_many_miss_reasons", _set("offload.lookups.misses",
                                            {f"{MARK}-{i}": i for i in range(200_000)}),
              "schema", "200000 miss keys: over maxProperties, refused before jsonschema walks them"),
    snap_case("miss_value_wrong_type", _set("offload.lookups.misses", {"no_prefix": "7"}),
              "schema", "a miss count that is a string"),
    snap_case("unknown_fields", lambda s: s.update({MARK: {"labels": [INJECT] * 1000},
                                                    "offload_v2": INJECT}),
              None, "unknown fields are ignored", markers=(MARK,)),
    snap_case("unknown_slab_kind", _set(f"offload.slabs.{MARK}",
                                        {"capacity": 1, "free": 0, "record_bytes": 1}),
              None, "an unknown slab kind is ignored, not a label"),
    Case("generation_flapping",
         snapshot=each_time(lambda n: json_body(sane_snapshot(f"g-flap-{n}"))),
         check=_one_generation, doc="a new generation on every poll: one set of series, not more"),
    Case("counters_decrease",
         snapshot=json_body(mutated(lambda s: s["offload"]["evictions"]["row"].update(
             attempts=1, evicted=0))),
         check=_regression_counted, doc="counters going down within a generation: counted"),
    snap_case("too_many_ranks", _set("ranks", [{"rank": i, "gpu_uuid": f"GPU-{i}"}
                                               for i in range(65)]),
              "schema", "65 ranks, over maxItems"),
    # --- the engine's own /metrics --------------------------------------------------------------
    Case("metrics_request_ids", metrics=respond(200, _sane_metrics_plus(REQUEST_IDS)),
         markers=(MARK,), check=_request_ids_capped,
         doc="30000 request ids: dropped, summed, counted"),
    Case("metrics_le_explosion", metrics=respond(200, _sane_metrics_plus(LE_EXPLOSION)),
         check=_le_capped, doc="5000 distinct le values: capped by --max-series-per-family"),
    Case("metrics_label_injection", metrics=respond(200, _sane_metrics_plus(METRICS_INJECTION)),
         markers=(MARK,), check=_gauge_capped, doc="quotes, newlines, braces in labels and HELP"),
    Case("metrics_malformed", metrics=respond(200, METRICS_MALFORMED), metrics_reason="decode",
         doc="every allow-listed line malformed"),
    Case("metrics_weird_values", metrics=respond(200, METRICS_WEIRD_VALUES),
         doc="NaN, +-Inf, 1e400, 1_000, timestamps"),
    Case("metrics_invalid_utf8", metrics=respond(200, SANE_METRICS.encode() + b"\xff\xfe\n"),
         metrics_reason="decode", doc="bytes that are not UTF-8"),
    Case("metrics_oversized", metrics=flood(head(200), b"# pad\n" * 10000, 4 * SIDECAR_MAX_BYTES),
         metrics_reason="too_large", doc="32 MiB of /metrics"),
    Case("metrics_html_500", metrics=respond(500, f"<html>{MARK}</html>"),
         metrics_reason="http_status", doc="the engine's /metrics fails alone"),
]
