"""Cloud settings: which GKE cluster and Cloud TPU location the agent changes, and how each of our pools maps to a
GKE node pool, a group of TPU slices (one node pool each) or a group of Cloud TPU queued resources.

Cross-checks against the pools section are in ``config.cloud_checks``, one problem per key.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, ConfigDict, Field, PlainSerializer, model_validator

from config.durations import format_duration, parse_duration
from config.fields import NumbersOnly

_NAME = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"
ZONE = re.compile(r"[a-z]+-[a-z]+[0-9]+-[a-z]")  # a Compute Engine zone (us-central1-a); a region has no suffix
_Duration = Annotated[timedelta, BeforeValidator(parse_duration), PlainSerializer(format_duration, return_type=str)]

# Chips a Cloud TPU accelerator type counts, by family. The number in a type counts TensorCores, which for v2, v3, v4
# and v5p are 2 per chip (v5p-128 is 64 chips), and for v5e (v5litepod) and v6e are 1 per chip, so the number is
# the chip count. Sources: cloud.google.com/tpu/docs/v2 (a pod is "up to 256 chips (512 TensorCores)"; the type is
# the version and the number of TPU cores), /tpu/docs/v3 and /tpu/docs/v4 ("Each ... chip contains two TensorCores"),
# /tpu/docs/v5p (the 2x2x1 slice: 8 cores, 4 chips), /tpu/docs/v5e ("Each v5e chip contains one TensorCore"; the
# type is v$VERSION_NUMBER-$CHIP_COUNT) and /tpu/docs/v6e ("Each v6e chip contains one TensorCore"; v6e-8 is 8
# chips). Families not listed here are not checked.
_TENSORCORES_PER_CHIP = {"v2": 2, "v3": 2, "v4": 2, "v5p": 2, "v5litepod": 1, "v6e": 1}
# A GKE TPU machine type ends in its chips per VM: ct5lp-hightpu-4t has 4, ct6e-standard-8t 8, ct6e-standard-1t 1
# (cloud.google.com/tpu/docs/v5e and /tpu/docs/v6e, the machine type (GKE API) of each VM type and slice shape).
_MACHINE_CHIPS = re.compile(r"[a-z0-9-]+-([1-9][0-9]*)t")


@dataclass(frozen=True)
class TpuGeneration:
    """A TPU generation as GKE slices it: its name, the number of dimensions of its slice topologies, and, where
    Google's documentation states them, the slice shapes GKE offers and the rules its topologies follow."""

    name: str
    dimensions: int  # 2: AxB, 3: AxBxC
    example: str | None  # a topology of that shape named by the sources below (None: none is)
    # The slice shapes offered, in the documentation's order; empty: no list found, only the dimensions are checked.
    shapes: tuple[str, ...] = ()
    # Chips per VM of the machine types offered for one-VM slices only: their one shape is the one of that many chips.
    single_host_only: frozenset[int] = frozenset()
    # Every dimension at most 4, or every dimension a multiple of 4.
    small_or_multiples_of_4: bool = False
    # The machine types GKE offers the shapes on, as the sources name them (to say which one offers a shape).
    machine_types: tuple[str, ...] = ()
    # Multi-host slices are placed by a workload policy, not by a TPU topology: only single-host slices are offered.
    multi_host_by_workload_policy: bool = False

    def shapes_for(self, chips_per_vm: int | None) -> tuple[str, ...]:
        """The shapes offered on a machine type of ``chips_per_vm`` chips per VM (None: unknown, every shape): whole
        VMs, and one VM only for a single-host-only machine type."""
        if chips_per_vm is None:
            return self.shapes
        return tuple(
            shape
            for shape in self.shapes
            if topology_chips(shape) % chips_per_vm == 0
            and (chips_per_vm not in self.single_host_only or topology_chips(shape) == chips_per_vm)
        )


# The topologies GKE takes for a TPU slice node pool, by the prefix of the machine type (the text before its first
# '-'). A prefix not listed here (a generation GKE adds later) is not checked. Sources, each fact beside the page that
# states it:
# - ct3 and ct3p (v3), 2-D: "GKE release notes" (cloud.google.com/kubernetes-engine/docs/release-notes), October 31,
#   2024: "Cloud TPU v3 ct3-hightpu-4t and ct3p-hightpu-4t machine types are generally available for supported GKE
#   clusters"; "TPU v3" (cloud.google.com/tpu/docs/v3): "TPU v3 is supported using Google Kubernetes Engine and the
#   Cloud TPU API", interconnect topology "2D torus". Neither page lists GKE's v3 topologies or names one: only the
#   number of dimensions is checked.
# - ct4p (v4), 3-D: "Deploy TPU Multislice in GKE" (cloud.google.com/kubernetes-engine/docs/how-to/tpu-multislice)
#   names "a ct4p-hightpu-4t with a 2x2x1 topology"; "TPU types and topologies" (cloud.google.com/tpu/docs/
#   types-topologies, the page GKE's API reference gives for PlacementPolicy.tpuTopology): "The representation of a
#   v4 topology is AxBxC where A<=B<=C", and A, B and C are all at most 4 or all integer multiples of 4. The second
#   rule is checked; the order is not, GKE's own 2x2x1 being out of it.
# - ct5lp (v5e), 2-D: the same Multislice page names "a ct5lp-hightpu-4t with a 2x2 topology"; "TPU v5e"
#   (cloud.google.com/tpu/docs/v5e): interconnect topology "2D torus", the topology is "a string in the format AxB",
#   "v5e supports the following 2D slice shapes": 1x1, 2x2, 2x4, 4x4, 4x8, 8x8, 8x16 and 16x16, each TPU VM of a
#   slice has 1, 4 or 8 chips, and ct5lp-hightpu-1t, -4t and -8t are the machine types (GKE API) of the single-host
#   1x1, 2x2 and 2x4 (v5litepod-1, -4 and -8). "Configure compute resources for serverless training"
#   (docs.cloud.google.com/gemini-enterprise-agent-platform/machine-learning/training/configure-compute, formerly
#   Vertex AI's) lists the v5e machine types and topologies: ct5lp-hightpu-1t on 1x1 only, ct5lp-hightpu-8t on 2x4
#   only (1 VM), ct5lp-hightpu-4t on 2x2 (1 VM), 2x4 (2 VMs) and each larger shape up to 16x16 (64 VMs).
# - ct5p (v5p), 3-D: "TPU v5p" (cloud.google.com/tpu/docs/v5p): interconnect topology "3D torus", the slice shapes run
#   from 2x2x1 to 16x16x24 (not listed one by one: only the number of dimensions is checked).
# - ct6e (v6e), 2-D: "TPU v6e" (cloud.google.com/tpu/docs/v6e): interconnect topology "2D torus"; "Cloud TPU
#   deployments overview" (cloud.google.com/cluster-toolkit/docs/deploy/gke/gke-tpu-overview): "Cloud TPU v6e chips
#   are arranged in a 2D torus topology, such as 2x4". The serverless training page above lists the same eight
#   shapes for v6e: ct6e-standard-1t on 1x1 only, ct6e-standard-8t on 2x4 (1 VM), ct6e-standard-4t on 2x2 (1 VM),
#   2x4 (2 VMs) and each larger shape up to 16x16 (64 VMs): ct6e-standard-8t is held to 2x4 as ct5lp-hightpu-8t is.
# - tpu7x (Ironwood), 3-D: "About Ironwood (TPU7x) in GKE" (cloud.google.com/kubernetes-engine/docs/concepts/
#   tpu-ironwood): available in GKE Standard clusters from 1.34.0-gke.2201000 and Autopilot from 1.34.1-gke.3084001,
#   "Each Ironwood (TPU7x) virtual machine (VM) contains four chips"; the deployments overview above: "Cloud TPU
#   7x chips have a direct connection to the nearest neighboring chips in 3 dimensions, forming a 3D torus
#   interconnect topology"; the serverless training page: machine type tpu7x-standard-4t, topologies 2x2x1 (1 VM) to
#   8x8x16 (256 VMs), a list of that product's, not GKE's: its shapes are not listed here. The same GKE page: a
#   multi-host Ironwood node pool is placed by a workload policy (--placement-policy), which "replaces the
#   --tpu-topology flag used by other TPU versions". The agent creates each slice with a TPU topology (a COMPACT
#   placement policy naming it, actuators/slice_writes.py) and creates no workload policy, so a topology of more
#   than one host is refused: single-host Ironwood slices (2x2x1, one VM of four chips) only.
# ct5p-hightpu-4t as v5p's machine type and ct6e-standard-4t as v6e's are also those of Google's xpk
# (github.com/AI-Hypercomputer/xpk, src/xpk/core/system_characteristics.py), whose topologies for the ct4p, ct5lp,
# ct5p and ct6e machine types have these dimension counts.
_TWO_D_SHAPES = ("1x1", "2x2", "2x4", "4x4", "4x8", "8x8", "8x16", "16x16")
_TPU_GENERATIONS = {
    "ct3": TpuGeneration("TPU v3", 2, None),
    "ct3p": TpuGeneration("TPU v3", 2, None),
    "ct4p": TpuGeneration("TPU v4", 3, "2x2x4", small_or_multiples_of_4=True),
    "ct5lp": TpuGeneration(
        "TPU v5e",
        2,
        "4x4",
        _TWO_D_SHAPES,
        frozenset({1, 8}),
        machine_types=("ct5lp-hightpu-1t", "ct5lp-hightpu-4t", "ct5lp-hightpu-8t"),
    ),
    "ct5p": TpuGeneration("TPU v5p", 3, "2x2x4"),
    "ct6e": TpuGeneration(
        "TPU v6e",
        2,
        "4x4",
        _TWO_D_SHAPES,
        frozenset({1, 8}),
        machine_types=("ct6e-standard-1t", "ct6e-standard-4t", "ct6e-standard-8t"),
    ),
    "tpu7x": TpuGeneration("TPU7x (Ironwood)", 3, "2x2x1", multi_host_by_workload_policy=True),
}
# A slice topology as written: two or three whole numbers from 1, in ASCII digits without leading zeros, of at most
# four digits each (the largest slice GKE documents, v5p's 16x16x24, has two), joined by 'x'. A number of thousands of
# digits was not a config error but a ValueError from int(), and '04x4x1' or Arabic-Indic digits loaded.
_TOPOLOGY = r"^[1-9][0-9]{0,3}(x[1-9][0-9]{0,3}){1,2}$"


def _topology_form(value: Any) -> Any:
    """A topology not of the form ``_TOPOLOGY`` is refused in words, not with the pattern (which the field keeps
    for the JSON Schema); a value that is not text is left to the field's own check."""
    if isinstance(value, str) and not re.fullmatch(_TOPOLOGY, value):
        raise ValueError(
            "should be a slice topology, AxB or AxBxC of whole numbers from 1 (at most 4 digits, no leading zeros), "
            "e.g. 4x4 or 2x2x1"
        )
    return value


class _Section(NumbersOnly):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class NodePoolMapping(_Section):
    """A GKE node pool resized by node count (GPU, or single-host TPU). ``gke_autoscaling`` decides what to do when
    GKE's own autoscaler is on for it: ``refuse`` (the default: the agent will not fight it) or ``move-bounds``
    (the agent sets the autoscaler's min and max to its target instead of the size)."""

    pool: str
    node_pool: str = Field(pattern=_NAME, max_length=40)
    gke_autoscaling: Literal["refuse", "move-bounds"] = "refuse"


class TpuSliceGroupMapping(_Section):
    """Identical multi-host TPU slices, each its own node pool named ``<group>-<n>``, created and deleted whole."""

    pool: str
    group: str = Field(pattern=_NAME, max_length=36)
    machine_type: str = Field(min_length=1)
    tpu_topology: Annotated[str, BeforeValidator(_topology_form)] = Field(pattern=_TOPOLOGY)
    chips_per_host: int = Field(default=4, ge=1)
    zone: str | None = None
    spot: bool = False
    # The Google service account the slices' nodes run as (NodeConfig.serviceAccount), and their access scopes.
    # Unset, GKE gives each slice the project's Compute Engine default service account (see slice_account_warnings).
    service_account: str | None = Field(default=None, pattern=r"^[^@\s]+@[^@\s]+$")
    oauth_scopes: tuple[str, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _chips_per_host_from_machine_type(cls, data: Any) -> Any:
        """Unset, ``chips_per_host`` is what the machine type's ``-<N>t`` suffix says, else 4."""
        if isinstance(data, dict) and "chips_per_host" not in data:
            chips = machine_type_chips(data.get("machine_type"))
            if chips is not None:
                return {**data, "chips_per_host": chips}
        return data

    @property
    def chips_per_slice(self) -> int:
        return topology_chips(self.tpu_topology)

    @property
    def hosts_per_slice(self) -> int:
        return self.chips_per_slice // self.chips_per_host


class QueuedResourceMapping(_Section):
    """Cloud TPU queued resources of one accelerator type, named ``<group>-<n>``, in ``zone``."""

    pool: str
    group: str = Field(pattern=_NAME, max_length=40)
    zone: str = Field(min_length=1)
    accelerator_type: str = Field(min_length=1)
    runtime_version: str = Field(min_length=1)
    chips: int = Field(ge=1)
    spot: bool = False


class CloudSettings(_Section):
    project: str = Field(min_length=1)
    location: str = Field(min_length=1)
    cluster: str = Field(min_length=1)
    node_pools: tuple[NodePoolMapping, ...] = ()
    tpu_slice_groups: tuple[TpuSliceGroupMapping, ...] = ()
    queued_resources: tuple[QueuedResourceMapping, ...] = ()
    endpoint: str | None = None  # one API endpoint for every Google client (a local test server)
    # A node pool shrinks only by draining idle nodes; a drain still blocked by disruption budgets after this long
    # gives up and uncordons the node.
    drain_timeout: _Duration = timedelta(minutes=15)
    # A zone of a node pool that ran out of capacity is left out of that pool's scale-ups for this long; its share
    # goes to the pool's other zones.
    zone_backoff: _Duration = timedelta(minutes=30)

    @property
    def cluster_path(self) -> str:
        return f"projects/{self.project}/locations/{self.location}/clusters/{self.cluster}"


def slice_account_warnings(cloud: CloudSettings | None) -> list[tuple[str, str]]:
    """(key, message) for each slice group that names no node service account: its slices would run as the
    project's Compute Engine default service account, which creating them needs ``iam.serviceAccounts.actAs`` on."""
    if cloud is None:
        return []
    return [
        (
            f"cloud.tpu_slice_groups[{i}].service_account",
            f"unset: each slice the agent creates for pool {m.pool!r} runs as the project's Compute Engine default "
            "service account (GKE's default when a node pool names none), and creating it needs "
            "iam.serviceAccounts.actAs on that account: without it the first scale-up is refused (403) and the "
            "pool blocked. Set service_account to the node service account of the cluster's TPU node pools and "
            "grant the agent's Google service account roles/iam.serviceAccountUser on it (docs/google-cloud.md, "
            "step 3)",
        )
        for i, m in enumerate(cloud.tpu_slice_groups)
        if m.service_account is None
    ]


def machine_type_chips(machine_type: object) -> int | None:
    """TPU chips per VM of a GKE TPU machine type, from its ``-<N>t`` suffix (None without one)."""
    found = _MACHINE_CHIPS.fullmatch(machine_type) if isinstance(machine_type, str) else None
    return int(found[1]) if found else None


def topology_chips(topology: str) -> int:
    """Chips of a slice topology: the product of its dimensions (``4x8`` is 32)."""
    return math.prod(int(d) for d in topology.split("x"))


def machine_type_generation(machine_type: str) -> TpuGeneration | None:
    """The TPU generation of a GKE TPU machine type, from the prefix before its first '-' (None for a prefix not
    known here: it is not checked)."""
    return _TPU_GENERATIONS.get(machine_type.split("-", 1)[0])


def accelerator_type_chips(accelerator_type: str) -> int | None:
    """Chips of a Cloud TPU accelerator type of a known family (None for another family). Raises ValueError for
    a known family whose TensorCores are not a whole number of chips."""
    found = re.fullmatch(r"([a-z0-9]+)-([0-9]+)", accelerator_type)
    per_chip = _TENSORCORES_PER_CHIP.get(found[1]) if found else None
    if found is None or per_chip is None:
        return None
    tensorcores = int(found[2])
    if tensorcores % per_chip:
        raise ValueError(f"{tensorcores} TensorCores of {found[1]} are not whole chips of {per_chip} TensorCores")
    return tensorcores // per_chip
