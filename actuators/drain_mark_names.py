"""The names of the marks (node annotations) a drain leaves on its nodes, as plain strings.

``actuators.drain_units`` and ``actuators.drain_marks`` write and read them; ``agent.drain_records`` names them in
what it tells a person. They live here, apart from the code that reads nodes, so that naming them imports neither the
Kubernetes client nor a cloud SDK (the replay daemon and the commands start without them).
"""

from __future__ import annotations

# Set on a node while a drain of ours is in progress (value: the drain's key); removed when the drain gives up.
DRAIN_ANNOTATION = "leadtime.io/drain-key"
# Set with it on the nodes of a forced drain (value: the drain's key, so a mark an earlier drain left on a node a
# person uncordoned does not force a later drain), which may evict accelerator work; removed with it.
FORCED_ANNOTATION = "leadtime.io/drain-forced"
# Set with FORCED_ANNOTATION at each step of a forced drain (value: the step's UTC time, ISO 8601): a drain taken over
# is continued as forced only if a step of it ran within the drain timeout (``KubernetesUnitDrainer.drain``).
FORCED_AT_ANNOTATION = "leadtime.io/drain-forced-at"
# Set with DRAIN_ANNOTATION at a drain's first step by the drainer that carries it on (value: the time its timeout
# counts from, ISO 8601, a space, and the drain's key): a drain taken over (after a restart, or by a new leader) counts
# its timeout from there, not from its take-over (``actuators.drain_marks.drain_started``).
STARTED_AT_ANNOTATION = "leadtime.io/drain-started-at"
# Set, in place of the drain's other marks, on the nodes of a unit its drain left cordoned because the cloud still
# deleted it when the drain ended (value: the drain's key): whichever agent leads asks the cloud about it at each tick
# and uncordons it if the cloud keeps it (``actuators.drain_marks.left_deleting``).
LEFT_DELETING_ANNOTATION = "leadtime.io/drain-left-deleting"
DRAIN_MARKS = (
    DRAIN_ANNOTATION,
    FORCED_ANNOTATION,
    FORCED_AT_ANNOTATION,
    STARTED_AT_ANNOTATION,
    LEFT_DELETING_ANNOTATION,
)
