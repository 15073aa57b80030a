"""Small expositions in the shape of SGLang's and vLLM's `/metrics`, rendered with
prometheus_client here for the tests that need to choose each value (an inconsistent one, a
family left out). They are not the engines' own: tests/fixtures/engines/ holds those, rendered by
the engines' code, and the mapping is tested on them too.

Every argument is a value; None leaves its series out. `form` is `colon` (`sglang:x`) or
`underscore` (`sglang_x`)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

RANK = {"model_name": "m", "tp_rank": "0", "pp_rank": "0"}


def _name(vendor: str, name: str, form: str) -> str:
    return f"{vendor}{':' if form == 'colon' else '_'}{name}"


def sglang(*, mamba_total: float | None = 512, mamba_used: float | None = 100,
           host_total: float | None = 65536, host_used: float | None = 4096,
           page_size: float | None = 64, requests: float | None = 10,
           prompt: float | None = 4000, cached_device: float | None = 1000,
           cached_host: float | None = None, backup_tokens: float | None = 3000,
           load_back_tokens: float | None = None, dropped_host_pressure: float | None = 0,
           backup_bytes: float | None = 1 << 20, load_back_bytes: float | None = None,
           form: str = "colon", created: bool = True) -> str:
    reg = CollectorRegistry()
    n = lambda name: _name("sglang", name, form)  # noqa: E731

    def gauge(name: str, value: float | None) -> None:
        if value is not None:
            Gauge(n(name), name, list(RANK), registry=reg).labels(**RANK).set(value)

    gauge("hicache_host_mamba_total_states", mamba_total)
    gauge("hicache_host_mamba_used_states", mamba_used)
    gauge("hicache_host_total_tokens", host_total)
    gauge("hicache_host_used_tokens", host_used)
    gauge("page_size", page_size)
    tok = ["model_name", "is_streaming"]
    for name, value in (("num_requests", requests), ("prompt_tokens", prompt)):
        if value is not None:
            Counter(n(name), name, tok, registry=reg).labels("m", "false").inc(value)
    cached = Counter(n("cached_tokens"), "cached", ["model_name", "cache_source"], registry=reg)
    for source, value in (("device", cached_device), ("host", cached_host)):
        if value is not None:
            cached.labels("m", source).inc(value)
    pool = [*RANK, "pool"]
    for name, value in (("hicache_backup_tokens", backup_tokens),
                        ("load_back_tokens", load_back_tokens)):
        c = Counter(n(name), name, pool, registry=reg)
        if value is not None:
            c.labels(**RANK, pool="kv").inc(value)
    dropped = Counter(n("hicache_dropped_tokens"), "dropped", [*pool, "reason"], registry=reg)
    if dropped_host_pressure is not None:
        dropped.labels(**RANK, pool="kv", reason="host_pressure").inc(dropped_host_pressure)
    for name, value in (("hicache_backup_bytes", backup_bytes),
                        ("load_back_bytes", load_back_bytes)):
        c = Counter(n(name), name, list(RANK), registry=reg)
        if value is not None:
            c.labels(**RANK).inc(value)
    text = generate_latest(reg).decode()
    if not created:
        text = "\n".join(line for line in text.splitlines() if "_created" not in line) + "\n"
    return text


def vllm(*, store_bytes: float | None = 1 << 20, load_bytes: float | None = 1 << 19,
         total_bytes: bool = False, local_compute: float | None = 500,
         device: float | None = 300, host: float | None = 200, stores: float | None = 4,
         requests: float | None = 5, form: str = "colon") -> str:
    reg = CollectorRegistry()
    n = lambda name: _name("vllm", name, form)  # noqa: E731
    labels = ["model_name", "engine"]
    if total_bytes:  # the deprecated family, by direction
        c = Counter(n("kv_offload_total_bytes"), "bytes", [*labels, "transfer_type"],
                    registry=reg)
        if store_bytes is not None:
            c.labels("m", "0", "GPU_to_CPU").inc(store_bytes)
        if load_bytes is not None:
            c.labels("m", "0", "CPU_to_GPU").inc(load_bytes)
    else:
        for name, value in (("kv_offload_store_bytes", store_bytes),
                            ("kv_offload_load_bytes", load_bytes)):
            if value is not None:
                Counter(n(name), name, labels, registry=reg).labels("m", "0").inc(value)
    if stores is not None:
        size = Histogram(n("kv_offload_store_size"), "sizes", labels, registry=reg,
                         buckets=(1 << 20, float("inf")))
        child = size.labels("m", "0")  # created at 0 stores, as the engine's loggers do
        for _ in range(int(stores)):
            child.observe(1000)
    if local_compute is not None:
        Counter(n("prompt_tokens_by_source"), "by source", [*labels, "source"],
                registry=reg).labels("m", "0", "local_compute").inc(local_compute)
    cached = Counter(n("prompt_tokens_cached_by_source"), "cached", [*labels, "source"],
                     registry=reg)
    for name, value in (("device", device), ("host", host)):
        if value is not None:
            cached.labels("m", "0", name).inc(value)
    Counter(n("prompt_tokens"), "prompt", labels, registry=reg).labels("m", "0").inc(
        (local_compute or 0) + (device or 0) + (host or 0))
    if requests is not None:
        Counter(n("request_success"), "ok", [*labels, "finished_reason"],
                registry=reg).labels("m", "0", "stop").inc(requests)
    return generate_latest(reg).decode()


def helios() -> str:
    reg = CollectorRegistry()
    Counter("helios:prompt_tokens", "prompt", registry=reg).inc(10)
    return generate_latest(reg).decode()
