"""The server's Prometheus metrics, in a registry of its own (two apps in one process do not mix)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

#: Latency buckets in seconds: a short embedding takes milliseconds, a long document seconds.
LATENCY_BUCKETS = (0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
BATCH_INPUT_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048)
BATCH_TOKEN_BUCKETS = (16, 64, 256, 1024, 4096, 16384, 65536, 262144)


class ServerMetrics:
    """Requests by route and status, latency, tokens by route, batch sizes, queue depth, in flight."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "lmk_rag_requests", "HTTP requests answered", ["route", "status"], registry=self.registry
        )
        self.latency = Histogram(
            "lmk_rag_request_seconds",
            "Time to answer a request",
            ["route"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.tokens = Counter("lmk_rag_tokens", "Input tokens encoded", ["route"], registry=self.registry)
        self.batch_inputs = Histogram(
            "lmk_rag_batch_inputs", "Inputs per forward batch", buckets=BATCH_INPUT_BUCKETS, registry=self.registry
        )
        self.batch_tokens = Histogram(
            "lmk_rag_batch_tokens", "Tokens per forward batch", buckets=BATCH_TOKEN_BUCKETS, registry=self.registry
        )
        self.queue_depth = Gauge("lmk_rag_queue_depth", "Embedding requests waiting", registry=self.registry)
        self.in_flight = Gauge("lmk_rag_in_flight", "Requests being answered", registry=self.registry)

    def exposition(self) -> bytes:
        """The metrics in Prometheus' text format."""
        return generate_latest(self.registry)
