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
    """A TPU generation as GKE slices it: its name and the number of dimensions of its slice topologies."""

    name: str
    dimensions: int  # 2: AxB, 3: AxBxC
    example: str  # a topology of that shape


# The shape of the topologies GKE takes for a TPU slice node pool, by the prefix of the machine type (the text before
# its first '-'). Only the number of dimensions is checked; a prefix not listed here (v3's, or a generation GKE adds
# later) is not checked. Sources, each fact beside the page that states it:
# - ct4p (v4), 3-D: "Deploy TPU Multislices in GKE" (cloud.google.com/kubernetes-engine/docs/how-to/tpu-multislice)
#   names "a ct4p-hightpu-4t with a 2x2x1 topology"; "TPU types and topologies" (cloud.google.com/tpu/docs/
#   types-topologies): "The representation of a v4 topology is AxBxC".
# - ct5lp (v5e), 2-D: the same Multislice page names "a ct5lp-hightpu-4t with a 2x2 topology"; "TPU v5e"
#   (cloud.google.com/tpu/docs/v5e): interconnect topology "2D torus", the topology is "a string in the format AxB",
#   the slice shapes run from 1x1 to 16x16, and ct5lp-hightpu-1t, -4t and -8t are the machine types (GKE API) of
#   v5litepod-1, -4 and -8.
# - ct5p (v5p), 3-D: "TPU v5p" (cloud.google.com/tpu/docs/v5p): interconnect topology "3D torus", the slice shapes run
#   from 2x2x1 to 16x16x24.
# - ct6e (v6e), 2-D: "TPU v6e" (cloud.google.com/tpu/docs/v6e): interconnect topology "2D torus"; "Cloud TPU
#   deployments overview" (cloud.google.com/cluster-toolkit/docs/deploy/gke/gke-tpu-overview): "Cloud TPU v6e chips
#   are arranged in a 2D torus topology, such as 2x4".
# ct5p-hightpu-4t as v5p's machine type and ct6e-standard-4t as v6e's are also those of Google's xpk
# (github.com/AI-Hypercomputer/xpk, src/xpk/core/system_characteristics.py), whose topologies for each of the four
# machine types have these dimension counts.
_TPU_GENERATIONS = {
    "ct4p": TpuGeneration("TPU v4", 3, "2x2x4"),
    "ct5lp": TpuGeneration("TPU v5e", 2, "4x4"),
    "ct5p": TpuGeneration("TPU v5p", 3, "2x2x4"),
    "ct6e": TpuGeneration("TPU v6e", 2, "4x4"),
}


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
    tpu_topology: str = Field(pattern=r"^\d+(x\d+){1,2}$")
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
        return math.prod(int(d) for d in self.tpu_topology.split("x"))

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
