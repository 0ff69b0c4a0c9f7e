"""A local moto server (EC2, Auto Scaling, EKS) and an HTTP proxy in front of it adding what moto does not model.

``MotoServer`` runs moto's own server process on 127.0.0.1 (a free port), stopped by its PID. ``FakeAwsApi`` is what
the boto3 clients under test talk to: it forwards every request to moto unchanged, except for the behaviours below
(each with its source in ``tests/fakes/REFERENCE.md``), which it adds at the HTTP layer:

- lead time: instances launched since the last ``settle`` are ``Pending``, not ``InService``;
- launches that fail for capacity after ``SetDesiredCapacity`` was accepted (``late_stockout``): the desired
  capacity stays as asked, the instances never appear, and at ``settle`` a failed "Launching a new EC2 instance"
  scaling activity records ``InsufficientInstanceCapacity``; ``stockout`` records such an activity at once, the
  Availability Zone it was attempted in in its ``Details``;
- ``DescribeScalingActivities`` answered from those activities (moto returns none), those in progress first, then
  latest first, paged as AWS pages them (``MaxRecords`` 1..100, default 100, and ``NextToken``);
- a group's bounds, which moto does not check: ``SetDesiredCapacity`` outside ``MinSize``..``MaxSize``, and
  ``TerminateInstanceInAutoScalingGroup`` with the decrement while the desired capacity is at ``MinSize``, fail with
  ``ValidationError``; ``UpdateNodegroupConfig`` with ``desiredSize`` outside the node group's bounds fails with
  ``InvalidParameterException`` (each with AWS's wording);
- EKS node group updates: ``UpdateNodegroupConfig`` is ``InProgress`` (node group ``UPDATING``) until
  ``finish_operations`` or ``settle``, and another one meanwhile is refused as not ACTIVE (``ResourceInUseException``,
  or the code of ``answer_busy_with``); an update someone else started (``start_update``), also between a caller's
  read and its write (``before_next``); ``ListUpdates``/``DescribeUpdate`` (not in moto) answered from them, oldest
  first, ``ListUpdates`` paged as AWS pages it (``maxResults`` 1..100, default 100, and ``nextToken``); earlier
  settled updates can be added in bulk (``add_settled_updates``); a repeated ``clientRequestToken`` returns the
  first update; the node group's Auto Scaling group follows its scaling config, and ``desiredSize`` follows the
  group's desired capacity;
- node group health issues (``health_issue``, ``clear_health_issues``), as ``DescribeNodegroup`` reports them;
- launch activities that did not fail (``launch_activity``), as a group records each launch;
- errors injected per operation (``fail``): throttling, access denied, capacity, in each API's error format;
- a termination lifecycle hook holding the instances terminated with the decrement (``hold_terminations``);
- a Spot interruption whose termination is still under way (``interrupt``): the instance is ``Terminating:Wait``
  (a termination lifecycle hook running) and the group records an ``InProgress`` "Terminating EC2 instance" activity,
  its desired capacity unchanged; the replacement is launched once the termination ends (``reclaim``);
- an instance retained after its termination lifecycle action was abandoned (``retain``): listed
  ``Terminating:Retained``, running, not counted, the group launching one in its place;
- an instance whose root volume an instance refresh replaces (``replace_root_volume``), listed ``ReplacingRootVolume``
  (or a later stage) and still counted; ``list_as`` lists one in any state (a value the API may add);
- an instance EC2 takes back (``reclaim``, a Spot interruption): moto terminates it and its group launches a
  replacement (none under ``arm_late_stockout``: its launch fails), the group listing it ``Terminated`` meanwhile if
  asked; ``TerminateInstanceInAutoScalingGroup`` of an instance in no group then fails with ``ValidationError``
  "Instance Id not found - No managed instance found for instance ID ..." (moto answers 500).

Its parts: ``moto_server`` (moto's process and the boto3 clients), ``state`` (the proxy's state, AWS's error and
page formats), ``auto_scaling`` (EC2 and Auto Scaling behaviours), ``eks`` (EKS node group behaviours) and ``proxy``
(``FakeAwsApi``: set-up, faults and the HTTP routing).
"""

from tests.fakes.aws_api.moto_server import REGION, AwsClients, MotoServer, shared_moto
from tests.fakes.aws_api.proxy import FakeAwsApi, shared_aws
from tests.fakes.aws_api.state import ICE_MESSAGE, NOT_ACTIVE_MESSAGE, ZONE

__all__ = [
    "ICE_MESSAGE",
    "NOT_ACTIVE_MESSAGE",
    "REGION",
    "ZONE",
    "AwsClients",
    "FakeAwsApi",
    "MotoServer",
    "shared_aws",
    "shared_moto",
]
