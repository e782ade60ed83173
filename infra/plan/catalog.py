"""What the planner knows about hardware and models, each figure with where it comes from.

Instance figures and prices are data: `instances.toml`, one dated table with a source for each
figure (`infra.plan.facts`). Memory bandwidth is an *effective* decode figure, not a datasheet
peak: calibrated on the one type measured, a range on every other (`decode_bandwidth`).

Model figures: layer layout from the model's configuration (transformers `gemma4` and vLLM's
`gemma4` model code); checkpoint size from the Hugging Face repository; the per-pod runtime overhead
is a measured quantity the planner cannot derive, so it is a calibrated model (`ModelProfile`).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from components.manifests.spec import GATEKEEPER_CONTAINER
from infra.plan import weights
from infra.plan.facts import FACTS, InstanceType

GIB = 1024**3
MIB = 1024**2


#: Memory the kernel never reports as MemTotal (firmware, kernel image, the page map), as a
#: fraction of the nominal size. Calibrated so that the EKS formula gives m7g.2xlarge the
#: 29.8 GiB of allocatable memory a real node reported.
VISIBLE_MEMORY_FRACTION = 0.9616
#: kubelet hard eviction threshold on EKS AMIs (memory.available<100Mi).
EVICTION_MIB = 100


def chip_bandwidth_gbps(generation: str) -> float:
    """The most one node of `generation` can stream: the chip's channels x their rate x the
    achievable fraction x the share an instance gets (GB/s; the facts table's [generations])."""
    g = FACTS.generations[generation]
    return g.ddr_channels * g.mt_per_s * 8 / 1000 * g.achievable_fraction * g.chip_share


#: The one node whose decode was measured (the facts table's `field-report`: 4.0 tokens/s single
#: stream of gemma-4-12B-it on two m7g.2xlarge) and the vCPUs of its pods.
_MEASURED = FACTS.sources["field-report"]
MEASURED_DECODE_TYPE, MEASURED_DECODE_CPU = _MEASURED.machine, _MEASURED.pod_vcpu
#: What measures a type's decode: the capacity run (`tools.bench.capacity`) on a stack of it.
DECODE_MEASUREMENT = "`make bench`"


@dataclass(frozen=True)
class DecodeBandwidth:
    """A pod's decode bandwidth (GB/s): one figure on the measured node, else a range.

    Low end: what the measured node streams, since a larger size of the same chip (the same cores
    and memory system, and more of both) does not stream less (assumed: EC2 publishes no per-size
    partition of bandwidth, the facts table's `chip_share`); a pod with fewer cores, the measured
    per-vCPU share of them; a chip with faster memory than the measured one is not credited for
    it, a slower one is charged. Single-stream decode, the first screen, `cheaper:`, the ranking
    and the bounds that wait on decode all use it. High end: the per-vCPU rate x the pod's cores,
    never above the chip's achievable bandwidth (`chip_bandwidth_gbps`); it only sets the
    optimistic side of ranges."""

    low: float
    high: float
    #: Whether this is the type measured (`MEASURED_DECODE_TYPE`), on no more cores than its
    #: measured pods had: the calibrated rate x the cores, one figure.
    measured: bool
    #: Where both ends come from, for the plan's `node bandwidth` row.
    basis: str


def decode_bandwidth(instance: InstanceType, cpu: float) -> DecodeBandwidth:
    """The decode bandwidth of a pod on `cpu` cores of `instance` (see `DecodeBandwidth`)."""
    rate, generation = instance.decode_gbps_per_vcpu, instance.generation
    chip = chip_bandwidth_gbps(generation)
    high = min(rate * cpu, chip)
    if instance.name == MEASURED_DECODE_TYPE and cpu <= MEASURED_DECODE_CPU:
        return DecodeBandwidth(high, high, True, f"{rate} GB/s per vCPU x {cpu:g} (calibrated)")
    reference = INSTANCE_TYPES[MEASURED_DECODE_TYPE]
    low = min(high, min(rate, reference.decode_gbps_per_vcpu) * min(cpu, MEASURED_DECODE_CPU))
    if cpu >= MEASURED_DECODE_CPU:
        floor = f"what {MEASURED_DECODE_TYPE}'s {MEASURED_DECODE_CPU} vCPUs stream (measured)"
        if rate > reference.decode_gbps_per_vcpu:
            floor += f", {generation}'s faster memory not counted"
        elif rate < reference.decode_gbps_per_vcpu:
            floor += f" scaled to {generation}'s slower memory"
    else:
        floor = f"{MEASURED_DECODE_TYPE}'s measured share per vCPU x {cpu:g}"
    if rate * cpu <= chip:
        ceiling = f"{rate} GB/s per vCPU x {cpu:g}"
    else:
        g = FACTS.generations[generation]
        ceiling = (
            f"the chip's memory, {g.ddr_channels} x {g.mt_per_s} MT/s x 8 B x "
            f"{g.achievable_fraction} achievable (ceiling)"
        )
    return DecodeBandwidth(
        low,
        high,
        False,
        f"extrapolated: at least {low:.0f} GB/s, {floor}; at most {high:.0f} GB/s, {ceiling}; "
        f"one {DECODE_MEASUREMENT} on {instance.name} settles it",
    )


def node_decode_gbps(instance: InstanceType, cpu: float) -> float:
    """The decode bandwidth every promise of a plan rests on: the low end of
    `decode_bandwidth`, which on the measured node is its calibrated figure."""
    return decode_bandwidth(instance, cpu).low


#: Generations whose cores have bf16 instructions; vLLM's Arm CPU backend runs bf16 from Graviton3
#: on (FACTS.md), and the image serves the checkpoint's bf16 weights.
BF16_GENERATIONS = ("graviton3", "graviton4")

#: Peak bf16 matrix rate per vCPU in GFLOP/s (fp32 on Graviton2): ASSUMED from the cores'
#: datasheets, clock x FLOP per cycle (the facts table's [generations] and its `peak-gflops`).
PEAK_GFLOPS_PER_VCPU: dict[str, float] = {
    name: g.peak_gflops_per_vcpu for name, g in FACTS.generations.items()
}
#: The fraction of that peak vLLM's CPU prefill reaches, (slow, fast), on each linear path vLLM
#: 0.31 can take for bf16 weights (`model_executor/layers/utils.py`
#: `dispatch_cpu_unquantized_gemm`): oneDNN's matmul, or, when oneDNN cannot create the primitive
#: for this CPU, torch's generic linear after the warning "Failed to create oneDNN linear,
#: fallback to torch linear". The stack key `prefillPath` names the path a plan's bounds assume,
#: and the deployed leader refuses to start on another (`components.manifests.probes`).
#:
#: oneDNN, slow end 29%: DERIVED from a measurement with a stated margin. The rehearsal's
#: prefill probe (`tools.rehearse.measure.prefill_probe`: full-width layers of gemma-4-12B-it
#: served by vLLM 0.31, one step of the planned 512 tokens) measured 59.2-59.9% of a 332 GFLOP/s
#: per-core bf16 peak on 2026-12-02 and 2026-12-03 on an AMD EPYC with avx512_bf16, vLLM on
#: oneDNN (its debug dispatch line "using oneDNN onednn_mm", no fallback logged). The slow end is
#: half the lower figure, rounded down: a node that reaches only half that efficiency still
#: finishes every healthy step within every bound that rests on it (the engine's step timeout,
#: the first-byte and reply timeouts, the drain grace). On Graviton vLLM sends bf16 linears to
#: oneDNN with the Arm Compute Library by default (vLLM PRs #25948 and #27183, read 2026-12-02);
#: its efficiency there is unmeasured, which is what the margin is for, and what every deployed
#: leader measures on its own node at start (`infra.plan.liveness`).
#:
#: fallback, slow end 8%: DERIVED: 10.9% measured by the same probe on 2026-12-02 on a 2-core
#: AMD EPYC with AVX2 and no bf16 instructions, where vLLM logged the fallback (against its
#: 78 GFLOP/s fp32 FMA peak), rounded down for run-to-run spread.
#:
#: Fast end, 70% on both: ASSUMED, a large-GEMM efficiency; it only sets the optimistic side of
#: ranges. oneDNN PR #4315 (below) shows ACL's bf16 matmul near the assumed peak on large shapes.
#:
#: No published vLLM CPU bf16 prefill figure on Graviton3 or Graviton4 was found (searched
#: 2026-12-01 and 2026-12-02: aws-graviton-getting-started machinelearning/vllm.md gives build
#: steps only; Arm's vllm-acceleration learning path, tested on c8g.12xlarge, shows INT4
#: DeepSeek-V2-Lite log lines only, whose "Avg prompt throughput" averages eight short prompts
#: over a 10 s window, not a prefill rate; its vllm-benchmark-quantisation path gives INT8/BF16
#: ratios on an unnamed 96-core machine; vLLM PR #33787, 2026-02-04, gives w8a8 mixed prompt and
#: generation tokens/s on Neoverse V1, not bf16 prefill).
PREFILL_EFFICIENCY: dict[str, tuple[float, float]] = {
    "onednn": (0.29, 0.70),
    "fallback": (0.08, 0.70),
}
#: Prefill arithmetic rate per vCPU in GFLOP/s, (slow, fast), per path: peak x efficiency. The
#: one rate every prefill figure of a plan derives from (`infra.plan.prefill`).
PREFILL_GFLOPS_PER_VCPU: dict[str, dict[str, tuple[float, float]]] = {
    path: {
        generation: (round(peak * low, 1), round(peak * high, 1))
        for generation, peak in PEAK_GFLOPS_PER_VCPU.items()
    }
    for path, (low, high) in PREFILL_EFFICIENCY.items()
}
PREFILL_SOURCES = {
    "onednn": "modelled: 29-70% of an assumed peak, on vLLM's oneDNN path",
    "fallback": "modelled: 8-70% of an assumed peak, on torch's fallback linear",
}
PREFILL_SOURCE = PREFILL_SOURCES["onednn"]
#: How each Graviton prefill figure is known: measured (on Graviton), derived (from a
#: measurement elsewhere, or from other figures) or assumed. None is measured on Graviton yet.
PREFILL_PROVENANCE: dict[str, str] = {
    "peak GFLOP/s per vCPU": "assumed: clock x bf16 FLOP per cycle from the cores' datasheets",
    "efficiency on vLLM's oneDNN path, slow end (29%)": "derived: half of 59.2-59.9% of a "
    "332 GFLOP/s per-core bf16 peak measured by the prefill probe on AMD EPYC with avx512_bf16, "
    "vLLM 0.31 on oneDNN (no fallback logged), ~820 prompt tokens/s per layer (2026-12-02, "
    "2026-12-03); the end every bound that can kill work uses",
    "efficiency on torch's fallback, slow end (8%)": "derived: 10.9% measured by the prefill "
    "probe on x86 AVX2 without bf16, vLLM logging the fallback (2026-12-02), rounded down; "
    "used only with `prefillPath` fallback",
    "efficiency, fast end (70%)": "assumed: a large-GEMM efficiency; optimistic ends of ranges",
    "efficiency on Graviton": "unmeasured: every leader measures its own step at start and "
    "refuses a path its plan did not assume",
    "prefill GFLOP/s per vCPU": "derived: peak x efficiency",
    "time to first token, step bounds": "derived: the prefill GFLOP/s over each step's arithmetic",
}
#: The load balancer closes a TCP flow that carries nothing for this long: the default for TCP
#: listeners and fixed for TLS listeners (Elastic Load Balancing docs, "Update the TCP idle
#: timeout for your Network Load Balancer listener", read 2026-12-03). Keepalives count: "Clients
#: or targets can use TCP keepalive packets to restart the idle timeout", and "When a TLS
#: listener receives a TCP keepalive packet from either a client or a target, the load balancer
#: generates TCP keepalive packets and sends them to both the front-end and back-end
#: connections every 20 seconds" (User Guide for Network Load Balancers, "Network Load
#: Balancers", section "Connection idle timeout", read 2026-12-03). The gatekeeper's TCP
#: keepalives (`components.manifests.gatekeeper_conf.KEEPALIVE_IDLE_S`) come well before it.
NLB_IDLE_TIMEOUT_S = 350
#: Every type the planner knows, from the facts table (`infra.plan.facts`).
INSTANCE_TYPES: dict[str, InstanceType] = FACTS.types


def is_graviton_name(name: str) -> bool:
    """Graviton families carry a `g` after the generation digit (m7g, c7gn, r8gd)."""
    return re.fullmatch(r"[a-z]+\d+g[a-z]*\.[a-z0-9]+", name) is not None


def kube_reserved_mib(instance: InstanceType) -> int:
    """EKS AMI bootstrap formula: 11 MiB per pod the node may run, plus 255 MiB."""
    return 11 * instance.max_pods + 255


def kube_reserved_millicpu(instance: InstanceType) -> int:
    """EKS AMI bootstrap formula: 6% of core 1, 1% of core 2, 0.5% of cores 3-4, 0.25% beyond."""
    cores = instance.vcpu
    reserved = 60.0 + (10 if cores >= 2 else 0) + 5 * max(0, min(cores, 4) - 2)
    reserved += 2.5 * max(0, cores - 4)
    return int(reserved)


def allocatable_mib(instance: InstanceType) -> float:
    """Node allocatable memory: visible memory minus kube-reserved minus the eviction threshold."""
    visible = instance.memory_gib * 1024 * VISIBLE_MEMORY_FRACTION
    return visible - kube_reserved_mib(instance) - EVICTION_MIB


def allocatable_millicpu(instance: InstanceType) -> int:
    """Node allocatable CPU in millicores."""
    return instance.vcpu * 1000 - kube_reserved_millicpu(instance)


#: The front door's proxy in every leader pod; its requests (equal to its limits).
GATEKEEPER = GATEKEEPER_CONTAINER
#: CPU: what the worst client the limits admit costs in body parsing (`infra.plan.frontdoor`
#: `_parsing`: one client at its request and large-body rates, bodies at the measured worst parse
#: cost) is at most half of this, so its burst is spent within a second and the probe
#: listener answers within the probes' 5 s (30m let one client's 327 KB bodies hold /health 5.6-
#: 6.9 s). 75m, not more: a model pod gets whole cores, and 75m is the most that leaves every
#: catalogue type the cores it had (an 8xlarge: 31,850 allocatable less 1,775 for the other
#: co-tenants less 75 is 30,000).
GATEKEEPER_MILLICPU = 75
#: Memory: the public connection pool (`frontdoor._connections`: thousands of connections that
#: have shown no key, at their measured cost) beside the requests at vLLM. 440 MiB: 1,000 keyless
#: addresses at their cap of 12, each connection holding a 32-line head, fill dev's pool with 5%
#: to spare (420 MiB is the least that holds them). A model pod's memory comes in sixteenths of a
#: GiB (`sizing.POD_MEMORY_STEPS_PER_GIB`), so the 140 MiB beyond 300 cost dev's pod 0.19 GiB
#: (26 to 25.8125), its KV cache 10.69 full-length requests to 10.26, and no request in flight.
GATEKEEPER_MEMORY_MIB = 440


@dataclass(frozen=True)
class Cotenant:
    """A pod that shares the model nodes: what it requests and how many land on one node."""

    name: str
    millicpu: int
    memory_mib: int
    #: "daemonset": one on every node; "deployment": `replicas` that may all land on one node;
    #: "sidecar": a container of the model pod itself, one per node.
    kind: str
    replicas: int = 1
    source: str = ""
    #: Installed only with `modelCache: volume` (the EBS CSI driver).
    with_volumes_only: bool = False


#: Everything else that runs on the model nodes (the cluster has no other node group). Requests as
#: the EKS add-ons and the LWS chart ship them; pods without requests count as zero here and are
#: covered by `NODE_HEADROOM_MIB`.
COTENANTS: tuple[Cotenant, ...] = (
    Cotenant("aws-node", 25, 0, "daemonset", source="EKS vpc-cni add-on"),
    Cotenant("kube-proxy", 100, 0, "daemonset", source="EKS kube-proxy add-on"),
    # Requests nothing (aws/eks-pod-identity-agent charts/eks-pod-identity-agent, the
    # DaemonSet's template, read 2026-12-03): its memory is in `NODE_HEADROOM_MIB`.
    Cotenant("eks-pod-identity-agent", 0, 0, "daemonset", source="EKS eks-pod-identity-agent"),
    Cotenant("coredns", 100, 70, "deployment", 2, source="EKS coredns add-on"),
    Cotenant("lws-controller", 1000, 1024, "deployment", 1, source="LWS chart 0.10.0"),
    Cotenant("fluent-bit", 50, 25, "daemonset", source="EKS amazon-cloudwatch-observability"),
    Cotenant(
        "cloudwatch-agent", 250, 128, "daemonset", source="EKS amazon-cloudwatch-observability"
    ),
    Cotenant(
        "cloudwatch-observability-controller",
        100,
        64,
        "deployment",
        1,
        source="EKS amazon-cloudwatch-observability",
    ),
    Cotenant(
        "ebs-csi-node",
        30,
        120,
        "daemonset",
        source="EKS aws-ebs-csi-driver",
        with_volumes_only=True,
    ),
    Cotenant(
        "ebs-csi-controller",
        60,
        240,
        "deployment",
        2,
        source="EKS aws-ebs-csi-driver",
        with_volumes_only=True,
    ),
    # The metrics collector (components/manifests/metrics.py): one pod, requests equal limits.
    # Counted even with `monitoring: false`, so turning it on never resizes the model pods.
    Cotenant(
        "metrics-collector",
        50,
        160,
        "deployment",
        1,
        source="this project's metrics collector (ADOT, components/manifests/metrics.py)",
    ),
    # nginx proxying a few requests a second, no TLS (the load balancer ends it): ~10 MB
    # resident, well under 5 millicores. Requests equal limits like the engine's.
    Cotenant(
        GATEKEEPER,
        GATEKEEPER_MILLICPU,
        GATEKEEPER_MEMORY_MIB,
        "sidecar",
        source="this project's front door (components/manifests/gatekeeper.py)",
    ),
)

#: Memory left unrequested on each model node: burstable system pods above their requests, the
#: kubelet and containerd beyond kube-reserved while a multi-GB image is pulled.
NODE_HEADROOM_MIB = 2048


def _gemma4_moe_text_params() -> int:
    """gemma-4-26B-A4B-it's text parameters from its config's shapes (see `MODELS`)."""
    hidden, heads, experts, width, dense = 2816, 16, 128, 704, 2112
    mlp = 3 * hidden * dense + hidden * experts + experts * 3 * hidden * width
    sliding = 2 * heads * 256 * hidden + 2 * 8 * 256 * hidden + mlp
    full = 2 * heads * 512 * hidden + 1 * 2 * 512 * hidden + mlp  # K = V: k_proj only
    return 25 * sliding + 5 * full + 262_144 * hidden


MOE_26B_TEXT_PARAMS = _gemma4_moe_text_params()
MOE_26B_VISION_PARAMS = 550_000_000


@dataclass(frozen=True)
class ModelProfile:
    """A decoder's layout and sizes: enough to place its layers and to do vLLM's KV arithmetic.

    Layers follow a repeating pattern of `sliding_per_full` sliding-window layers then one
    full-attention layer (Gemma's `layer_types`). Both kinds store K and V in the cache.
    """

    name: str
    layers: int
    sliding_per_full: int
    sliding_kv_heads: int
    sliding_head_dim: int
    full_kv_heads: int
    full_head_dim: int
    sliding_window: int
    hidden_size: int
    vocab_size: int
    #: Total bytes of the checkpoint's weight files (what a download writes to disk).
    checkpoint_bytes: int
    #: Bytes of parts a text-only deployment does not run (vision and audio encoders).
    non_text_bytes: int
    max_context: int
    tied_embeddings: bool = True
    dtype_bytes: int = 2
    #: Query heads and MLP width: what prefill's attention arithmetic and the rehearsal's
    #: shape-true slice need. None: unknown (attention then counts one query head per KV head).
    attention_heads: int | None = None
    intermediate_size: int | None = None
    #: A commit of the model's hub repository, the day it was checked and how; `modelRevision:
    #: auto` deploys it. None: no commit has been checked yet, and the plan warns that ranks
    #: would download `main` independently.
    revision: str | None = None
    revision_checked: dt.date | None = None
    revision_source: str | None = None
    #: Per-pod runtime overhead beyond weights and KV cache (API server, engine core, activation
    #: buffers, allocator arenas) = base + per_weight x the pod's weight GiB. Calibrated on two
    #: measured deployments: a 1B model in one pod (~2 GiB of weights, 5.7 GiB overhead) and
    #: this 12B split in two (~11-12.5 GiB of weights per pod, 8 to 8.7 GiB overhead).
    overhead_base_gib: float = 5.2
    overhead_per_weight_gib: float = 0.28
    #: The format the decoder's linear layers are served in (`infra.plan.weights`);
    #: `checkpoint_bytes` is always the published bf16 checkpoint's.
    weights: str = "bf16"
    #: A mixture of experts: experts per layer, how many one token runs and each one's width
    #: (gate, up and down: 3 x hidden x width). 0: a dense model. Every expert is resident, so
    #: memory sizing uses `layer_bytes`; a token reads and computes `active_layer_params`.
    experts: int = 0
    experts_per_token: int = 0
    expert_intermediate_size: int = 0
    #: For a mixture of experts: the dense catalogue model whose calibrated decode the measured
    #: per-layer ratio scales (`infra.plan.moe`). Its speed is never derived from active
    #: parameters alone.
    decode_reference: str | None = None

    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    @property
    def expert_params(self) -> int:
        """Parameters of one expert of one layer (gate, up and down)."""
        return 3 * self.hidden_size * self.expert_intermediate_size

    @property
    def active_layer_params(self) -> float:
        """Average parameters one token computes in one decoder layer: all of a dense layer; a
        mixture-of-experts layer less the experts it does not route to."""
        idle = (self.experts - self.experts_per_token) * self.expert_params
        return self.layer_params - idle

    def is_full_attention(self, layer: int) -> bool:
        """Whether layer `layer` (0-based) is a full-attention layer."""
        return layer % (self.sliding_per_full + 1) == self.sliding_per_full

    @property
    def query_heads(self) -> int:
        return self.attention_heads or max(self.sliding_kv_heads, self.full_kv_heads)

    @property
    def embedding_bytes(self) -> int:
        return self.vocab_size * self.hidden_size * self.dtype_bytes

    @property
    def layer_params(self) -> float:
        """Average parameters of one decoder layer: the bf16 checkpoint less its embeddings and
        encoders (nearly all of it linear; norms are under 0.01%)."""
        decoder = self.checkpoint_bytes - self.embedding_bytes - self.non_text_bytes
        return decoder / self.layers / self.dtype_bytes

    @property
    def layer_bytes(self) -> float:
        """Average bytes of one decoder layer in memory, in the served weight format."""
        return self.layer_params * weights.weight_format(self.weights).resident_bytes

    @property
    def download_bytes(self) -> int:
        """Bytes of the checkpoint the ranks load: the published one for bf16; for int8 and
        int4 the decoder in the format's file size, embeddings and encoders in bf16."""
        if self.weights == "bf16":
            return self.checkpoint_bytes
        per_param = weights.weight_format(self.weights).disk_bytes
        decoder = self.layers * self.layer_params * per_param
        return int(decoder + self.embedding_bytes + self.non_text_bytes)


MODELS: dict[str, ModelProfile] = {
    "google/gemma-4-12B-it": ModelProfile(
        name="google/gemma-4-12B-it",
        layers=48,
        sliding_per_full=5,
        sliding_kv_heads=8,
        sliding_head_dim=256,
        full_kv_heads=1,
        full_head_dim=512,
        sliding_window=1024,
        hidden_size=3840,
        vocab_size=262_144,
        checkpoint_bytes=int(22.3 * GIB),
        # Estimate for the vision and audio encoders; they sit on the first stage.
        non_text_bytes=1 * GIB,
        max_context=131_072,
        # Read 2026-12-01 in a public model-inspection test fixture of this checkpoint's text
        # config (16 query heads, MLP 15,360). Cross-check: with the head layout above these
        # give 21.8e9 bytes of decoder layers plus 2.0e9 of embeddings, the checkpoint's
        # 22.3 GiB within 1%.
        attention_heads=16,
        intermediate_size=15_360,
        # Read 2026-12-01: the commit public projects pinned for this checkpoint from August to
        # September 2026 (for one, github.com/Jonathan-321/kinyalm,
        # docs/model/experiments/2026-08-03-gemma4-12b-experimental-qlora.md), cross-checked
        # across several of them. Not fetched from the hub here: a first deploy's prefetch (or
        # vLLM, without it) fails at once with the hub's 404 if it were not a commit of the repo.
        revision="707f0a3b8a3c7ad586ed01e27eafbad8a27dd0f7",
        revision_checked=dt.date(2026, 12, 1),
        revision_source="public projects' pins of this checkpoint, Aug-Sep 2026",
    ),
    # The mixture-of-experts sibling. Layout read 2026-12-03 from a public test fixture of the
    # published config.json (ollama/ollama x/models/gemma4/gemma4_test.go
    # `TestParseTextConfig26B`, commit 3c8e1b44e333eec6b3bfed0fb4c131b03978e063; the MoE probe's
    # `tools.rehearse.measure.moe_probe.MOE_26B` carries the same figures and their
    # cross-checks): 30 layers, 5 sliding : 1 full, window 1024, hidden 2816, 16 query heads,
    # sliding layers 8 KV heads x 256, full layers 2 KV heads x 512 with `attention_k_eq_v`, a
    # dense MLP of 2112 beside 128 experts of 704, 8 per token, vocabulary 262,144.
    # KV cache: vLLM 0.31 stores K and V for every layer, k_eq_v included: `models/gemma4.py`
    # loads k_proj into both the K and V slots of qkv_proj and passes k (k_norm, RoPE) and v
    # (v_norm) to `Attention` separately, so the cache holds two tensors per full layer, as
    # `infra.plan.kv_cache` counts. (The duplicated V slot adds 5 x 2.9M parameters resident,
    # under 0.2%: left out.)
    # Checkpoint: DERIVED from the shapes, not read from the repository: per layer attention
    # (q, o: 2 x 16 x head dim x 2816; k, and v on sliding layers), the dense MLP (3 x 2816 x
    # 2112), the router (2816 x 128) and 128 experts (3 x 2816 x 704 each): 25 sliding layers of
    # 814.1M and 5 full of 828.5M, 24.49e9 in the decoder, plus 0.74e9 of embeddings: 25.23e9
    # text parameters, the "25.2B total, 3.8B active" of the model card's summaries (read
    # 2026-12-03, e.g. featherless.ai and vast.ai model pages). Vision encoder ~550M parameters
    # (the same pages). bf16: 2 bytes each.
    "google/gemma-4-26B-A4B-it": ModelProfile(
        name="google/gemma-4-26B-A4B-it",
        layers=30,
        sliding_per_full=5,
        sliding_kv_heads=8,
        sliding_head_dim=256,
        full_kv_heads=2,
        full_head_dim=512,
        sliding_window=1024,
        hidden_size=2816,
        vocab_size=262_144,
        checkpoint_bytes=MOE_26B_TEXT_PARAMS * 2 + MOE_26B_VISION_PARAMS * 2,
        non_text_bytes=MOE_26B_VISION_PARAMS * 2,
        # 256K tokens (the model card's summaries, as above).
        max_context=262_144,
        attention_heads=16,
        intermediate_size=2112,
        experts=128,
        experts_per_token=8,
        expert_intermediate_size=704,
        decode_reference="google/gemma-4-12B-it",
        # No commit of the hub repository has been verified here: ranks download `main`, and the
        # plan warns, as for any unpinned model.
        revision=None,
    ),
}

#: The vLLM CPU image on disk: compressed layers plus the unpacked snapshot containerd keeps.
IMAGE_DISK_GIB = 14
#: The node's own root filesystem, logs and kubelet state.
NODE_OS_DISK_GIB = 8
#: vLLM images a node holds at once: during an image upgrade the new image is pulled while the
#: old one is still on disk (kubelet's image garbage collection removes an image only once no
#: container uses it, and only above its disk threshold).
IMAGES_ON_NODE_DURING_UPGRADE = 2

#: gp3 throughput of the per-rank weights volumes in MiB/s: the first start writes the checkpoint,
#: every start reads it (and the quantize Job writes and hashes it there).
WEIGHTS_VOLUME_MIBPS = 250

#: Cold-start phases after the download, as measured for the 12B on m7g.2xlarge: loading the
#: weights into memory, and vLLM's warm-up (compile and profile) before /health turns 200.
LOAD_SECONDS_PER_GIB = 90 / 11.2
WARMUP_SECONDS = 50


#: The default `kubernetesVersion` (support dates: `prices.EKS_VERSIONS`). AL2023_ARM_64_STANDARD
#: node AMIs exist for it (awslabs/amazon-eks-ami CHANGELOG.md, release v20260714:
#: "amazon-eks-node-al2023-arm64-standard-1.35-v20260714"), and add-on versions are looked up per
#: Kubernetes version by `aws.eks.get_addon_version`, here and in pulumi-eks 4.x
#: (nodejs/eks/addons/cni-addon.ts), so no list of versions in the SDKs limits it.
DEFAULT_KUBERNETES_VERSION = "1.35"
#: The plan warns this many days before a version leaves standard support.
SUPPORT_WARNING_DAYS = 60

#: Zone IDs where EKS refuses control-plane subnets (UnsupportedAvailabilityZoneException). The
#: same list eksctl avoids (eksctl-io/eksctl pkg/az/az.go `zoneIDsToAvoid`, commit f4d4076, read
#: 2026-11-30). IDs, not names: a name maps to a different physical zone in every account.
EKS_UNSUPPORTED_ZONE_IDS = frozenset({"use1-az3", "usw1-az2", "cac1-az3", "cnn1-az4"})
