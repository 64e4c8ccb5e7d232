"""controller layer: the runtime that carries plans out as API calls, drawn as in
controller-runtime.

sources (informers and their caches, each change mapped to the RayCluster it concerns),
controller (work queue, workers, the result -> requeue policy with terminal errors),
reconciler (read the caches, call ``planning.plan_pass``, execute the writes, record
outcomes), serving (metrics, probes, leader election), and manager, which composes them.
Beneath: store/informer, workqueue/ratelimit, expectations/writer, events, metrics, logs;
install holds the operator's own RBAC and Deployment.
"""
