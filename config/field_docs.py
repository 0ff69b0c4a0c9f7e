"""What every configuration key means, with its unit: the text of ``leadtime config schema`` and of
``docs/configuration.md``. Keyed ``<Section class>.<field>``; a test fails when a field has no entry here or an
entry names a field that no longer exists. Durations are written like ``90s``, ``10m``, ``1h30m``, ``7d``.
"""

from __future__ import annotations

SECTIONS: dict[str, str] = {
    "Settings": "The whole configuration file.",
    "DemandClassSettings": "A demand class: one stream of accelerator demand (a tenant, a queue, a model).",
    "PoolSettings": "A pool of capacity: on-prem nodes, a GKE GPU node pool, TPU slices or queued resources.",
    "PlannerSettings": "How forecasts become targets.",
    "ForecastSettings": "The forecaster.",
    "BudgetSettings": "A spending cap over some pools.",
    "SimulationSettings": "What only `leadtime simulate` uses.",
    "EnergySettings": "What a paid accelerator draws, for the energy and carbon figures of the reports.",
    "StockoutWindow": "A window in which a simulated pool gets no new units.",
    "LoopSettings": "The control loop.",
    "PrometheusSettings": "Where demand, and the capacity pools really ran, are read from.",
    "ClassQuerySettings": "How one demand class is read from Prometheus.",
    "PoolQuerySettings": "How the capacity one pool really ran is read from Prometheus.",
    "DaemonSettings": "The in-cluster daemon (`leadtime run`).",
    "EndpointSettings": "The daemon's HTTP server: /healthz, /readyz, /metrics.",
    "LeaderElectionSettings": "Leader election on a coordination.k8s.io Lease.",
    "KubernetesApiSettings": "How the daemon reaches the Kubernetes API.",
    "StateSettings": "Where the planner's memory is kept across restarts.",
    "CloudSettings": "Which Google Cloud resources the pools are.",
    "NodePoolMapping": "A GKE node pool resized by node count.",
    "TpuSliceGroupMapping": "Multi-host TPU slices, each its own GKE node pool, created and deleted whole.",
    "QueuedResourceMapping": "Cloud TPU queued resources of one accelerator type.",
    "AwsSettings": "Which AWS resources the pools are; credentials come from the standard chain (IRSA or EKS Pod "
    "Identity in the cluster), never from this file.",
    "NodegroupMapping": "An EKS managed node group resized through its scaling config.",
    "AutoScalingGroupMapping": "An EC2 Auto Scaling group of self-managed GPU nodes, resized by desired capacity.",
    "AlertSettings": "Slack alerts: where the webhook comes from, de-duplication, rate limits, delivery.",
    "LedgerSettings": "Where spend is recorded.",
    "BillingSettings": "How rows of a Cloud Billing export are matched to pools (`leadtime ledger import-billing`); "
    "see docs/billing-reconciliation.md.",
}

FIELDS: dict[str, str] = {
    # -- top level
    "Settings.demand_classes": "The demand classes, at least one.",
    "Settings.pools": "The pools, at least one; each serves some demand classes.",
    "Settings.planner": "How forecasts become targets.",
    "Settings.forecast": "The forecaster and how often it is refitted.",
    "Settings.budgets": "Spending caps, each over some pools.",
    "Settings.simulation": "Settings of `leadtime simulate` only.",
    "Settings.loop": "The control loop's timing.",
    "Settings.prometheus": "Where demand is read (needed by `recommend` and `run`).",
    "Settings.daemon": "The in-cluster daemon.",
    "Settings.cloud": "Google Cloud resources behind the pools (needed by `run` for every pool not on-prem).",
    "Settings.aws": "AWS resources behind the pools: EKS managed node groups and EC2 Auto Scaling groups.",
    "Settings.alerts": "Slack alerts.",
    "Settings.ledger": "Where spend is recorded.",
    "Settings.energy": "Power per chip, site overhead (PUE) and grid carbon intensity, for energy and carbon.",
    # -- energy
    "EnergySettings.watts_per_chip": "Power drawn by one paid accelerator, busy or idle (watts; default: an A100 "
    "SXM's 400 W board power).",
    "EnergySettings.pool_watts_per_chip": "Per pool id: watts per chip where it differs from `watts_per_chip`.",
    "EnergySettings.pue": "Power usage effectiveness of the site: facility power / IT power (1.0-3.0; default 1.1).",
    "EnergySettings.grid_gco2e_per_kwh": "Carbon intensity of the grid that powers the site (gCO2e per kWh).",
    # -- demand classes
    "DemandClassSettings.name": "Unique name of the class, used in pools' `serves` and in metrics.",
    "DemandClassSettings.family": "Accelerator family the class needs: `gpu` or `tpu`.",
    "DemandClassSettings.series": "Series that carries its demand (a namespace or ClusterQueue; a trace column "
    "value). Default: the name.",
    "DemandClassSettings.waiting_cost_per_accelerator_hour_usd": "What an accelerator-hour of queued demand costs "
    "this class (USD). Unless a `service_level` is set (the class's, else the planner's), the class's service level "
    "follows from it against the chip-hour price of the cheapest cloud pool serving the class (newsvendor ratio).",
    "DemandClassSettings.service_level": "Forecast quantile to provision for, in (0, 1); overrides the planner's.",
    # -- pools
    "PoolSettings.id": "Unique pool id (lowercase letters, digits, dashes).",
    "PoolSettings.previous_ids": "Ids the pool was known by before a rename: spend the ledger recorded under them "
    "counts as the pool's own in its budgets. Each is no pool's id now and belongs to one pool.",
    "PoolSettings.kind": "What the pool is: `on-prem`, `gpu-node-pool`, `tpu-slice-group` or `tpu-queued-resource`.",
    "PoolSettings.tier": "Capacity tier; pools are filled in cost order: `on-prem`, `reserved`, `spot`, `on-demand`. "
    "An `on-prem` pool is tier `on-prem` (the default for it); a cloud pool is `reserved`, `spot` or `on-demand` "
    "(default).",
    "PoolSettings.family": "Accelerator family of its units: `gpu` or `tpu`.",
    "PoolSettings.chips_per_unit": "Accelerators (GPUs or TPU chips) per unit (a node or a slice).",
    "PoolSettings.min_units": "Fewest units the pool is ever sized to.",
    "PoolSettings.max_units": "Most units the pool is ever sized to.",
    "PoolSettings.price_per_chip_hour_usd": "Price of one accelerator-hour (USD); set it or "
    "`price_per_unit_hour_usd`, not both.",
    "PoolSettings.price_per_unit_hour_usd": "Price of one unit-hour (USD), e.g. of a slice priced whole; set it or "
    "`price_per_chip_hour_usd`, not both.",
    "PoolSettings.lead_time": "Time from asking for a unit until it accepts work (duration).",
    "PoolSettings.serves": "Demand classes the pool may serve.",
    "PoolSettings.spot_interruption_per_hour": "Spot only: probability per hour that a unit is preempted (0..1).",
    # -- planner
    "PlannerSettings.service_level": "Forecast quantile to provision for, in (0, 1), for every class without a "
    "`service_level` of its own; set, it wins over waiting costs. Unset: from each class's waiting cost against the "
    "chip-hour price of the cheapest cloud pool serving the class, else 0.9.",
    "PlannerSettings.waiting_cost_per_accelerator_hour_usd": "Default waiting cost of classes that set none "
    "(USD per queued accelerator-hour).",
    "PlannerSettings.headroom_units": "Extra units kept on top of the forecast, per pool.",
    "PlannerSettings.scale_down_stabilization": "A unit must be unneeded this long before it is released (duration).",
    "PlannerSettings.idle_hold_lead_times": "Hold an idle unit at least this many of its pool's lead times before "
    "releasing it (0 turns the rule off; at most 10).",
    "PlannerSettings.slice_release_by_forecast": "A pool of whole TPU slices that alone serves its demand releases "
    "a slice idle for the idle hold (`idle_hold_lead_times`; 0: the stabilization window) only while the forecast "
    "probability that demand exceeds what is left without it within its lead time is below 1 - the service level "
    "(true or false; default true).",
    "PlannerSettings.max_scale_up_units_per_tick": "Most units added to a pool in one tick (unset: no limit).",
    "PlannerSettings.max_scale_down_units_per_tick": "Most units released from a pool in one tick (unset: no limit).",
    "PlannerSettings.min_direction_change_interval": "Least time between a scale-up and a scale-down of the same "
    "pool, either way (duration).",
    # -- forecast
    "ForecastSettings.model": "Forecaster: `auto` (chosen per class by backtest), `naive` (the calibrated last value: "
    "the newest value with a band from its recent errors; it meant `persistence` before this release and warns so "
    "at load), `persistence` (every quantile is the newest value), `last-value`, `seasonal_naive`, `ets`, `stl` or "
    "`lightgbm`: the names backtest and the reports use.",
    "ForecastSettings.quantiles": "Forecast quantiles published in reports and metrics, each in (0, 1); the "
    "service levels the planner provisions for are forecast besides, whether listed here or not.",
    "ForecastSettings.history": (
        "How much history the models are fitted on (duration, with its unit: a bare number is seconds). At least "
        "what the calibration takes, 24 errors of forecasts an hour ahead (3h at the default 5m step), or two steps "
        "for `persistence`; under 1d loads with a warning."
    ),
    "ForecastSettings.refit_interval": "How often forecasts are recalibrated on the newest errors (duration, at "
    "least one tick; cheap).",
    "ForecastSettings.retrain_interval": "How often the models are retrained (duration, at least one tick; costly).",
    "ForecastSettings.reselect_interval": "How often `auto` re-chooses the model per class (duration, at least one "
    "tick).",
    "ForecastSettings.step": "Spacing of the demand series and forecasts (duration).",
    "ForecastSettings.max_staleness": "A class whose newest reading is older than this is held as missing data "
    "(duration).",
    # -- budgets
    "BudgetSettings.name": "Unique budget name, used in metrics and alerts. A shared budget's (one with "
    "`remote_pools`) is the ledger's key for its reservations, of which the ledger derives its other keys "
    "(`NAME/hourly`, `NAME@START`, `NAME/releasing`): it may hold no `/` or `@`, and agents sharing the budget name "
    "it alike. A budget no other agent shares may hold them, unless its name is one of those keys of a shared budget "
    "of the same file.",
    "BudgetSettings.pools": "Pools whose spend counts against this budget.",
    "BudgetSettings.remote_pools": "Pools of this budget that other agents run (other clusters or regions) on the "
    "same PostgreSQL ledger: their recorded spend counts against the cap too. `leadtime run` refuses them with "
    "another `ledger.backend`, which no other agent writes (their spend would count as 0); simulate accepts them.",
    "BudgetSettings.remote_previous_ids": "Ids a pool of `remote_pools` was known by before a rename, by pool "
    "(`{pool: [old ids]}`), as its own agent lists them in its `previous_ids`: spend the ledger recorded under them "
    "counts as that pool's in this budget, in its spend and in the reservations of its scale-ups. Each is no pool's "
    "id now and belongs to one pool.",
    "BudgetSettings.monthly_cap_usd": "Most spend per budget period of one month (USD).",
    "BudgetSettings.hourly_cap_usd": "Most spend in any clock hour (USD).",
    "BudgetSettings.period_start_day": "Day of the month a period starts (1-28).",
    "BudgetSettings.timezone": "IANA time zone of the period boundaries, e.g. `Europe/Berlin`.",
    "BudgetSettings.alert_thresholds": "Fractions of the cap at which an alert is sent, once, as the period's "
    "spend so far reaches each (at start, only the highest already reached). Only what was spent counts, not the "
    "projection: a projection above the cap is told by a projected-overspend alert of its own once it passes the "
    "cap, whatever these fractions.",
    "BudgetSettings.pacing": "How the monthly cap is spent over its period: `none` holds only the cap; `forecast` "
    "paces it from a forecast of the period's remaining burst need (a profile of history by hour of day) so the "
    "money lasts the period, and when it is short funds the classes whose waiting costs most first.",
    "BudgetSettings.commit_horizon": "How far ahead the monthly cap counts the burst units held (duration, at least "
    "two ticks of `loop.tick_interval`, as the hard stop releases units two ticks before the money runs out; needs "
    "`monthly_cap_usd`). Unset: "
    "to the end of the period, so the cap can never break and busy units are never released for it, but units "
    "bought early in the period are charged as if held to its end. Set (e.g. `24h`): a scale-up need only fit "
    "the money left over this horizon, and the cap is held by a hard stop instead: when the money left no longer "
    "pays for the units held through the next two ticks, burst units are released, idle first, busy ones too "
    "(their work goes back to the queue).",
    "BudgetSettings.unread_stop_wait": "How long the hard stop of a budget with a `commit_horizon` waits for a pool "
    "of the budget whose state cannot be read, from the pool's last record in the ledger (duration). Meanwhile no "
    "busy unit is released for the budget on a projection that is partly a guess (a `budget-hard-stop-deferred` "
    "alert says so, and until when); after it, the stop runs on the budget's other pools, the unread pool counted "
    "at its last recorded units and never released. The money runs over the cap by what the pools spend meanwhile.",
    # -- simulation
    "SimulationSettings.stockouts": "Windows in which a pool gets no new units (to rehearse a stockout).",
    "StockoutWindow.pool": "The pool that cannot get units.",
    "StockoutWindow.start": "Start of the window (ISO-8601 timestamp).",
    "StockoutWindow.end": "End of the window (ISO-8601 timestamp).",
    "LoopSettings.tick_interval": "Time between two ticks of the loop (duration).",
    "LoopSettings.read_deadline": "How long a tick reads on-prem capacity and demand from Prometheus (each request's "
    "timeout and retries cut to the time left); a class not read by then is held, an on-prem pool planned on its "
    "`max_units`, and the tick plans without them (duration, at least 1s, shorter than `loop.tick_interval`; unset: "
    "half of `loop.tick_interval`). Raise it for a Prometheus slow to answer every class: what the reads take is "
    "not left for planning and the cloud writes, and a tick that outlasts its interval makes the next one skipped.",
    # -- prometheus
    "PrometheusSettings.url": "Base URL of the Prometheus HTTP API, e.g. `http://prometheus.monitoring:9090`.",
    "PrometheusSettings.bearer_token_file": "File holding a bearer token sent with every query.",
    "PrometheusSettings.ca_file": "CA bundle to verify an HTTPS Prometheus with.",
    "PrometheusSettings.timeout": "Timeout of one query (duration, at least 1s); sent to Prometheus in whole "
    "milliseconds.",
    "PrometheusSettings.retries": "Retries of a failed query (0-10).",
    "PrometheusSettings.retry_backoff_s": "Back-off between retries of a failed query (seconds): the first retry is "
    "sent at once, the second after twice this, each later one after twice the wait before it (0s, 1s, 2s, ... with "
    "0.5; each wait at most 120s). A Retry-After the server sends with a 429 or 503 is waited instead; a wait that "
    "would outlast `loop.read_deadline` ends the retries.",
    "PrometheusSettings.max_staleness": "A series whose newest sample is older than this is missing (duration, at "
    "least `forecast.step`: the newest step of the grid demand is read on can be a whole step old).",
    "PrometheusSettings.max_points_per_query": "Most points per series in one range query; longer ranges are "
    "chunked (Prometheus refuses more than 11,000).",
    "PrometheusSettings.demand_metrics": "Default demand queries: `kube-state-metrics` (pod requests) or `kueue` "
    "(ClusterQueue reservation plus the pending work it could still admit under its quota; Kueue v0.18.7 or later: "
    "earlier v0.18 releases can report pending work that is not there, older ones leave every class unavailable).",
    "PrometheusSettings.cluster_selector": "PromQL label matchers naming this cluster's series in a Prometheus view "
    'holding several clusters, e.g. `cluster="prod"` (Google Managed Prometheus: `cluster="prod", '
    'location="europe-west4"`); added to every metric the default queries read. Unset: every series counts.',
    "PrometheusSettings.classes": "Per demand class: a query of its own, or a selector / resource for the default.",
    "PrometheusSettings.pools": "Per pool: how the capacity it really ran is read (`capacity_query`); for an "
    "on-prem pool, also the units the daemon fills it up to at every tick.",
    "ClassQuerySettings.query": "A PromQL query that replaces the default; it must return one series, in accelerators. "
    "Leave out `or vector(0)` (a warning at load names each query with one): it answers 0 while the exporter is down, "
    "where a query that answers nothing holds the class's pools and alerts. Where an absent series really means no "
    "demand, fall back on one that exists while the exporter is up, e.g. `or on() (0 * "
    'count(kube_namespace_created{namespace="team-a"}))`.',
    "ClassQuerySettings.selector": "PromQL label matchers added to the default query of `demand_metrics`. With "
    "`kube-state-metrics` they match the labels of the pods' requests (`namespace`, `pod`, `container`), "
    'e.g. `namespace=~"research|research-batch"` (the class is unavailable unless kube-state-metrics reports every '
    "namespace of such an alternation); a `cluster_queue`, `flavor` or `cohort` matcher (Kueue's labels, "
    "which no pod's requests carry: the class would read 0 while its jobs wait) is refused, and so is a `node` "
    'matcher that rejects an empty node, such as `node=~"gke-ml-a100-.*"` (kube-state-metrics sets `node` from the '
    "pod's `spec.nodeName`, which a pending pod does not have: the class would read its running work alone while its "
    'queue waits); one that keeps it, such as `node!~"gke-ml-t4-.*"`, leaves those nodes\' pods out. Two classes '
    "of one family and resource that both name a namespace (ClusterQueue under `kueue`) with `=` or in such an "
    "alternation are refused when the rest of one's matchers is among the other's: its demand would be counted in "
    "each. Classes of one namespace told apart by other matchers (`pod`, `container`) are not compared: make sure "
    "those select different pods. Under `kueue`, `flavor` and `cohort` matchers do not tell two classes of one "
    "ClusterQueue apart (each counts its whole queue): give each class a ClusterQueue of its own. With `kueue` they "
    "match "
    'the ClusterQueue gauges, e.g. `cluster_queue="team-a", flavor="a100"`: a `cluster_queue` matcher is required, '
    "and `flavor` / `cohort` narrow the reservation and the quota only (the pending gauge has no such labels); "
    "over several ClusterQueues the class is unavailable while any of them misses a gauge.",
    "ClassQuerySettings.resource": "Kubernetes resource name in the default query, e.g. `nvidia.com/gpu` or "
    "`google.com/tpu` (kube-state-metrics reads it sanitized, `google_com_tpu`).",
    "PoolQuerySettings.capacity_query": "A PromQL query for the units the pool really ran (one series, in nodes or "
    'slices), e.g. `count(max by (node) (kube_node_labels{label_cloud_google_com_gke_nodepool="a100"})) or on() '
    '(0 * count(kube_node_labels{label_cloud_google_com_gke_nodepool!=""}))`: `max by (node)` counts a node once '
    "when two kube-state-metrics replicas report it, and the `or` reads 0 while the pool has no nodes but "
    "kube-state-metrics reports nodes with the label (a `count()` alone answers nothing then, and a gap longer than "
    "two steps leaves no `actual` row); `simulate --source prometheus` reports it as the `actual` row. That fallback "
    "also reads 0 when the name in the query matches no node (misspelt): a pool that reads 0 wherever its classes had "
    "demand, no other pool running a unit for them (an on-prem pool: whatever the others ran), leaves no `actual` "
    "row, the results naming the values the label has in Prometheus. "
    "kube-state-metrics (v2.0 on) exports a node label as `label_<name>` only when its `--metric-labels-allowlist` "
    "names it, e.g. `--metric-labels-allowlist=nodes=[pool,cloud.google.com/gke-nodepool]`: without it the query "
    "answers nothing. Never fall back on every node (`count(kube_node_info)`): it reads 0 without the flag, or "
    "while only other nodes are reported. For an on-prem pool the daemon also reads it at every tick as the units "
    "that can take work now, and fills the pool only that far: count its Ready, schedulable nodes whose GPUs are "
    "allocatable, with a fallback on the pool's own label, not on any value of it, e.g. `... or on() (0 * "
    'count(kube_node_labels{label_pool="onprem-a100"}))` (README, On-prem capacity): a misspelt name then answers '
    "nothing, and the pool is planned on its `max_units` with a warning, where a fallback on any value reads 0 and "
    "sends all its work to the cloud (a read below `max_units` is alerted, and a read of 0 names the query); a read "
    "above `max_units` is planned on `max_units` with a warning (most likely nodes counted twice). The query is read "
    "as written: with "
    "`cluster_selector` set, put its matchers on every selector, the fallback's too, or another cluster's nodes "
    "keep the fallback answering 0. Unset, or answering nothing, the pool is planned on its `max_units`. A fallback "
    "of `or vector(0)` answers 0 while kube-state-metrics is down, so the pool reads no nodes: a warning at load "
    "names each such query.",
    # -- daemon
    "DaemonSettings.mode": "`dry-run` (decide, record, alert, change nothing) or `enforce` (act on the pools).",
    "DaemonSettings.endpoints": "The HTTP server of each replica.",
    "DaemonSettings.leader_election": "Which replica plans and acts.",
    "DaemonSettings.kubernetes": "How the Kubernetes API is reached.",
    "DaemonSettings.state": "Where the planner's memory is kept.",
    "DaemonSettings.misfire_grace": "A tick that could not start within this of its slot is skipped, never run late "
    "(duration, at least 1s: the scheduler counts whole seconds).",
    "DaemonSettings.daily_report_at": "UTC time of day (HH:MM) of the daily Slack report.",
    "EndpointSettings.bind_address": "Address the HTTP server listens on.",
    "EndpointSettings.port": "Port of /healthz, /readyz and /metrics.",
    "EndpointSettings.ready_max_tick_age": "/readyz fails when the last successful tick is older than this "
    "(duration, longer than `loop.tick_interval`; unset: three tick intervals).",
    "EndpointSettings.live_max_tick_duration": "/healthz fails while one tick has been running longer than this, so "
    "the kubelet restarts a replica whose tick is stuck and the standby takes over (duration, longer than "
    "`loop.tick_interval`: a tick's demand reads alone may take `loop.read_deadline`, half a tick by default; unset: "
    "ten tick intervals, at least 10m).",
    "LeaderElectionSettings.enabled": "Elect a leader on a Lease, so that one replica plans and acts (turn off only "
    "for a single replica). A live `leadtime run` in a pod refuses it off unless the pod sets "
    "LEADTIME_SINGLE_REPLICA=true, as only the one replica of a Recreate Deployment may. A rehearsal (`leadtime run "
    "--replay`) acts on no cluster: off is accepted anywhere, in a pod too; on, it elects on the Lease "
    "`<lease_name>-rehearsal`, never the daemon's own, and so still needs the Kubernetes API.",
    "LeaderElectionSettings.lease_name": "Name of the Lease (a rehearsal, `leadtime run --replay`, elects on "
    "`<lease_name>-rehearsal`).",
    "LeaderElectionSettings.lease_namespace": "Namespace of the Lease (unset: the pod's namespace; outside a pod, "
    "`default`).",
    "LeaderElectionSettings.lease_duration": "How long a standby waits on an unchanged Lease before it takes over "
    "(duration).",
    "LeaderElectionSettings.renew_deadline": "A leader that could not renew for this long stops acting (duration; "
    "shorter than the lease duration). Each cloud write of the leader is sent only while this much leadership is "
    "left and has a time limit of `lease_duration - renew_deadline` or `renew_deadline - retry_period`, whichever "
    "is shorter (5s with the defaults): each must be at least 1s; keep both at a few seconds or more.",
    "LeaderElectionSettings.retry_period": "Time between attempts to acquire or renew the Lease (duration, at least "
    "500ms: each attempt of the leader is two requests to the API server).",
    "LeaderElectionSettings.identity_env": "Environment variable holding this replica's identity (the pod name).",
    "KubernetesApiSettings.api_url": "API server URL of a local test server, called with no credentials (no token, no "
    "client certificate); "
    "when set it is used even in a pod, instead of the pod's service account (a warning at start says so). Unset: "
    "the pod's service account in-cluster, else the local kubeconfig.",
    "KubernetesApiSettings.request_timeout": "Timeout of every Kubernetes API call (duration, at least 1s, and "
    "with leader election no longer than `lease_duration - renew_deadline`: a drain's eviction must not land after "
    "a standby could take over).",
    "StateSettings.config_map_name": "ConfigMap holding the planner's memory.",
    "StateSettings.config_map_namespace": "Its namespace (unset: the Lease's namespace).",
    # -- cloud
    "CloudSettings.project": "Google Cloud project of the cluster.",
    "CloudSettings.location": "Region or zone of the GKE cluster.",
    "CloudSettings.cluster": "Name of the GKE cluster.",
    "CloudSettings.node_pools": "GKE node pools resized by node count (GPU pools).",
    "CloudSettings.tpu_slice_groups": "Multi-host TPU slice groups.",
    "CloudSettings.queued_resources": "Cloud TPU queued resources.",
    "CloudSettings.endpoint": "One API endpoint for every Google client (for a local test server; unset in "
    "production).",
    "CloudSettings.drain_timeout": "A drain still blocked by disruption budgets after this long gives up and "
    "uncordons the node; a node left only with evicted pods still terminating, seen so by the agent for their grace "
    "periods and two minutes (stuck, whatever the node's state) or for their grace periods and a minute on a node "
    "whose kubelet is gone (`Unknown`), is removed, so a drain ends by this plus the longest grace period and two "
    "minutes (duration).",
    "CloudSettings.zone_backoff": "A zone of a node pool that ran out of capacity (a refused resize, or nodes that "
    "could not be created) is left out of that pool's scale-ups for this long; its share goes to the pool's other "
    "zones, and only when no zone can take a node is the pool refused and the demand sent to the next pool "
    "(duration).",
    "NodePoolMapping.pool": "The pool id this node pool is.",
    "NodePoolMapping.node_pool": "Name of the GKE node pool.",
    "NodePoolMapping.gke_autoscaling": "When GKE's own autoscaler is on: `refuse` to touch the pool, or "
    "`move-bounds`: set the autoscaler's total min and max to the target, and on a scale-up also resize the pool's "
    "instance groups to it, zone by zone: GKE's autoscaler adds nodes only for pods that cannot be scheduled, never "
    "to reach a raised minimum, so the bounds alone would buy nothing ahead of the queue. At zero nodes the bounds "
    "are 0-1, as GKE refuses a maximum of 0; `refuse` also holds drains (no node of such a pool is cordoned), and "
    "under `move-bounds` the bounds follow a drain down.",
    "TpuSliceGroupMapping.pool": "The pool id this slice group is.",
    "TpuSliceGroupMapping.group": "Name prefix of the slices' node pools (`<group>-<n>`).",
    "TpuSliceGroupMapping.machine_type": "TPU machine type, e.g. `ct5lp-hightpu-4t`.",
    "TpuSliceGroupMapping.tpu_topology": "Slice topology, e.g. `4x4`: `AxB` or `AxBxC`, whole numbers from 1 written "
    "without leading zeros (at most 4 digits each); its chips must equal the pool's chips_per_unit. 2-D (`AxB`) for v3 "
    "(`ct3-`, `ct3p-`), v5e (`ct5lp-`) and v6e (`ct6e-`) machine types, 3-D (`AxBxC`) for v4 (`ct4p-`), v5p (`ct5p-`) "
    "and Ironwood (`tpu7x-`). v5e and v6e take the shapes GKE offers: `1x1`, `2x2`, `2x4`, `4x4`, `4x8`, `8x8`, `8x16` "
    "and `16x16`, each on the machine types that offer it: the 1-chip ones take `1x1` only, the 8-chip ones "
    "(`ct5lp-hightpu-8t`, `ct6e-standard-8t`) `2x4` only, and none takes a shape of fewer chips than its host. The "
    "dimensions of a v4 topology must all be at most 4 or all be multiples of 4. GKE refuses another topology, and so "
    "does the loader (other machine types are not checked). Ironwood slices are single-host only (`2x2x1`, one host of "
    "4 chips), and the loader refuses a larger one: GKE creates a multi-host Ironwood slice with a workload policy in "
    "place of a topology, and leadtime creates no workload policy; use another TPU generation for multi-host slices.",
    "TpuSliceGroupMapping.chips_per_host": (
        "TPU chips per host of the machine type; unset: the number in the machine type's `-<N>t` suffix (8 for "
        "`ct6e-standard-8t`), else 4. A value the suffix contradicts is refused."
    ),
    "TpuSliceGroupMapping.zone": "Zone of the slices; required when `location` is a region (unset: the zonal "
    "cluster's zone).",
    "TpuSliceGroupMapping.spot": "Create the slices as Spot capacity.",
    "TpuSliceGroupMapping.service_account": "Email of the Google service account the slices' nodes run as (GKE's "
    "`NodeConfig.serviceAccount`). Unset: GKE gives each slice the project's Compute Engine default service account, "
    "and `validate-config` and the agent's start warn. Either way the agent's own account needs "
    "`iam.serviceAccounts.actAs` on it (`roles/iam.serviceAccountUser`, docs/google-cloud.md).",
    "TpuSliceGroupMapping.oauth_scopes": "Access scopes of the slices' nodes (GKE's `NodeConfig.oauthScopes`); "
    "unset: GKE's default scopes.",
    # -- aws
    "AwsSettings.region": "AWS region of the EKS cluster and Auto Scaling groups, e.g. `us-east-1`.",
    "AwsSettings.cluster": "Name of the EKS cluster (needed for `nodegroups`).",
    "AwsSettings.nodegroups": "EKS managed node groups resized through their scaling config (GPU pools).",
    "AwsSettings.auto_scaling_groups": "EC2 Auto Scaling groups of self-managed GPU nodes.",
    "AwsSettings.endpoint": "One API endpoint for every AWS client (for a local test server; unset in production).",
    "AwsSettings.drain_timeout": "A drain still blocked by disruption budgets after this long gives up and "
    "uncordons the node; a node left only with evicted pods still terminating, seen so by the agent for their grace "
    "periods and two minutes (stuck, whatever the node's state) or for their grace periods and a minute on a node "
    "whose kubelet is gone (`Unknown`), is removed, so a drain ends by this plus the longest grace period and two "
    "minutes (duration).",
    "NodegroupMapping.pool": "The pool id this node group is.",
    "NodegroupMapping.nodegroup": "Name of the EKS managed node group.",
    "AutoScalingGroupMapping.pool": "The pool id this Auto Scaling group is.",
    "AutoScalingGroupMapping.group": "Name of the EC2 Auto Scaling group.",
    "AutoScalingGroupMapping.node_label": "Kubernetes node label whose value is the group's name on its nodes "
    "(how idle nodes of the group are found for draining).",
    "QueuedResourceMapping.pool": "The pool id these queued resources are.",
    "QueuedResourceMapping.group": "Name prefix of the queued resources (`<group>-<n>`).",
    "QueuedResourceMapping.zone": "Zone of the queued resources.",
    "QueuedResourceMapping.accelerator_type": "TPU accelerator type, e.g. `v5litepod-16`.",
    "QueuedResourceMapping.runtime_version": "TPU software version, e.g. `v2-alpha-tpuv5-lite`.",
    "QueuedResourceMapping.chips": "Chips per queued resource; must equal the pool's chips_per_unit.",
    "QueuedResourceMapping.spot": "Ask for Spot capacity.",
    # -- alerts
    "AlertSettings.slack_webhook_url_env": "Environment variable holding the Slack incoming-webhook URL.",
    "AlertSettings.slack_webhook_url_file": "File holding the webhook URL (a mounted Secret); read when set.",
    "AlertSettings.dedup_window": "The same alert is not sent again within this (duration, longer than "
    "`loop.tick_interval`: a shorter window sends an alert that still holds again at every tick).",
    "AlertSettings.resolve_after": "A condition that clears (missing data, a pool unreadable, a projected overspend, "
    "...) is told as resolved once it has gone unseen for this long (duration; 0: at the first tick that finds it "
    "gone), so that one that flickers is not told each way at every tick; a back-off, or a pool blocked or failing, "
    "is resolved when it ends. At most one resolution per condition is told per `dedup_window`.",
    "AlertSettings.rate_limit_per_minute": "Most Slack messages per minute.",
    "AlertSettings.max_retry_after": "Longest Retry-After of a 429 that delivery waits out (duration).",
    "AlertSettings.request_timeout": "Timeout of one Slack request (duration, at least 1s).",
    "AlertSettings.outage_backoff": "After Slack failed, wait this long before trying again (duration, at least 1s).",
    "AlertSettings.max_pending": "Most alerts waiting for delivery; when full the oldest is dropped.",
    "AlertSettings.shutdown_flush_timeout": "On shutdown, how long pending alerts may still be delivered (duration).",
    "AlertSettings.stalled_after_lead_times": "Alert when a scale-up has not arrived after this many of its pool's "
    "lead times. It also sets how long a Cloud TPU queued resource may wait for capacity (its `validUntilDuration`): "
    "a request still waiting then is deleted and the pool backs off, as on a stockout; and how long a GKE TPU slice "
    "may stay short of hosts for a stockout or an exhausted quota: a slice still short then is deleted and its group "
    "backs off.",
    # -- ledger
    "LedgerSettings.backend": "`sqlite` (a file that survives restarts), `postgresql` (a database shared by "
    "replicas and agents) or `memory` (simulations).",
    "LedgerSettings.path": "File of the SQLite ledger; one process at a time writes it (lock file `<path>.lock`).",
    "LedgerSettings.fresh_if_empty": "Start a new ledger in a zero-length ledger file instead of refusing it "
    "(month-to-date spend restarts at zero).",
    "LedgerSettings.shared_file": "The daemon's replicas share the SQLite file (one volume): only the leader "
    "writes it, standbys open it read-only and never record or reserve; a new leader resumes from the file.",
    "LedgerSettings.reservation_ttl": "How long a reservation counts against a shared budget when nobody renews "
    "it (duration, at least 1m; never past the end of the cap's period): what an agent's pools hold is reserved "
    "again every tick, so this is how long the units of an agent that stopped keep counting; reservations of "
    "scale-ups not carried out are released at once.",
    "LedgerSettings.retention": "How long a history the SQLite and PostgreSQL ledgers keep (duration, at least "
    "64d; null: all of it): entries and billed costs that ended longer ago are removed as spend is recorded, except "
    "each pool's first record. The default keeps 13 months and more.",
    "LedgerSettings.url": "PostgreSQL ledger: `postgresql://USER@HOST:PORT/DATABASE`, without a password.",
    "LedgerSettings.password_env": "Environment variable holding the PostgreSQL password (read when no "
    "`password_file` is set).",
    "LedgerSettings.password_file": "File holding the PostgreSQL password (a mounted Secret); read when set.",
    "LedgerSettings.sslmode": "TLS to PostgreSQL: `disable`, `allow`, `prefer`, `require`, `verify-ca` or "
    "`verify-full` (use `verify-full` in production).",
    "LedgerSettings.sslrootcert": "CA certificate file that the PostgreSQL server certificate is checked against.",
    "LedgerSettings.connect_timeout": "Timeout of one connection attempt to PostgreSQL (duration, at least 1s).",
    "LedgerSettings.billing": "How a Cloud Billing export's rows are matched to pools.",
    "BillingSettings.label": "Label whose value names a row's node pool (GKE sets `goog-k8s-node-pool-name` on its "
    "nodes' VMs).",
    "BillingSettings.cluster_label": "Label whose value names a row's cluster (GKE: `goog-k8s-cluster-name`).",
    "BillingSettings.cluster": (
        "Rows whose `cluster_label` names another cluster are not this agent's; unset: `cloud.cluster` when there "
        "is a `cloud` section, else none (then a pool whose rows name several clusters is refused)."
    ),
    "BillingSettings.pools": "Pool id -> value of `label` for that pool (a value equal to a pool id matches it too).",
    "BillingSettings.resource_prefixes": "Pool id -> prefix of the detailed export's `resource.name` (or the last "
    "segment of `resource.global_name`), for rows without the label.",
    "LedgerSettings.gap_after": "A silence between two observations of a pool longer than this (and than 1.5 "
    "ticks) is a gap, charged at the larger capacity on either side (duration).",
}
